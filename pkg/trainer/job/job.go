// Package job is a training worker: the training runtime of Monolith's native_training (the
// RunnerConfig, the service discovery, the estimator loop with its checkpoints and the controller
// hook server) driving either the sparse + dense model of pkg/trainer/dnn (embedding tables on
// parameter servers over gRPC, the dense parameters kept in step across workers by an allreduce
// on PS 0) or the logistic regression of pkg/trainer/logreg. cmd/train is its command line; other
// trainers (a stream trainer, tests) run the same worker by filling a Config.
//
// A job reads its input through Sources: Config.Train divides itself among the job's workers
// (Sharded) and Config.Eval is read whole by the chief. Files is the source of TFRecord files; an
// input of another kind implements Source (and Sharded) and plugs in the same way. An error
// reading a source is the input's: Run returns it as an *InputError.
//
// A job of several workers stops and fails as one: Config.Stop on any worker stops all of them
// after the same step (the chief with its final checkpoint of it), announced in that step's
// allreduce; and each worker watches the job's other processes while it trains (peers), so that
// a wait for one that died fails at once, naming it, rather than after --ps_timeout.
//
// Errors name the settings by the cmd/train flags that set them (--model_dir, --ps_timeout, ...),
// which is how a user fixes them. A *ConfigError is a setting, model dir or checkpoint the job
// cannot run with (cmd/train: exit status 2, as for an *InputError); any other error is a failure
// at run time.
package job

import (
	"context"
	"errors"
	"fmt"
	"google.golang.org/grpc"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/monolith-go/monolith/internal/jobdiscovery"
	"github.com/monolith-go/monolith/pkg/discovery"
	"github.com/monolith-go/monolith/pkg/estimator"
	"github.com/monolith-go/monolith/pkg/estimator/ckptdir"
	"github.com/monolith-go/monolith/pkg/hooks/runhook"
	"github.com/monolith-go/monolith/pkg/pathutil"
	"github.com/monolith-go/monolith/pkg/runconfig"
	"github.com/monolith-go/monolith/pkg/runner/checkpoint"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
)

// The models (Config.Model).
const (
	ModelDNN    = "dnn"
	ModelLogreg = "logreg"
)

// Config is everything a job's worker needs. The zero values of the numbers are not defaults:
// cmd/train's flags document the values it gives.
type Config struct {
	// Run is the run config (runner_utils' RunnerConfig): the model dir (required), the job's
	// shape (NumPS, NumWorkers, Index), the mode (train or eval), the checkpoint interval,
	// retention and restore (RestoreDir, RestoreCkpt), the progress interval, the export's model
	// name (DeepInsightName). Run sets Run.Index to the role the discovery gives.
	Run *runconfig.RunnerConfig
	// Discovery is how the job's processes find each other (jobdiscovery.Options of Run); a local
	// run has none.
	Discovery discovery.Options
	// Role is this process's role: "chief" (worker 0), "worker" (1 and up) or "" (by the index);
	// it must agree with the index.
	Role string

	// Model is ModelDNN or ModelLogreg.
	Model string
	// Train is the training input: each worker trains on its share, Epochs and all, once per run.
	Train Sharded
	// Eval is the evaluation input, read whole at every evaluation (the chief's).
	Eval Source
	// Schema is the features of the inputs' batches: the model's inputs.
	Schema batch.Schema
	// Best is what the input's generator reaches on Eval (the demo's), printed with the result;
	// nil when unknown.
	Best *Best

	// Seed draws the dense parameters, the initial values of the tables of parameter servers
	// started in this process (and, through the Sources, the shuffling); 0: the fixed seeds of
	// earlier versions (dense 1, tables mt19937's default).
	Seed uint64
	// EvalEverySteps evaluates the chief's current variables every this many global steps
	// (0: never by count); it also evaluates at the end of each epoch of the training input.
	EvalEverySteps int

	// Steps trains this many more steps from the restored global step (0: no relative limit);
	// MaxSteps stops at this global step (0: no cap). EvalSteps bounds an evaluation's batches (0:
	// all of Eval).
	Steps, MaxSteps, EvalSteps int

	DNN    DNNConfig
	Logreg LogregConfig
	Export ExportConfig

	// ControllerAddr is the chief's controller hook server's listen address (StopTraining,
	// ResumeTraining, SaveCheckpoint, GetTrainingStatus).
	ControllerAddr string
	// StatusAddr is the status endpoint's listen address (/metrics, /healthz, /debug/pprof/);
	// "": none.
	StatusAddr string
	// DiscoveryTimeout bounds the waits for the discovery: this worker's registration to show,
	// the parameter servers to be registered and healthy, the job's workers to meet at the start.
	DiscoveryTimeout time.Duration

	// Hooks run in the training loop after the job's own (tests watch the run through them).
	Hooks []runhook.Hook
	// Stop, when closed, ends the training at the end of the step in progress, as the end of its
	// input would: the final checkpoint is saved and the run evaluates and returns as usual (a
	// signal's orderly stop; nil: never). In a job of several workers it ends the whole job, as
	// a worker's input running out does: the worker announces it in its next step's allreduce and
	// every worker stops after that step (the chief with its final checkpoint of it).
	Stop <-chan struct{}
	// StopReason names what closed Stop in the line that says what ended the training ("SIGTERM");
	// nil or "": "a signal".
	StopReason func() string
}

