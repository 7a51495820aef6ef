// Package logreg is a plain logistic regression for click prediction, an estimator.Model over
// pkg/trainer/batch batches: a bias, one weight per dense value and one per hash bucket of the
// feature ids (fids hashed into a fixed number of buckets, summed when an example has several),
// trained on the mean log loss by Adagrad (TensorFlow's AdagradOptimizer) or plain SGD. The dense
// algebra uses gonum.
package logreg

import (
	"context"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/estimator"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
	"github.com/monolith-go/monolith/pkg/trainer/metrics"
)

// Optimizer names an update rule.
type Optimizer string

// The optimizers.
const (
	Adagrad Optimizer = "adagrad"
	SGD     Optimizer = "sgd"
)

// Defaults of Config.
const (
	DefaultHashBuckets        = 1 << 18
	DefaultLearningRate       = 0.5
	DefaultInitialAccumulator = 0.1
)

// Config configures a Model. Zero fields take the defaults.
type Config struct {
	// DenseDim is the number of dense values of each example (batch.Schema.DenseDim).
	DenseDim int
	// HashBuckets is the number of fid weights (default DefaultHashBuckets).
	HashBuckets int
	// Optimizer is Adagrad (default) or SGD.
	Optimizer Optimizer
	// LearningRate is the step size (default DefaultLearningRate).
	LearningRate float64
	// InitialAccumulator starts Adagrad's accumulators (default DefaultInitialAccumulator, as
	// TensorFlow's initial_accumulator_value).
	InitialAccumulator float64
}

// Model is the logistic regression; its weights start at zero. It is not safe for concurrent use.
type Model struct {
	cfg    Config
	bias   float64
	dense  *mat.VecDense // nil when DenseDim is 0
	hashed []float64

	// Adagrad's accumulators.
	accBias   float64
	accDense  *mat.VecDense
	accHashed []float64

	// scratch holds a batch's hashed gradient at the buckets in touched (marked in isTouched);
	// zero elsewhere.
	scratch   []float64
	isTouched []bool
	touched   []int
}

var _ estimator.Model[*batch.Batch] = (*Model)(nil)

// New returns a model of cfg with zero weights.
func New(cfg Config) (*Model, error) {
	if cfg.HashBuckets == 0 {
		cfg.HashBuckets = DefaultHashBuckets
	}
	if cfg.Optimizer == "" {
		cfg.Optimizer = Adagrad
	}
	if cfg.LearningRate == 0 {
		cfg.LearningRate = DefaultLearningRate
	}
	if cfg.InitialAccumulator == 0 {
		cfg.InitialAccumulator = DefaultInitialAccumulator
	}
	switch {
	case cfg.DenseDim < 0 || cfg.HashBuckets < 1:
		return nil, errkind.New(errkind.Value, "logreg: dense dim %d must not be negative and hash buckets %d must be positive", cfg.DenseDim, cfg.HashBuckets)
	case cfg.Optimizer != Adagrad && cfg.Optimizer != SGD:
		return nil, errkind.New(errkind.Value, "logreg: unknown optimizer %q (adagrad, sgd)", cfg.Optimizer)
	case !(cfg.LearningRate > 0) || !(cfg.InitialAccumulator > 0):
		return nil, errkind.New(errkind.Value, "logreg: learning rate %v and initial accumulator %v must be positive", cfg.LearningRate, cfg.InitialAccumulator)
	}
	m := &Model{cfg: cfg, hashed: make([]float64, cfg.HashBuckets),
		scratch: make([]float64, cfg.HashBuckets), isTouched: make([]bool, cfg.HashBuckets)}
	if cfg.DenseDim > 0 {
		m.dense = mat.NewVecDense(cfg.DenseDim, nil)
	}
	if cfg.Optimizer == Adagrad {
		m.accBias = cfg.InitialAccumulator
		m.accHashed = make([]float64, cfg.HashBuckets)
		for i := range m.accHashed {
			m.accHashed[i] = cfg.InitialAccumulator
		}
		if cfg.DenseDim > 0 {
			acc := make([]float64, cfg.DenseDim)
			for i := range acc {
				acc[i] = cfg.InitialAccumulator
			}
			m.accDense = mat.NewVecDense(cfg.DenseDim, acc)
		}
	}
	return m, nil
}

