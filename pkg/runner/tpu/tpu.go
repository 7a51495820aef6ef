// Package tpu is the Go form of the reference's tpu_runner: a job that trains a task with a TPU
// estimator, or evaluates every checkpoint the training saves and writes the metrics as
// TensorBoard summaries.
//
// TensorFlow, its TPUEstimator and the Cloud TPU client do not exist in Go. The runner keeps every
// decision the reference makes (batch sizes, replicas, estimator and embedding settings, the
// train / eval control flow) and takes what TensorFlow did from an Env: the TPU client, the
// cluster size, the estimator, checkpoint discovery, the clock and the summary writer.
package tpu

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"time"

	tpurunnerspec "github.com/monolith-go/monolith/gen/spec/tpu_runner"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pyint"
	"github.com/monolith-go/monolith/pkg/runner"
	"github.com/monolith-go/monolith/pkg/runner/checkpoint"
	"github.com/monolith-go/monolith/pkg/runner/tbevent"
)

// EvalTimeout is how long the eval loop waits for a new checkpoint before it ends
// (checkpoints_iterator's timeout=60 * 60 * 5).
const EvalTimeout = 5 * time.Hour

// Env is what the runner takes from its surroundings.
type Env struct {
	// NewTPUClient connects to the Cloud TPU; needed when enable_tpu_version_config is set and
	// cpu_test is not.
	NewTPUClient func(ctx context.Context, tpu, zone, project string) (TPUClient, error)
	// NumHosts is the number of TPU worker hosts (TPUClusterResolver's cluster_spec().
	// num_tasks("worker")); needed unless cpu_test.
	NumHosts func(ctx context.Context, tpu, zone, project string) (int, error)
	// NewEstimator builds the estimator; always needed.
	NewEstimator func(ctx context.Context, cfg EstimatorConfig) (Estimator, error)
	// LatestCheckpoint finds the newest checkpoint of a directory, "" when none; nil means
	// checkpoint.Latest.
	LatestCheckpoint func(dir string) (string, error)
	// Clock drives the eval loop's waiting; nil means the system clock.
	Clock checkpoint.Clock
	// EvalTimeout bounds the wait for each new checkpoint; 0 means EvalTimeout.
	EvalTimeout time.Duration
	// NewSummaryWriter opens the eval summary writer of a directory; nil writes TensorBoard event
	// files (tbevent.NewWriter).
	NewSummaryWriter func(dir string) (SummaryFileWriter, error)
	// Logger receives the runner's log lines; nil means slog.Default().
	Logger *slog.Logger
}

// Runner is the reference's TPURunner. It is not safe for concurrent use.
type Runner struct {
	flags                tpurunnerspec.TPURunnerFlags
	params               TaskParams
	env                  Env
	log                  *slog.Logger
	saveCheckpointsSteps *int64
	task                 Task
}

var _ runner.Runner = (*Runner)(nil)

// New builds a runner of the task params p with the given flags (TPURunner.__init__). The
// runner works on a copy of p: its accelerator is "tpu", train.save_checkpoints_steps wins over
// the flag when set, and a non-empty overwrite_end_date replaces train.end_date when p has one.
func New(p TaskParams, flags tpurunnerspec.TPURunnerFlags, env Env) (*Runner, error) {
	if env.Logger == nil {
		env.Logger = slog.Default()
	}
	if env.LatestCheckpoint == nil {
		log := env.Logger
		env.LatestCheckpoint = func(dir string) (string, error) { return checkpoint.Latest(dir, log) }
	}
	if env.Clock == nil {
		env.Clock = checkpoint.SystemClock{}
	}
	if env.EvalTimeout <= 0 {
		env.EvalTimeout = EvalTimeout
	}
	if env.NewSummaryWriter == nil {
		env.NewSummaryWriter = func(dir string) (SummaryFileWriter, error) { return tbevent.NewWriter(dir, tbevent.Options{}) }
	}
	var missing []string
	if env.NewEstimator == nil {
		missing = append(missing, "NewEstimator")
	}
	if !flags.CPUTest {
		if env.NumHosts == nil {
			missing = append(missing, "NumHosts")
		}
		if flags.EnableTPUVersionConfig && env.NewTPUClient == nil {
			missing = append(missing, "NewTPUClient")
		}
	}
	if len(missing) > 0 {
		return nil, errkind.New(errkind.Value, "tpu runner: Env.%v must be set", missing)
	}
	r := &Runner{flags: flags, env: env, log: env.Logger}
	p = cloneParams(p)
	if p.Train.SaveCheckpointsSteps != nil {
		r.saveCheckpointsSteps = p.Train.SaveCheckpointsSteps
		r.log.Info(fmt.Sprintf("Overwrite save_checkpoints_steps by task_param.train: %d", *p.Train.SaveCheckpointsSteps))
	} else {
		if flags.SaveCheckpointsSteps != 0 {
			n := int64(flags.SaveCheckpointsSteps)
			r.saveCheckpointsSteps = &n
		}
		r.log.Info(fmt.Sprintf("Use save_checkpoints_steps by FLAGS: %s", optInt(r.saveCheckpointsSteps)))
	}
	p.Accelerator = "tpu"
	if flags.OverwriteEndDate != "" && p.Train.EndDate != nil {
		d := flags.OverwriteEndDate
		p.Train.EndDate = &d
		r.log.Info(fmt.Sprintf("Use flag end_date %s to replace parameter train.end_date.", d))
	}
	r.params = p
	return r, nil
}