// DNNConfig is the dnn model's and its parameter servers' settings.
type DNNConfig struct {
	// Sparse are the model's settings of Schema.Sparse, one per feature: each has a table of its
	// own. Without them, Slots gives the features' slots alone (sum pooling, no buckets).
	Sparse []SparseFeature
	Slots  []int
	// EmbeddingDim is every table's dimension; EmbeddingLearningRate their Adagrad's (initial
	// accumulator 0.1; new entries random uniform in [-0.05, 0.05)).
	EmbeddingDim          int
	EmbeddingLearningRate float64
	// Hidden are the widths of the MLP's hidden (ReLU) layers.
	Hidden []int
	// DenseOptimizer (adam, adagrad) and DenseLearningRate update the dense parameters.
	DenseOptimizer    string
	DenseLearningRate float64
	// LocalPS is how many parameter servers to start in this process when Run.NumPS is 0.
	LocalPS int
	// PSTimeout is the deadline of each parameter server call, and the longest a worker waits
	// for the others at the dense allreduce.
	PSTimeout time.Duration
	// PSDialOptions are added to the connections to the job's parameter servers (the
	// discovered ones; TLS credentials: pkg/tlsconfig).
	PSDialOptions []grpc.DialOption
}

// SparseFeature is a sparse feature's model settings.
type SparseFeature struct {
	// Slot is the v2 fid slot of its ids.
	Slot int
	// Pooling is dnn.Sum or dnn.Mean ("": sum).
	Pooling string
	// Buckets hashes its ids into this many buckets before the table (0: collisionless).
	Buckets uint64
}

// LogregConfig is the logistic regression's settings.
type LogregConfig struct {
	// Optimizer is the update rule (adagrad, sgd) and LearningRate its step size.
	Optimizer    string
	LearningRate float64
	// HashBuckets is how many weights the fids are hashed into.
	HashBuckets int
}

// ExportConfig is the chief's export while it trains (dnn): pkg/export's layout under Dir.
type ExportConfig struct {
	// Dir is the export base; "": no export.
	Dir string
	// Every exports every Every-th checkpoint of the run, and the last; Keep versions are kept.
	Every, Keep int
}

// Best is what the input's generator reaches on the evaluation input.
type Best struct{ AUC, Loss float64 }

// ConfigError is a setting the job cannot run with, or a model dir or checkpoint that does not
// fit them: the caller's to fix, not a failure of the run.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

func configError(err error) error { return &ConfigError{Err: err} }

