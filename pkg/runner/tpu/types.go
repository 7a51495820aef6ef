package tpu

import (
	"context"

	"github.com/monolith-go/monolith/pkg/runner"
)

// Job modes (the mode flag).
const (
	ModeTrain        = "train"
	ModeEval         = "eval"
	ModeTrainAndEval = "train_and_eval"
)

// ModeKey is tf.estimator.ModeKeys: what an input or model function is built for.
type ModeKey string

// The estimator modes.
const (
	ModeKeyTrain   ModeKey = "train"
	ModeKeyEval    ModeKey = "eval"
	ModeKeyPredict ModeKey = "infer"
)

// NumReplicasPerHost is the number of TPU cores of one host (the reference's
// _num_replicas_per_host).
const NumReplicasPerHost = 8

// TaskParams are the task params the runner reads (the reference's hyperparams object).
type TaskParams struct {
	// Accelerator is set to "tpu" by the runner.
	Accelerator string
	// GradientMultiplier scales the embedding gradients.
	GradientMultiplier float64
	Train              TrainParams
	Eval               EvalParams
	Input              InputParams
	// Instantiate builds the task from the params (task_param.instantiate()); it receives the
	// runner's copy, with accelerator and end_date already set.
	Instantiate func(p TaskParams) (Task, error)
}

// TrainParams are task_param.train.
type TrainParams struct {
	// SaveCheckpointsSteps, when set, wins over the save_checkpoints_steps flag.
	SaveCheckpointsSteps *int64
	// MaxSteps is the step training stops at; nil trains until the input ends.
	MaxSteps *int64
	// PerReplicaBatchSize is the batch size of one TPU core.
	PerReplicaBatchSize int64
	// EndDate is the last date of the training data; nil when the params have no end_date
	// (Python's train.contain("end_date") is false).
	EndDate *string
}

// EvalParams are task_param.eval.
type EvalParams struct {
	// PerReplicaBatchSize is the eval batch size of one TPU core; nil uses the train batch.
	PerReplicaBatchSize *int64
}

// InputParams are task_param.input.
type InputParams struct {
	// EvalExamples is the number of examples one evaluation reads.
	EvalExamples int64
}

// Params are the params the estimator hands to the model and input functions (the reference's
// _create_params dict).
type Params struct {
	ModelDir              string
	EnableHostCall        bool
	NumReplicas           int64
	Accelerator           string
	HostCallEveryNSteps   int64
	EnableStoppingSignals bool
	CPUTest               bool
}

// ModelFn is a task's model function: it builds the model for a batch of features. Features and
// the result are opaque to the runner; the estimator knows them.
type ModelFn func(features any, mode ModeKey, params Params) (any, error)

// InputFn is a task's input function: it yields the batches of one mode. The runner hands it to
// the estimator unchanged.
type InputFn func(params Params) (any, error)

// Task is what task params instantiate (the reference's BaseTask).
type Task interface {
	CreateInputFn(mode ModeKey) (InputFn, error)
	CreateModelFn() (ModelFn, error)
}

// EmbeddingTask is a task with TPU embedding tables (the reference's BaseEmbeddingTask).
type EmbeddingTask interface {
	Task
	// InitSlotToEnv computes the slot configuration the input and model functions read.
	InitSlotToEnv() error
	// CreateFeatureAndTableConfigDict returns the TPU embedding feature and table configs by name.
	CreateFeatureAndTableConfigDict() (features, tables map[string]any, err error)
	// ProcessFeaturesForCPUTest turns TPU features into what the model function takes on CPU.
	ProcessFeaturesForCPUTest(features any) (any, error)
}

// EmbeddingConfig is the TPU embedding part of an estimator (EmbeddingConfigSpec).
type EmbeddingConfig struct {
	FeatureConfigs map[string]any
	TableConfigs   map[string]any
	// PartitionStrategy of the embedding tables: "mod" or "div".
	PartitionStrategy               string
	PipelineExecutionWithTensorCore bool
	// GradientMultiplierFn is experimental_gradient_multiplier_fn.
	GradientMultiplierFn func(globalStep int64) float64
	// Optimizer of the embedding tables: "adagrad" (AdagradParameters).
	Optimizer    string
	LearningRate float64
}

// EstimatorConfig is everything the reference passes to RunConfig, TPUConfig and TPUEstimator.
type EstimatorConfig struct {
	UseTPU bool
	// TPU, TPUZone and GCPProject locate the cluster (TPUClusterResolver); empty on CPU.
	TPU, TPUZone, GCPProject string
	// ModelDir is where checkpoints go; empty on CPU (model_dir=None).
	ModelDir string
	// SaveCheckpointsSteps: nil saves no checkpoints.
	SaveCheckpointsSteps *int64
	IterationsPerLoop    int64
	// HostCallEveryNSteps is experimental_host_call_every_n_steps.
	HostCallEveryNSteps int64
	// PerHostInputForTraining is the InputPipelineConfig: "PER_HOST_V2".
	PerHostInputForTraining string
	// AllowPerHostV2ParallelGetNext is experimental_allow_per_host_v2_parallel_get_next.
	AllowPerHostV2ParallelGetNext bool
	// EndOfStreamFeedHook: experimental_feed_hook is
	// TPUInfeedOutfeedSessionWithEndOfStreamHandlingHook (pkg/core/feedhook).
	EndOfStreamFeedHook bool
	// DisableMetaOptimizer: session_config.graph_options.rewrite_options.disable_meta_optimizer.
	DisableMetaOptimizer bool
	TrainBatchSize       int64
	// EvalBatchSize: nil when not given (CPU).
	EvalBatchSize *int64
	Params        Params
	// Embedding is nil when the task has no feature or no table configs.
	Embedding *EmbeddingConfig
	ModelFn   ModelFn
}

// Estimator trains and evaluates a model (TPUEstimator).
type Estimator interface {
	// Train trains until maxSteps (nil: until the input ends).
	Train(ctx context.Context, input InputFn, maxSteps *int64) error
	// Evaluate evaluates the checkpoint for steps batches and returns the metrics. An error of
	// kind NotFound means the checkpoint no longer exists; the eval loop skips it.
	Evaluate(ctx context.Context, input InputFn, steps int64, checkpoint string) (runner.Logs, error)
}

// TPUClient configures a Cloud TPU (cloud_tpu_client.Client).
type TPUClient interface {
	ConfigureTPUVersion(ctx context.Context, version string) error
	WaitForHealthy(ctx context.Context) error
}

// SummaryFileWriter is the eval loop's summary writer (tbevent.Writer).
type SummaryFileWriter interface {
	runner.SummaryWriter
	Flush() error
	Close() error
}

// Registry finds a task's params by name (model_registry.GetParams).
type Registry interface {
	GetParams(name string) (TaskParams, error)
}

// RegistryFunc adapts a function to Registry.
type RegistryFunc func(name string) (TaskParams, error)

// GetParams calls f.
func (f RegistryFunc) GetParams(name string) (TaskParams, error) { return f(name) }