// cloneParams copies p so that the runner's changes do not reach the caller.
func cloneParams(p TaskParams) TaskParams {
	cp := func(v *int64) *int64 {
		if v == nil {
			return nil
		}
		n := *v
		return &n
	}
	p.Train.SaveCheckpointsSteps = cp(p.Train.SaveCheckpointsSteps)
	p.Train.MaxSteps = cp(p.Train.MaxSteps)
	p.Eval.PerReplicaBatchSize = cp(p.Eval.PerReplicaBatchSize)
	if p.Train.EndDate != nil {
		d := *p.Train.EndDate
		p.Train.EndDate = &d
	}
	return p
}

// optInt prints an optional int as Python prints an int or None.
func optInt(v *int64) string {
	if v == nil {
		return "None"
	}
	return fmt.Sprint(*v)
}

// Params returns the runner's task params.
func (r *Runner) Params() TaskParams { return r.params }

// SaveCheckpointsSteps is the checkpoint interval the estimator gets; nil saves none.
func (r *Runner) SaveCheckpointsSteps() *int64 { return r.saveCheckpointsSteps }

// Task is the task Run instantiated, nil before Run.
func (r *Runner) Task() Task { return r.task }

// gradientMultiplier is _experimental_gradient_multiplier_fn.
func (r *Runner) gradientMultiplier(int64) float64 { return r.params.GradientMultiplier }

// EstimatorParams are the params the estimator hands to the task's functions (_create_params).
func (r *Runner) EstimatorParams(totalReplicas int64) Params {
	p := Params{
		ModelDir:              r.flags.ModelDir,
		EnableHostCall:        r.flags.HostCallEveryNSteps > 0,
		NumReplicas:           totalReplicas,
		Accelerator:           r.params.Accelerator,
		HostCallEveryNSteps:   int64(r.flags.HostCallEveryNSteps),
		EnableStoppingSignals: r.flags.EnableStoppingSignals,
		CPUTest:               r.flags.CPUTest,
	}
	r.log.Info(fmt.Sprintf("params: %+v", p))
	return p
}

// hostCallEveryNSteps is experimental_host_call_every_n_steps, which cannot be 0: 100 then.
func (r *Runner) hostCallEveryNSteps() int64 {
	if r.flags.HostCallEveryNSteps == 0 {
		return 100
	}
	return int64(r.flags.HostCallEveryNSteps)
}

// embedding is the EmbeddingConfigSpec, nil unless both config maps are non-empty.
func (r *Runner) embedding(features, tables map[string]any, partition string) *EmbeddingConfig {
	if len(features) == 0 || len(tables) == 0 {
		return nil
	}
	return &EmbeddingConfig{
		FeatureConfigs:                  features,
		TableConfigs:                    tables,
		PartitionStrategy:               partition,
		PipelineExecutionWithTensorCore: r.flags.PipelineExecution,
		GradientMultiplierFn:            r.gradientMultiplier,
		Optimizer:                       "adagrad",
		LearningRate:                    1.0,
	}
}

