package estimator

import (
	"context"
	"slices"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// Mode is what a model is built for: tf.estimator.ModeKeys, with its string values.
type Mode string

// The modes.
const (
	ModeTrain   Mode = "train"
	ModeEval    Mode = "eval"
	ModePredict Mode = "infer"
)

// StepOutput is what one train or eval step of a model computed on its batch.
type StepOutput struct {
	// Loss is the batch's loss (the value the train step minimised).
	Loss float64
	// Examples is how many examples the batch held (for throughput).
	Examples int
	// Labels and Predictions are the batch's labels and predicted probabilities, in the same
	// order; an eval step must return them for the spec's EvalMetrics.
	Labels      []float32
	Predictions []float32
	// Values are other numbers the step computed, for hooks.
	Values map[string]float64
}

// Metric is an evaluation metric (one of TF's eval_metric_ops): it accumulates batches and reports
// a value over every batch seen.
type Metric interface {
	Update(labels, predictions []float32) error
	Value() float64
}

// EstimatorSpec is what a model builds for one mode (the reference's EstimatorSpec, and
// tf.estimator.EstimatorSpec whose mode, train_op, eval_metric_ops and predictions it adds): the
// operations the estimator runs on each batch. Without a graph, loss, labels and predictions are
// not tensors but what each step returns (StepOutput).
type EstimatorSpec[B any] struct {
	// Mode is the mode the spec was built for; Replace never changes it.
	Mode Mode
	// TrainOp runs one training step on a batch: it updates the model's variables and returns the
	// batch's loss. Required in ModeTrain.
	TrainOp func(ctx context.Context, batch B) (StepOutput, error)
	// EvalOp computes a batch's loss, labels and predictions without changing the variables.
	// Required in ModeEval.
	EvalOp func(ctx context.Context, batch B) (StepOutput, error)
	// EvalMetrics are updated with every eval step's labels and predictions; their values are the
	// evaluation's result. The model builds them fresh for each spec.
	EvalMetrics map[string]Metric
	// Predictions computes a batch's named outputs. Required in ModePredict.
	Predictions func(ctx context.Context, batch B) (map[string][]float32, error)
	// HeadName and Classification are the reference's per-head metadata: the name of each predict
	// output and whether it is a classification head.
	HeadName       []string
	Classification []bool
}

// Replace returns a copy of s changed by edit (EstimatorSpec._replace). Changing the mode is an
// error of kind Value, as in the reference (whose own spec has no mode field, so its check fails
// with an AttributeError instead; this does what it means).
func (s EstimatorSpec[B]) Replace(edit func(*EstimatorSpec[B])) (EstimatorSpec[B], error) {
	c := s
	c.EvalMetrics = make(map[string]Metric, len(s.EvalMetrics))
	for k, v := range s.EvalMetrics {
		c.EvalMetrics[k] = v
	}
	c.HeadName = slices.Clone(s.HeadName)
	c.Classification = slices.Clone(s.Classification)
	edit(&c)
	if c.Mode != s.Mode {
		return s, errkind.New(errkind.Value, "mode of EstimatorSpec cannot be changed.")
	}
	return c, nil
}

// validate checks that s was built for mode and has what mode runs.
func (s EstimatorSpec[B]) validate(mode Mode) error {
	if s.Mode != mode {
		return errkind.New(errkind.Value, "estimator: the model built a spec for mode %q, asked for %q", s.Mode, mode)
	}
	switch {
	case mode == ModeTrain && s.TrainOp == nil:
		return errkind.New(errkind.Value, "estimator: the train spec has no TrainOp")
	case mode == ModeEval && s.EvalOp == nil:
		return errkind.New(errkind.Value, "estimator: the eval spec has no EvalOp")
	case mode == ModePredict && s.Predictions == nil:
		return errkind.New(errkind.Value, "estimator: the predict spec has no Predictions")
	}
	return nil
}

// Tensor is a named dense value a checkpoint holds: Float32 holds a float32 tensor's values,
// Float64 a float64 tensor's, Int64 an int64 tensor's, row-major, as many as the product of Shape
// (1 for a scalar). It has the fields of the checkpoint package's dense tensor, so a Checkpointer
// over it only copies.
type Tensor struct {
	Name    string
	Shape   []int64
	Float32 []float32
	Float64 []float64
	Int64   []int64
}

// clone returns a deep copy of t.
func (t Tensor) clone() Tensor {
	return Tensor{Name: t.Name, Shape: slices.Clone(t.Shape), Float32: slices.Clone(t.Float32),
		Float64: slices.Clone(t.Float64), Int64: slices.Clone(t.Int64)}
}

// Variables are a model's dense parameters, as checkpoints save and restore them.
type Variables interface {
	// Tensors returns copies of the parameters, each under a unique name.
	Tensors() []Tensor
	// Assign sets the parameters from tensors (a checkpoint's). A tensor the model needs that is
	// missing, or has the wrong shape, is an error.
	Assign(tensors []Tensor) error
}

// Model is what an Estimator trains: its variables and, per mode, the spec of the operations to
// run (the model_fn).
type Model[B any] interface {
	Variables
	// Spec builds the spec for mode; it is called once per Train, Evaluate or evaluation during
	// TrainAndEvaluate.
	Spec(ctx context.Context, mode Mode) (EstimatorSpec[B], error)
}

// Input yields the batches of one pass over a data set (what an input_fn's dataset iterates).
type Input[B any] interface {
	// Next returns the next batch, or io.EOF (possibly wrapped) when the input is over.
	Next(ctx context.Context) (B, error)
	Close() error
}

// InputFn opens the input of a Train or Evaluate call (the input_fn).
type InputFn[B any] func(ctx context.Context, mode Mode) (Input[B], error)