// Check checks the settings; the inputs (Train, Eval, Schema, DNN.Slots) are checked by Run, so
// that a caller may check the settings before it makes its input. It refuses what this worker
// cannot run: a server type other than worker, parameter servers or several workers for logreg,
// several workers without parameter servers, Horovod's synchronous training, inference.
func (c *Config) Check() error {
	d, lr := c.DNN, c.Logreg
	switch {
	case c.Run == nil:
		return errors.New("job: no run config")
	case c.Model != ModelDNN && c.Model != ModelLogreg:
		return fmt.Errorf("--model %q: want %s or %s", c.Model, ModelDNN, ModelLogreg)
	case c.Role != "" && c.Role != "chief" && c.Role != "worker":
		return fmt.Errorf("--role %q: want chief or worker (or empty: by --index)", c.Role)
	case c.Steps < 0:
		return fmt.Errorf("--steps %d is negative", c.Steps)
	case c.MaxSteps < 0:
		return fmt.Errorf("--max_steps %d is negative", c.MaxSteps)
	case c.EvalSteps < 0:
		return fmt.Errorf("--eval_steps %d is negative", c.EvalSteps)
	case lr.HashBuckets <= 0:
		return fmt.Errorf("--hash_buckets %d is not positive", lr.HashBuckets)
	case !(lr.LearningRate > 0):
		return fmt.Errorf("--learning_rate %v is not positive", lr.LearningRate)
	case d.EmbeddingDim <= 0:
		return fmt.Errorf("--embedding_dim %d is not positive", d.EmbeddingDim)
	case !(d.EmbeddingLearningRate > 0):
		return fmt.Errorf("--embedding_learning_rate %v is not positive", d.EmbeddingLearningRate)
	case !(d.DenseLearningRate > 0):
		return fmt.Errorf("--dense_learning_rate %v is not positive", d.DenseLearningRate)
	case d.LocalPS < 1:
		return fmt.Errorf("--local_ps %d: want at least 1", d.LocalPS)
	case d.PSTimeout <= 0:
		return fmt.Errorf("--ps_timeout %v is not positive", d.PSTimeout)
	case c.DiscoveryTimeout <= 0:
		return fmt.Errorf("--discovery_timeout %v is not positive", c.DiscoveryTimeout)
	case c.EvalEverySteps < 0:
		return fmt.Errorf("--eval_every_steps %d is negative", c.EvalEverySteps)
	}
	if err := c.Export.check(c.Model); err != nil {
		return err
	}
	rc := c.Run
	switch {
	case rc.ServerType != "worker":
		return fmt.Errorf("--server_type %s: cmd/train runs workers (parameter servers are cmd/ps)", rc.ServerType)
	case rc.NumPS < 0 || rc.NumWorkers < 1:
		return fmt.Errorf("--num_ps %d --num_workers %d: want num_ps >= 0 and num_workers >= 1", rc.NumPS, rc.NumWorkers)
	case c.Model == ModelLogreg && rc.NumPS != 0:
		return fmt.Errorf("--num_ps %d: the logistic regression trains without parameter servers (--model=dnn uses them)", rc.NumPS)
	case c.Model == ModelLogreg && (rc.NumWorkers != 1 || rc.Index != 0):
		return fmt.Errorf("--num_workers %d --index %d: --model=logreg runs one worker, index 0 (without parameter servers, workers share no model)", rc.NumWorkers, rc.Index)
	case rc.NumWorkers > 1 && rc.NumPS == 0:
		return fmt.Errorf("--num_workers %d: the workers of a job share its tables on parameter servers: give --num_ps and a --discovery_type to find them", rc.NumWorkers)
	case rc.NumPS > 0 && rc.IsLocal:
		return fmt.Errorf("--num_ps %d: the parameter servers are found through a service discovery: give --discovery_type (zk with --zk_server, primus with --tf_config, ...)", rc.NumPS)
	case rc.EnableSyncTraining:
		return errors.New("--enable_sync_training: Horovod's synchronous training is not supported by cmd/train (its dense parameters are synchronous anyway: an allreduce on PS 0)")
	case rc.Mode != "train" && rc.Mode != "eval":
		return fmt.Errorf("--mode %s: cmd/train runs train or eval", rc.Mode)
	}
	return nil
}