// CreateTPUEstimator configures the TPU when enable_tpu_version_config is set, sizes the cluster
// and builds the TPU estimator (create_tpu_estimator). It returns the estimator and the number of
// replicas.
func (r *Runner) CreateTPUEstimator(ctx context.Context, modelFn ModelFn, features, tables map[string]any) (Estimator, int64, error) {
	f := r.flags
	if f.EnableTPUVersionConfig {
		r.log.Info(fmt.Sprintf("Enable tpu version config, reset remote tpu version with %s", f.TFVersion))
		client, err := r.env.NewTPUClient(ctx, f.TPU, f.TPUZone, f.GCPProject)
		if err != nil {
			return nil, 0, fmt.Errorf("tpu runner: TPU client: %w", err)
		}
		if err := client.ConfigureTPUVersion(ctx, f.TFVersion); err != nil {
			return nil, 0, fmt.Errorf("tpu runner: configure TPU version %s: %w", f.TFVersion, err)
		}
		if err := client.WaitForHealthy(ctx); err != nil {
			return nil, 0, fmt.Errorf("tpu runner: wait for a healthy TPU: %w", err)
		}
	}
	numHosts, err := r.env.NumHosts(ctx, f.TPU, f.TPUZone, f.GCPProject)
	if err != nil {
		return nil, 0, fmt.Errorf("tpu runner: cluster size: %w", err)
	}
	totalReplicas := int64(NumReplicasPerHost * numHosts)
	trainBatch := totalReplicas * r.params.Train.PerReplicaBatchSize
	r.log.Info(fmt.Sprintf("num_hosts: %d total_replicas: %d train_global_batch_size: %d", numHosts, totalReplicas, trainBatch))
	evalBatch := trainBatch
	if b := r.params.Eval.PerReplicaBatchSize; b != nil {
		evalBatch = *b * totalReplicas
	}
	cfg := EstimatorConfig{
		UseTPU:                        true,
		TPU:                           f.TPU,
		TPUZone:                       f.TPUZone,
		GCPProject:                    f.GCPProject,
		ModelDir:                      f.ModelDir,
		SaveCheckpointsSteps:          r.saveCheckpointsSteps,
		IterationsPerLoop:             int64(f.IterationsPerLoop),
		HostCallEveryNSteps:           r.hostCallEveryNSteps(),
		PerHostInputForTraining:       "PER_HOST_V2",
		AllowPerHostV2ParallelGetNext: true,
		EndOfStreamFeedHook:           f.EnableStoppingSignals,
		DisableMetaOptimizer:          true,
		TrainBatchSize:                trainBatch,
		EvalBatchSize:                 &evalBatch,
		Embedding:                     r.embedding(features, tables, f.PartitionStrategy),
		Params:                        r.EstimatorParams(totalReplicas),
		ModelFn:                       modelFn,
	}
	est, err := r.env.NewEstimator(ctx, cfg)
	if err != nil {
		return nil, 0, fmt.Errorf("tpu runner: build the TPU estimator: %w", err)
	}
	return est, totalReplicas, nil
}

// CPUTrainBatchSize is the train batch of the CPU test estimator.
const CPUTrainBatchSize = 128

// CreateTPUEstimatorOnCPU builds the TPU estimator with use_tpu=False, for quick tests on a CPU
// (create_tpu_estimator_on_cpu). It returns the estimator and the number of replicas, 1.
func (r *Runner) CreateTPUEstimatorOnCPU(ctx context.Context, modelFn ModelFn, features, tables map[string]any) (Estimator, int64, error) {
	const totalReplicas = 1
	cfg := EstimatorConfig{
		SaveCheckpointsSteps:          r.saveCheckpointsSteps,
		IterationsPerLoop:             int64(r.flags.IterationsPerLoop),
		HostCallEveryNSteps:           r.hostCallEveryNSteps(),
		PerHostInputForTraining:       "PER_HOST_V2",
		AllowPerHostV2ParallelGetNext: true,
		TrainBatchSize:                CPUTrainBatchSize,
		// The reference passes no partition_strategy here: EmbeddingConfigSpec's default.
		Embedding: r.embedding(features, tables, "div"),
		Params:    r.EstimatorParams(totalReplicas),
		ModelFn:   modelFn,
	}
	est, err := r.env.NewEstimator(ctx, cfg)
	if err != nil {
		return nil, 0, fmt.Errorf("tpu runner: build the CPU estimator: %w", err)
	}
	return est, totalReplicas, nil
}