// Bucket is the weight index of fid: a splitmix64 mix of the fid, modulo the buckets.
func (m *Model) Bucket(fid uint64) int {
	z := fid + 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	z ^= z >> 31
	return int(z % uint64(m.cfg.HashBuckets))
}

// denseMatrix is the batch's dense rows as a gonum matrix (nil without dense values).
func (m *Model) denseMatrix(b *batch.Batch) (*mat.Dense, error) {
	if b.Size() == 0 {
		return nil, errkind.New(errkind.Value, "logreg: empty batch")
	}
	if b.DenseDim != m.cfg.DenseDim || len(b.Dense) != b.Size()*b.DenseDim || len(b.Fids) != b.Size() {
		return nil, errkind.New(errkind.Value, "logreg: batch of %d examples with %d dense values each (%d in all) and %d fid lists; the model takes %d dense values",
			b.Size(), b.DenseDim, len(b.Dense), len(b.Fids), m.cfg.DenseDim)
	}
	if m.cfg.DenseDim == 0 {
		return nil, nil
	}
	x := make([]float64, len(b.Dense))
	for i, v := range b.Dense {
		x[i] = float64(v)
	}
	return mat.NewDense(b.Size(), m.cfg.DenseDim, x), nil
}

// logits computes each example's logit.
func (m *Model) logits(b *batch.Batch) (*mat.Dense, *mat.VecDense, error) {
	x, err := m.denseMatrix(b)
	if err != nil {
		return nil, nil, err
	}
	z := mat.NewVecDense(b.Size(), nil)
	if x != nil {
		z.MulVec(x, m.dense)
	}
	for i, fids := range b.Fids {
		s := m.bias
		for _, f := range fids {
			s += m.hashed[m.Bucket(f)]
		}
		z.SetVec(i, z.AtVec(i)+s)
	}
	return x, z, nil
}

// Predict returns each example's click probability.
func (m *Model) Predict(b *batch.Batch) ([]float64, error) {
	_, z, err := m.logits(b)
	if err != nil {
		return nil, err
	}
	p := make([]float64, z.Len())
	for i := range p {
		p[i] = sigmoid(z.AtVec(i))
	}
	return p, nil
}

func sigmoid(z float64) float64 {
	if z >= 0 {
		return 1 / (1 + math.Exp(-z))
	}
	e := math.Exp(z)
	return e / (1 + e)
}

// logLoss is the log loss of logit z for label y, computed without overflow:
// max(z, 0) - z*y + log(1 + exp(-|z|)).
func logLoss(z, y float64) float64 {
	return math.Max(z, 0) - z*y + math.Log1p(math.Exp(-math.Abs(z)))
}

// Gradient is the gradient of the batch's mean log loss.
type Gradient struct {
	Bias  float64
	Dense []float64
	// Hashed holds the buckets the batch's fids fall in.
	Hashed map[int]float64
}

// lossAndGradient computes the batch's mean log loss and leaves its gradient in the returned
// bias and dense parts and in m.scratch at m.touched.
func (m *Model) lossAndGradient(b *batch.Batch) (loss, gBias float64, gDense *mat.VecDense, err error) {
	x, z, err := m.logits(b)
	if err != nil {
		return 0, 0, nil, err
	}
	n := float64(b.Size())
	// d(mean loss)/dz_i = (p_i - y_i) / n.
	g := mat.NewVecDense(b.Size(), nil)
	for i := range b.Size() {
		zi, yi := z.AtVec(i), float64(b.Labels[i])
		loss += logLoss(zi, yi)
		gi := (sigmoid(zi) - yi) / n
		g.SetVec(i, gi)
		gBias += gi
		for _, f := range b.Fids[i] {
			k := m.Bucket(f)
			if !m.isTouched[k] {
				m.isTouched[k] = true
				m.touched = append(m.touched, k)
			}
			m.scratch[k] += gi
		}
	}
	if x != nil {
		gDense = mat.NewVecDense(m.cfg.DenseDim, nil)
		gDense.MulVec(x.T(), g)
	}
	return loss / n, gBias, gDense, nil
}