// role is this process's place in its job.
type role struct {
	index, workers int
}

// chief reports whether this is the job's chief: worker 0.
func (r role) chief() bool { return r.index == 0 }

func (r role) String() string {
	if r.chief() {
		return fmt.Sprintf("chief (worker 0 of %d)", r.workers)
	}
	return fmt.Sprintf("worker %d of %d", r.index, r.workers)
}

// Run runs the job's worker: it enters the discovery, takes its role, opens the model dir (and,
// with Run.RestoreDir, sets it up), then trains and evaluates (in eval mode only evaluates),
// printing its progress and result on stdout: the chief ends with "eval auc=<x> loss=<y>
// steps=<n>" ("eval auc=<x> best auc=<b> loss=<y> steps=<n>" with a Best), another worker with
// "trained steps=<n> (the chief evaluates)". The job logs to log; some of the hooks it runs (the
// controller's, the barrier's, the PS health checker's) log through slog's default, which a
// command sets to the same log.
func Run(ctx context.Context, cfg Config, stdout io.Writer, log *slog.Logger) error {
	if err := cfg.Check(); err != nil {
		return configError(err)
	}
	rc := cfg.Run
	switch {
	case cfg.Train == nil || cfg.Eval == nil:
		return configError(errors.New("job: a training and an evaluation input are needed"))
	case rc.ModelDir == "":
		return configError(errors.New("job: no model dir (--model_dir)"))
	}
	return discovery.WithDiscovery(ctx, cfg.Discovery, func(ctx context.Context, disc discovery.ServiceDiscovery, task *discovery.Task) error {
		r, err := roleOf(cfg, disc, task)
		if err != nil {
			return err
		}
		// The restore flow's chief is worker 0 of the role the discovery gives.
		rc.Index = r.index
		if rc.RestoreDir != nil && *rc.RestoreDir != "" {
			if err := rc.PrepareRestore(ctx, runconfig.RestoreOptions{Log: log}); err != nil {
				return configError(fmt.Errorf("--restore_dir %s: %w", *rc.RestoreDir, err))
			}
		}
		ckpt, err := ckptdir.Open(ckptdir.Options{Dir: rc.ModelDir, MaxToKeep: rc.CheckpointsMaxToKeep, Log: log, NoMonolithState: !r.chief()})
		if err != nil {
			return configError(fmt.Errorf("--model_dir %s: %w", rc.ModelDir, err))
		}
		var cp estimator.Checkpointer = ckpt
		if rc.RestoreCkpt != nil && *rc.RestoreCkpt != "" {
			if err := checkRestoreCkpt(rc); err != nil {
				return configError(err)
			}
			cp = &stateCheckpointer{Checkpointer: ckpt, rc: rc, log: log}
		}
		if r.chief() {
			fmt.Fprintf(stdout, "  model_dir    %s (%s, the last %d kept); run again with --model_dir=%s to resume\n",
				rc.ModelDir, saveEvery(rc), rc.CheckpointsMaxToKeep, rc.ModelDir)
		} else {
			fmt.Fprintf(stdout, "  model_dir    %s (the chief's checkpoints, read at the start)\n", rc.ModelDir)
		}
		return fit(ctx, cfg, cp, disc, r, stdout, log)
	})
}