// currentStep is the step training resumes from: the step of the latest checkpoint, 0 without one
// (the reference reads the checkpoint's global_step tensor and falls back to 0 on any failure).
func (r *Runner) currentStep() int64 {
	if r.flags.ModelDir == "" {
		return 0
	}
	ckpt, err := r.env.LatestCheckpoint(r.flags.ModelDir)
	if err != nil || ckpt == "" {
		return 0
	}
	step, err := checkpoint.StepOf(ckpt)
	if err != nil {
		return 0
	}
	return step
}

// Run runs the job of the mode flag (TPURunner.run): train, or evaluate each new checkpoint.
// train_and_eval is an error of kind Type, as in the reference.
func (r *Runner) Run(ctx context.Context) error {
	mode := r.flags.Mode
	switch mode {
	case ModeTrain, ModeEval:
	default:
		return errkind.New(errkind.Type, "%s has not been supported.", mode)
	}
	r.log.Info(fmt.Sprintf("Current step :%d", r.currentStep()))

	if r.params.Instantiate == nil {
		return errkind.New(errkind.Type, "tpu runner: the task params have no Instantiate")
	}
	task, err := r.params.Instantiate(r.params)
	if err != nil {
		return fmt.Errorf("tpu runner: instantiate the task: %w", err)
	}
	r.task = task
	var features, tables map[string]any
	if embTask, ok := task.(EmbeddingTask); ok {
		if err := embTask.InitSlotToEnv(); err != nil {
			return fmt.Errorf("tpu runner: init slots: %w", err)
		}
		if features, tables, err = embTask.CreateFeatureAndTableConfigDict(); err != nil {
			return fmt.Errorf("tpu runner: embedding configs: %w", err)
		}
	}
	trainInput, err := task.CreateInputFn(ModeKeyTrain)
	if err != nil {
		return fmt.Errorf("tpu runner: train input: %w", err)
	}
	modelFn, err := task.CreateModelFn()
	if err != nil {
		return fmt.Errorf("tpu runner: model function: %w", err)
	}
	if r.flags.CPUTest && mode != ModeTrain {
		return errkind.New(errkind.Precondition, "Cpu test can only work with train mode.")
	}

	var est Estimator
	var totalReplicas int64
	if r.flags.CPUTest {
		// The reference calls task.process_features_for_cpu_test in the model function and fails
		// there with AttributeError when the task has none; here that is found before training.
		proc, ok := task.(interface {
			ProcessFeaturesForCPUTest(features any) (any, error)
		})
		if !ok {
			return errkind.New(errkind.Attribute, "tpu runner: task %T has no ProcessFeaturesForCPUTest, which the CPU test needs", task)
		}
		wrapped := func(features any, mode ModeKey, params Params) (any, error) {
			features, err := proc.ProcessFeaturesForCPUTest(features)
			if err != nil {
				return nil, fmt.Errorf("tpu runner: process features for the CPU test: %w", err)
			}
			return modelFn(features, mode, params)
		}
		est, totalReplicas, err = r.CreateTPUEstimatorOnCPU(ctx, wrapped, features, tables)
	} else {
		est, totalReplicas, err = r.CreateTPUEstimator(ctx, modelFn, features, tables)
	}
	if err != nil {
		return err
	}

	if mode == ModeTrain {
		if err := est.Train(ctx, trainInput, r.params.Train.MaxSteps); err != nil {
			return fmt.Errorf("tpu runner: train: %w", err)
		}
		return nil
	}
	return r.eval(ctx, task, est, totalReplicas)
}