func (m *Model) clearScratch() {
	for _, k := range m.touched {
		m.scratch[k], m.isTouched[k] = 0, false
	}
	m.touched = m.touched[:0]
}

// LossAndGradient returns the batch's mean log loss and its gradient, changing nothing.
func (m *Model) LossAndGradient(b *batch.Batch) (float64, Gradient, error) {
	defer m.clearScratch()
	loss, gb, gd, err := m.lossAndGradient(b)
	if err != nil {
		return 0, Gradient{}, err
	}
	g := Gradient{Bias: gb, Hashed: make(map[int]float64, len(m.touched))}
	if gd != nil {
		g.Dense = mat.Col(nil, 0, gd)
	}
	for _, k := range m.touched {
		g.Hashed[k] = m.scratch[k]
	}
	return loss, g, nil
}

// Step trains on one batch: it computes the mean log loss and its gradient and applies one update.
// It returns the loss before the update.
func (m *Model) Step(b *batch.Batch) (float64, error) {
	defer m.clearScratch()
	loss, gb, gd, err := m.lossAndGradient(b)
	if err != nil {
		return 0, err
	}
	lr := m.cfg.LearningRate
	switch m.cfg.Optimizer {
	case SGD:
		m.bias -= lr * gb
		if gd != nil {
			m.dense.AddScaledVec(m.dense, -lr, gd)
		}
		for _, k := range m.touched {
			m.hashed[k] -= lr * m.scratch[k]
		}
	case Adagrad:
		m.accBias += gb * gb
		m.bias -= lr * gb / math.Sqrt(m.accBias)
		if gd != nil {
			sq := mat.NewVecDense(gd.Len(), nil)
			sq.MulElemVec(gd, gd)
			m.accDense.AddVec(m.accDense, sq)
			for i := range gd.Len() {
				m.dense.SetVec(i, m.dense.AtVec(i)-lr*gd.AtVec(i)/math.Sqrt(m.accDense.AtVec(i)))
			}
		}
		for _, k := range m.touched {
			gk := m.scratch[k]
			m.accHashed[k] += gk * gk
			m.hashed[k] -= lr * gk / math.Sqrt(m.accHashed[k])
		}
	}
	return loss, nil
}

// Spec builds the estimator spec of mode: the train step, or the eval step with the AUC and
// log loss metrics, or the predictions ("probability").
func (m *Model) Spec(_ context.Context, mode estimator.Mode) (estimator.EstimatorSpec[*batch.Batch], error) {
	s := estimator.EstimatorSpec[*batch.Batch]{Mode: mode, HeadName: []string{"ctr"}, Classification: []bool{true}}
	switch mode {
	case estimator.ModeTrain:
		s.TrainOp = func(_ context.Context, b *batch.Batch) (estimator.StepOutput, error) {
			loss, err := m.Step(b)
			return estimator.StepOutput{Loss: loss, Examples: b.Size()}, err
		}
	case estimator.ModeEval:
		s.EvalOp = func(_ context.Context, b *batch.Batch) (estimator.StepOutput, error) {
			p, err := m.Predict(b)
			if err != nil {
				return estimator.StepOutput{}, err
			}
			out := estimator.StepOutput{Examples: b.Size(), Labels: b.Labels, Predictions: make([]float32, len(p))}
			for i, pi := range p {
				out.Predictions[i] = float32(pi)
				out.Loss += metrics.Loss(float64(b.Labels[i]), pi)
			}
			out.Loss /= float64(len(p))
			return out, nil
		}
		s.EvalMetrics = map[string]estimator.Metric{"auc": metrics.NewAUC(), "log_loss": &metrics.LogLoss{}}
	case estimator.ModePredict:
		s.Predictions = func(_ context.Context, b *batch.Batch) (map[string][]float32, error) {
			p, err := m.Predict(b)
			if err != nil {
				return nil, err
			}
			out := make([]float32, len(p))
			for i, pi := range p {
				out[i] = float32(pi)
			}
			return map[string][]float32{"probability": out}, nil
		}
	default:
		return s, errkind.New(errkind.Value, "logreg: unknown mode %q", mode)
	}
	return s, nil
}