// roleOf is this process's role: the one a discovery that fixes roles gives (Primus' TF_CONFIG,
// MLP's variables), else Run.Index; Role must agree. logreg runs the chief only.
func roleOf(cfg Config, disc discovery.ServiceDiscovery, task *discovery.Task) (role, error) {
	rc, t := cfg.Run, cfg.Discovery.Type
	r := role{index: rc.Index, workers: rc.NumWorkers}
	fixed, err := jobdiscovery.FixedRole(disc, task, t)
	if err != nil {
		return r, err
	}
	if fixed != nil {
		r.index = fixed.Index
		if fixed.ServerType != "worker" && fixed.ServerType != "chief" {
			return r, configError(fmt.Errorf("%v discovery makes this process %s %d; cmd/train runs workers (parameter servers are cmd/ps)", t, fixed.ServerType, r.index))
		}
		if cfg.Model == ModelLogreg && r.index != 0 {
			return r, configError(fmt.Errorf("%v discovery makes this process worker %d; cmd/train --model=logreg runs worker 0 (the chief) only", t, r.index))
		}
	}
	switch {
	case r.index < 0 || r.index >= r.workers:
		return r, configError(fmt.Errorf("--index %d: this job has %d workers (--num_workers)", r.index, r.workers))
	case cfg.Role == "chief" && !r.chief():
		return r, configError(fmt.Errorf("--role chief: the chief is worker 0, this process is worker %d", r.index))
	case cfg.Role == "worker" && r.chief():
		return r, configError(errors.New("--role worker: worker 0 is the chief (give --index 1 and up, or --role chief)"))
	}
	return r, nil
}

// saveEvery words the checkpoint interval.
func saveEvery(rc *runconfig.RunnerConfig) string {
	if rc.SaveCheckpointsSecs != nil {
		return fmt.Sprintf("a checkpoint every %d s", *rc.SaveCheckpointsSecs)
	}
	if rc.SaveCheckpointsSteps != nil {
		return fmt.Sprintf("a checkpoint every %d steps", *rc.SaveCheckpointsSteps)
	}
	return "a checkpoint at the end"
}

// checkRestoreCkpt refuses a --restore_ckpt that names no checkpoint of the model dir (after
// --restore_dir's set-up), naming the ones there: runner_utils' get_checkpoint_state would warn
// and go on from the newest, a run the user did not ask for. In train mode a restore_ckpt already
// applied once (its marker in the model dir) is not looked at again: the run goes on from the
// newest, as get_checkpoint_state does.
func checkRestoreCkpt(rc *runconfig.RunnerConfig) error {
	want := *rc.RestoreCkpt
	if rc.Mode == checkpoint.ModeTrain {
		if _, err := os.Stat(filepath.Join(rc.ModelDir, checkpoint.RestoreCkptMarker)); err == nil {
			return nil
		}
	}
	st, err := checkpoint.ReadState(rc.ModelDir, nil)
	if err != nil {
		return fmt.Errorf("--restore_ckpt %s: %w", want, err)
	}
	var have []string
	if st != nil {
		// get_checkpoint_state's match: the name in the directory of the newest checkpoint.
		restore := pathutil.Join(pathutil.Dirname(st.ModelCheckpointPath), baseName(want))
		for _, p := range st.AllModelCheckpointPaths {
			if p == restore {
				return nil
			}
			have = append(have, baseName(p))
		}
	}
	its := "it has none"
	if len(have) > 0 {
		its = "its checkpoints: " + strings.Join(have, ", ")
	}
	return fmt.Errorf("--restore_ckpt %s: --model_dir %s has no such checkpoint (%s)", want, rc.ModelDir, its)
}

// baseName is what follows a path's last "/".
func baseName(p string) string { return p[strings.LastIndexByte(p, '/')+1:] }

// stateCheckpointer finds the checkpoint to restore through runner_utils' get_checkpoint_state,
// which applies --restore_ckpt (once in train mode, marked in model_dir; always in other modes).
type stateCheckpointer struct {
	*ckptdir.Checkpointer
	rc  *runconfig.RunnerConfig
	log *slog.Logger
}

func (c *stateCheckpointer) Latest(context.Context) (string, int64, bool, error) {
	st, err := c.rc.GetCheckpointState(c.Dir(), "", c.log)
	if err != nil || st == nil {
		return "", 0, false, err
	}
	step, err := checkpoint.StepOf(st.ModelCheckpointPath)
	if err != nil {
		return "", 0, false, err
	}
	return st.ModelCheckpointPath, step, true, nil
}