// eval evaluates each new checkpoint until one reaches train.max_steps or none comes within the
// timeout, writing each checkpoint's metrics as a summary of its step into <model_dir>/eval.
func (r *Runner) eval(ctx context.Context, task Task, est Estimator, totalReplicas int64) error {
	maxSteps := r.params.Train.MaxSteps
	perReplica := r.params.Eval.PerReplicaBatchSize
	switch {
	case r.flags.ModelDir == "":
		return errkind.New(errkind.Type, "tpu runner: eval needs model_dir")
	case perReplica == nil:
		return errkind.New(errkind.Type, "tpu runner: eval needs eval.per_replica_batch_size")
	case maxSteps == nil:
		return errkind.New(errkind.Type, "tpu runner: eval needs train.max_steps to know when to stop")
	}
	evalInput, err := task.CreateInputFn(ModeKeyEval)
	if err != nil {
		return fmt.Errorf("tpu runner: eval input: %w", err)
	}
	totalExamples := r.params.Input.EvalExamples
	evalBatch := *perReplica * totalReplicas
	if evalBatch == 0 {
		return errkind.New(errkind.Value, "tpu runner: eval batch size is 0 (eval.per_replica_batch_size %d x %d replicas)", *perReplica, totalReplicas)
	}
	evalSteps := pyint.FloorDiv(totalExamples, evalBatch)
	r.log.Info(fmt.Sprintf("Evaluation: total_examples:%d eval_batch_size:%d num_eval_steps: %d", totalExamples, evalBatch, evalSteps))
	outputDir := filepath.Join(r.flags.ModelDir, "eval")
	if err := os.MkdirAll(outputDir, 0o755); err != nil {
		return fmt.Errorf("tpu runner: %w", err)
	}

	var writer SummaryFileWriter
	defer func() {
		if writer != nil {
			if err := writer.Close(); err != nil {
				r.log.Error("closing the eval summary writer", "err", err)
			}
		}
	}()
	it := &checkpoint.Iterator{
		Latest:  func() (string, error) { return r.env.LatestCheckpoint(r.flags.ModelDir) },
		Clock:   r.env.Clock,
		Timeout: r.env.EvalTimeout,
		Logger:  r.log,
	}
	for {
		ckpt, err := it.Next(ctx)
		if errors.Is(err, checkpoint.ErrTimeout) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("tpu runner: eval: %w", err)
		}
		step, err := checkpoint.StepOf(ckpt)
		if err != nil {
			return fmt.Errorf("tpu runner: eval: %w", err)
		}
		r.log.Info(fmt.Sprintf("Starting to evaluate step: %d", step))
		start := r.env.Clock.Now()
		results, err := est.Evaluate(ctx, evalInput, evalSteps, ckpt)
		if errkind.Of(err) == errkind.NotFound {
			// The TPU worker may start evaluating after the checkpoint was deleted.
			r.log.Info(fmt.Sprintf("Checkpoint %s no longer exists, skipping checkpoint", ckpt), "err", err)
			continue
		}
		if err != nil {
			return fmt.Errorf("tpu runner: evaluate %s: %w", ckpt, err)
		}
		elapsed := int64(r.env.Clock.Now().Sub(start).Seconds())
		r.log.Info(fmt.Sprintf("Eval results: %v. Elapsed seconds: %d", results, elapsed))
		if writer == nil {
			if writer, err = r.env.NewSummaryWriter(outputDir); err != nil {
				return fmt.Errorf("tpu runner: eval summary writer: %w", err)
			}
		}
		if err := runner.WriteSummary(results, writer, step); err != nil {
			return fmt.Errorf("tpu runner: eval summary: %w", err)
		}
		if err := writer.Flush(); err != nil {
			return fmt.Errorf("tpu runner: eval summary: %w", err)
		}
		if step >= *maxSteps {
			r.log.Info(fmt.Sprintf("Evaluation finished after training step %d", step))
			return nil
		}
	}
}

// Main runs the task named by the task flag (tpu_runner's main): it looks its params up in reg,
// logs every flag and the params, builds the runner and runs it.
func Main(ctx context.Context, flags tpurunnerspec.TPURunnerFlags, reg Registry, env Env) error {
	log := env.Logger
	if log == nil {
		log = slog.Default()
	}
	if reg == nil {
		return errkind.New(errkind.Value, "tpu runner: no task registry")
	}
	params, err := reg.GetParams(flags.Task)
	if err != nil {
		return fmt.Errorf("tpu runner: task %q: %w", flags.Task, err)
	}
	log.Info("FLAGS:")
	v := reflect.ValueOf(flags)
	for i := 0; i < v.NumField(); i++ {
		log.Info(fmt.Sprintf("%s: %v", v.Type().Field(i).Tag.Get("name"), v.Field(i).Interface()))
	}
	log.Info(fmt.Sprintf("task_param: %+v", params))
	r, err := New(params, flags, env)
	if err != nil {
		return err
	}
	return r.Run(ctx)
}