// The variables' names in checkpoints; Adagrad's accumulators are the variables' slots.
const (
	BiasName   = "logreg/bias"
	DenseName  = "logreg/dense"
	HashedName = "logreg/hashed"
	// AccumulatorSuffix names a variable's Adagrad accumulator: <variable>/Adagrad.
	AccumulatorSuffix = "/Adagrad"
)

type variable struct {
	name   string
	values func() []float64
	set    func([]float64)
}

func (m *Model) variables() []variable {
	vecValues := func(v **mat.VecDense) func() []float64 {
		return func() []float64 {
			if *v == nil {
				return []float64{}
			}
			return mat.Col(nil, 0, *v)
		}
	}
	vecSet := func(v **mat.VecDense) func([]float64) {
		return func(x []float64) {
			if len(x) > 0 {
				*v = mat.NewVecDense(len(x), x)
			}
		}
	}
	vars := []variable{
		{BiasName, func() []float64 { return []float64{m.bias} }, func(x []float64) { m.bias = x[0] }},
		{DenseName, vecValues(&m.dense), vecSet(&m.dense)},
		{HashedName, func() []float64 { return m.hashed }, func(x []float64) { m.hashed = x }},
	}
	if m.cfg.Optimizer == Adagrad {
		vars = append(vars,
			variable{BiasName + AccumulatorSuffix, func() []float64 { return []float64{m.accBias} }, func(x []float64) { m.accBias = x[0] }},
			variable{DenseName + AccumulatorSuffix, vecValues(&m.accDense), vecSet(&m.accDense)},
			variable{HashedName + AccumulatorSuffix, func() []float64 { return m.accHashed }, func(x []float64) { m.accHashed = x }})
	}
	return vars
}

// Tensors returns the weights (and Adagrad's accumulators) as float64 tensors, the model's own
// precision, so a restored model continues exactly where it was saved.
func (m *Model) Tensors() []estimator.Tensor {
	var out []estimator.Tensor
	for _, v := range m.variables() {
		x := v.values()
		out = append(out, estimator.Tensor{Name: v.name, Shape: []int64{int64(len(x))}, Float64: slices.Clone(x)})
	}
	return out
}

// Assign sets the weights (and accumulators) from tensors; each must be there with the model's
// shape. Other tensors are ignored, as a TensorFlow restore ignores variables the graph lacks.
func (m *Model) Assign(ts []estimator.Tensor) error {
	byName := make(map[string]estimator.Tensor, len(ts))
	for _, t := range ts {
		byName[t.Name] = t
	}
	vars := m.variables()
	vals := make([][]float64, len(vars))
	for i, v := range vars {
		t, ok := byName[v.name]
		n := len(v.values())
		if !ok {
			return errkind.New(errkind.NotFound, "logreg: no tensor %s", v.name)
		}
		if len(t.Shape) != 1 || t.Shape[0] != int64(n) || len(t.Float32)+len(t.Float64) != n {
			return errkind.New(errkind.Value, "logreg: tensor %s has shape %v (%d float values), want [%d]", v.name, t.Shape, len(t.Float32)+len(t.Float64), n)
		}
		vals[i] = slices.Clone(t.Float64)
		if t.Float64 == nil { // a float32 checkpoint (warm start from another model)
			vals[i] = make([]float64, n)
			for j, x := range t.Float32 {
				vals[i][j] = float64(x)
			}
		}
	}
	for i, v := range vars {
		v.set(vals[i])
	}
	return nil
}

// String describes the model.
func (m *Model) String() string {
	return fmt.Sprintf("logreg(dense %d, hash buckets %d, %s lr %v)", m.cfg.DenseDim, m.cfg.HashBuckets, m.cfg.Optimizer, m.cfg.LearningRate)
}
