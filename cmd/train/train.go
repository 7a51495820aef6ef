package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	cputrainingspec "github.com/monolith-go/monolith/gen/spec/native_training/cpu_training"
	exporthooksspec "github.com/monolith-go/monolith/gen/spec/native_training/model_export/export_hooks"
	"github.com/monolith-go/monolith/internal/cli"
	"github.com/monolith-go/monolith/internal/jobdiscovery"
	"github.com/monolith-go/monolith/pkg/dataset"
	"github.com/monolith-go/monolith/pkg/discovery"
	"github.com/monolith-go/monolith/pkg/estimator"
	"github.com/monolith-go/monolith/pkg/estimator/ckptdir"
	"github.com/monolith-go/monolith/pkg/hooks/barrier"
	"github.com/monolith-go/monolith/pkg/hooks/controller"
	"github.com/monolith-go/monolith/pkg/hooks/runhook"
	"github.com/monolith-go/monolith/pkg/runconfig"
	"github.com/monolith-go/monolith/pkg/runner/checkpoint"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
	"github.com/monolith-go/monolith/pkg/trainer/logreg"
)

// The models (--model).
const (
	modelDNN    = "dnn"
	modelLogreg = "logreg"
)

// modelWords describes a model in the output.
func modelWords(model string) string {
	if model == modelLogreg {
		return "a logistic regression"
	}
	return "a sparse + dense recommendation model (embedding tables on parameter servers, an MLP)"
}

// defaultSaveCheckpointsSteps is how often the command saves when no save interval is given (the
// estimator's own default saves only at the end, which would show no retention).
const defaultSaveCheckpointsSteps = 100

// data is what the run trains and evaluates on.
type data struct {
	train, eval []string
	opts        dataset.Options
	schema      batch.Schema
	// best is the generator's best AUC on eval (the demo only).
	best *bestAUC
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

// train runs the command: config, data, model dir, discovery, then training and evaluation.
func train(ctx context.Context, c cmdFlags, discoveryGiven bool, stdout io.Writer, log *slog.Logger, d deps) (err error) {
	f := c.TrainFlags
	if err := checkFlags(f); err != nil {
		return cli.Usage(err)
	}
	if err := checkExportFlags(c.ExportHookFlags, f.Model); err != nil {
		return cli.Usage(err)
	}
	rc, err := runConfig(&c.RunnerFlags, f, discoveryGiven, d)
	if err != nil {
		return cli.Usage(err)
	}
	dopts, err := jobdiscovery.Options(rc, d.env, log)
	if err != nil {
		return cli.Usage(err)
	}
	compression, err := dataset.ParseCompression(f.Compression)
	if err != nil {
		return cli.Usage(fmt.Errorf("--compression: %w", err))
	}
	// The directories given are checked before the demo's data is generated.
	if rc.ModelDir != "" {
		if err := checkWritable(rc.ModelDir); err != nil {
			return cli.Usage(fmt.Errorf("--model_dir %s is not writable: %w", rc.ModelDir, err))
		}
	}
	if rc.RestoreDir != nil && *rc.RestoreDir != "" {
		if st, err := os.Stat(*rc.RestoreDir); err != nil || !st.IsDir() {
			return cli.Usage(fmt.Errorf("--restore_dir %s is not a directory", *rc.RestoreDir))
		}
	}

	var in data
	demo := f.TrainData == ""
	if demo {
		dir, err := os.MkdirTemp("", "monolith-train-data-")
		if err != nil {
			return fmt.Errorf("demo data directory: %w", err)
		}
		defer os.RemoveAll(dir)
		in, err = demoData(ctx, dir, f, rc.NumWorkers, compression, stdout)
		if err != nil {
			return err
		}
	} else if in, err = fileData(f, compression, stdout); err != nil {
		return err
	}

	if rc.ModelDir == "" {
		if rc.NumWorkers > 1 {
			return cli.Usage(fmt.Errorf("--num_workers %d: the workers of a job share --model_dir; give it", rc.NumWorkers))
		}
		if rc.ModelDir, err = os.MkdirTemp("", "monolith-train-model-"); err != nil {
			return fmt.Errorf("model directory: %w", err)
		}
		// A model dir of ours that failed before its first checkpoint is of no use to anyone.
		defer func(dir string) {
			if _, serr := os.Stat(filepath.Join(dir, checkpoint.StateFile)); err != nil && serr != nil {
				os.RemoveAll(dir)
			}
		}(rc.ModelDir)
	}
	if err := rc.ExportEnv(d.setenv); err != nil {
		return err
	}
	return discovery.WithDiscovery(ctx, dopts, func(ctx context.Context, disc discovery.ServiceDiscovery, task *discovery.Task) error {
		r, err := roleOf(rc, f, disc, task, dopts.Type)
		if err != nil {
			return err
		}
		// The restore flow's chief is worker 0 of the role the discovery gives.
		rc.Index = r.index
		if rc.RestoreDir != nil && *rc.RestoreDir != "" {
			if err := rc.PrepareRestore(ctx, runconfig.RestoreOptions{Log: log}); err != nil {
				return cli.Usage(fmt.Errorf("--restore_dir %s: %w", *rc.RestoreDir, err))
			}
		}
		ckpt, err := ckptdir.Open(ckptdir.Options{Dir: rc.ModelDir, MaxToKeep: rc.CheckpointsMaxToKeep, Log: log, NoMonolithState: !r.chief()})
		if err != nil {
			return cli.Usage(fmt.Errorf("--model_dir %s: %w", rc.ModelDir, err))
		}
		var cp estimator.Checkpointer = ckpt
		if rc.RestoreCkpt != nil && *rc.RestoreCkpt != "" {
			cp = &stateCheckpointer{Checkpointer: ckpt, rc: rc, log: log}
		}
		if r.chief() {
			fmt.Fprintf(stdout, "  model_dir    %s (%s, the last %d kept); run again with --model_dir=%s to resume\n",
				rc.ModelDir, saveEvery(rc), rc.CheckpointsMaxToKeep, rc.ModelDir)
		} else {
			fmt.Fprintf(stdout, "  model_dir    %s (the chief's checkpoints, read at the start)\n", rc.ModelDir)
		}
		return fit(ctx, rc, f, c.ExportHookFlags, in, cp, disc, r, stdout, log, d)
	})
}

// roleOf is this process's role: the one a discovery that fixes roles gives (Primus' TF_CONFIG,
// MLP's variables), else --index; --role must agree. logreg runs the chief only.
func roleOf(rc *runconfig.RunnerConfig, f cputrainingspec.TrainFlags, disc discovery.ServiceDiscovery, task *discovery.Task, t discovery.Type) (role, error) {
	r := role{index: rc.Index, workers: rc.NumWorkers}
	fixed, err := jobdiscovery.FixedRole(disc, task, t)
	if err != nil {
		return r, err
	}
	if fixed != nil {
		r.index = fixed.Index
		if fixed.ServerType != "worker" && fixed.ServerType != "chief" {
			return r, cli.Usage(fmt.Errorf("%v discovery makes this process %s %d; cmd/train runs workers (parameter servers are cmd/ps)", t, fixed.ServerType, r.index))
		}
		if f.Model == modelLogreg && r.index != 0 {
			return r, cli.Usage(fmt.Errorf("%v discovery makes this process worker %d; cmd/train --model=logreg runs worker 0 (the chief) only", t, r.index))
		}
	}
	switch {
	case r.index < 0 || r.index >= r.workers:
		return r, cli.Usage(fmt.Errorf("--index %d: this job has %d workers (--num_workers)", r.index, r.workers))
	case f.Role == "chief" && !r.chief():
		return r, cli.Usage(fmt.Errorf("--role chief: the chief is worker 0, this process is worker %d", r.index))
	case f.Role == "worker" && r.chief():
		return r, cli.Usage(errors.New("--role worker: worker 0 is the chief (give --index 1 and up, or --role chief)"))
	}
	return r, nil
}

// checkFlags checks the command's own flags.
func checkFlags(f cputrainingspec.TrainFlags) error {
	switch {
	case f.TrainData != "" && f.EvalData == "":
		return errors.New("--train_data needs --eval_data")
	case f.TrainData == "" && f.EvalData != "":
		return errors.New("--eval_data needs --train_data (without both, the demo's data is generated)")
	case f.Role != "" && f.Role != "chief" && f.Role != "worker":
		return fmt.Errorf("--role %q: want chief or worker (or empty: by --index)", f.Role)
	case f.BatchSize <= 0:
		return fmt.Errorf("--batch_size %d is not positive", f.BatchSize)
	case f.Epochs <= 0:
		return fmt.Errorf("--epochs %d is not positive", f.Epochs)
	case f.Steps < 0:
		return fmt.Errorf("--steps %d is negative", f.Steps)
	case f.MaxSteps < 0:
		return fmt.Errorf("--max_steps %d is negative", f.MaxSteps)
	case f.EvalSteps < 0:
		return fmt.Errorf("--eval_steps %d is negative", f.EvalSteps)
	case f.HashBuckets <= 0:
		return fmt.Errorf("--hash_buckets %d is not positive", f.HashBuckets)
	case !(f.LearningRate > 0):
		return fmt.Errorf("--learning_rate %v is not positive", f.LearningRate)
	case f.EmbeddingDim <= 0:
		return fmt.Errorf("--embedding_dim %d is not positive", f.EmbeddingDim)
	case !(f.EmbeddingLearningRate > 0):
		return fmt.Errorf("--embedding_learning_rate %v is not positive", f.EmbeddingLearningRate)
	case !(f.DenseLearningRate > 0):
		return fmt.Errorf("--dense_learning_rate %v is not positive", f.DenseLearningRate)
	case f.LocalPS < 1:
		return fmt.Errorf("--local_ps %d: want at least 1", f.LocalPS)
	case f.PSTimeout <= 0:
		return fmt.Errorf("--ps_timeout %v is not positive", f.PSTimeout)
	case f.DemoExamples < 4:
		return fmt.Errorf("--demo_examples %d: want at least 4 (a quarter of them is the evaluation set)", f.DemoExamples)
	case f.DemoSeed < 0:
		return fmt.Errorf("--demo_seed %d is negative", f.DemoSeed)
	case f.DiscoveryTimeout <= 0:
		return fmt.Errorf("--discovery_timeout %v is not positive", f.DiscoveryTimeout)
	}
	if _, err := parseHidden(f.Hidden); err != nil {
		return err
	}
	return nil
}

// runConfig builds the RunnerConfig from the flags (runconfig's merge rule) over the command's own
// values: a local run unless --discovery_type was given, and a checkpoint every
// defaultSaveCheckpointsSteps unless a save interval was given. It refuses what this trainer cannot
// run: a server type other than worker, parameter servers or several workers for logreg, several
// workers without parameter servers, Horovod's synchronous training, inference.
func runConfig(flags *runconfig.RunnerFlags, f cputrainingspec.TrainFlags, discoveryGiven bool, d deps) (*runconfig.RunnerConfig, error) {
	values := map[string]any{}
	if !discoveryGiven {
		values["is_local"] = true
	}
	if flags.SaveCheckpointsSteps == nil && flags.SaveCheckpointsSecs == nil {
		values["save_checkpoints_steps"] = defaultSaveCheckpointsSteps
	}
	rc, err := runconfig.New(runconfig.Sources{Values: values, Flags: runconfig.FlagValues(flags), Env: d.env.Lookup})
	if err != nil {
		return nil, err
	}
	switch {
	case rc.ServerType != "worker":
		return nil, fmt.Errorf("--server_type %s: cmd/train runs workers (parameter servers are cmd/ps)", rc.ServerType)
	case rc.NumPS < 0 || rc.NumWorkers < 1:
		return nil, fmt.Errorf("--num_ps %d --num_workers %d: want num_ps >= 0 and num_workers >= 1", rc.NumPS, rc.NumWorkers)
	case f.Model == modelLogreg && rc.NumPS != 0:
		return nil, fmt.Errorf("--num_ps %d: the logistic regression trains without parameter servers (--model=dnn uses them)", rc.NumPS)
	case f.Model == modelLogreg && (rc.NumWorkers != 1 || rc.Index != 0):
		return nil, fmt.Errorf("--num_workers %d --index %d: --model=logreg runs one worker, index 0 (without parameter servers, workers share no model)", rc.NumWorkers, rc.Index)
	case rc.NumWorkers > 1 && rc.NumPS == 0:
		return nil, fmt.Errorf("--num_workers %d: the workers of a job share its tables on parameter servers: give --num_ps and a --discovery_type to find them", rc.NumWorkers)
	case rc.NumPS > 0 && rc.IsLocal:
		return nil, fmt.Errorf("--num_ps %d: the parameter servers are found through a service discovery: give --discovery_type (zk with --zk_server, primus with --tf_config, ...)", rc.NumPS)
	case rc.EnableSyncTraining:
		return nil, errors.New("--enable_sync_training: Horovod's synchronous training is not supported by cmd/train (its dense parameters are synchronous anyway: an allreduce on PS 0)")
	case rc.Mode != "train" && rc.Mode != "eval":
		return nil, fmt.Errorf("--mode %s: cmd/train runs train or eval", rc.Mode)
	}
	return rc, nil
}

// checkWritable creates dir when needed and checks that a file can be created in it.
func checkWritable(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".train-write-check-*")
	if err != nil {
		return err
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// saveEvery words the checkpoint interval.
func saveEvery(rc *runconfig.RunnerConfig) string {
	if rc.SaveCheckpointsSecs != nil {
		return fmt.Sprintf("a checkpoint every %d s", *rc.SaveCheckpointsSecs)
	}
	return fmt.Sprintf("a checkpoint every %d steps", *rc.SaveCheckpointsSteps)
}

// fit builds the model, the estimator and the hooks, then trains and evaluates (or only evaluates
// in eval mode) and prints the final line. The chief evaluates; the other workers only train.
func fit(ctx context.Context, rc *runconfig.RunnerConfig, f cputrainingspec.TrainFlags, ex exporthooksspec.ExportHookFlags, in data, cp estimator.Checkpointer,
	disc discovery.ServiceDiscovery, r role, stdout io.Writer, log *slog.Logger, d deps) (err error) {
	files := shard(in.train, r.index, r.workers)
	if len(files) == 0 {
		return cli.Usage(fmt.Errorf("--train_data: %d files for %d workers: worker %d has none", len(in.train), r.workers, r.index))
	}
	st, err := startStatus(f.StatusAddr, f.Model, stdout, log)
	if err != nil {
		return err
	}
	defer st.stop(ctx)

	var (
		model estimator.Model[*batch.Batch]
		w     *worker
	)
	switch f.Model {
	case modelLogreg:
		lr, err := logreg.New(logreg.Config{DenseDim: in.schema.DenseDim(), HashBuckets: f.HashBuckets,
			Optimizer: logreg.Optimizer(f.Optimizer), LearningRate: f.LearningRate})
		if err != nil {
			return cli.Usage(err)
		}
		model = lr
	default:
		if w, err = startWorker(ctx, rc, f, in.schema, disc, r, st, cp, stdout, log); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, w.close()) }()
		model, cp = w.model, w.checkpointer
	}
	ecfg := estimator.Config{Checkpointer: cp, LogStepCountSteps: int64(rc.LogStepCountSteps), Log: log}
	if ecfg.SaverListeners, err = exportListeners(ex, rc, w, r, in.schema, stdout, log); err != nil {
		return err
	}
	if rc.SaveCheckpointsSecs != nil {
		ecfg.SaveCheckpointsSecs = time.Duration(*rc.SaveCheckpointsSecs) * time.Second
	}
	if rc.SaveCheckpointsSteps != nil {
		ecfg.SaveCheckpointsSteps = int64(*rc.SaveCheckpointsSteps)
	}
	est, err := estimator.New[*batch.Batch](model, ecfg)
	if err != nil {
		return cli.Usage(err)
	}
	if w != nil {
		// A worker reads the model dir once the chief has restored (and, with --restore_dir,
		// set it up).
		if err := w.awaitChief(ctx); err != nil {
			return err
		}
	}
	_, start, found, err := cp.Latest(ctx)
	if err != nil {
		return err
	}
	if w != nil && r.chief() && !found {
		if err := w.checkFresh(ctx); err != nil {
			return err
		}
	}
	var skip func() int64
	if w != nil {
		// An interrupted dnn job resumes where its input was: the restored step's batches are
		// skipped.
		skip = est.GlobalStep
	}
	trainInput := inputFn(slices.Repeat(files, f.Epochs), in, f.BatchSize, "training input", skip, st, w)
	evalInput := inputFn(in.eval, in, f.BatchSize, "evaluation input", nil, nil, nil)

	var res estimator.EvalResult
	switch {
	case rc.Mode == "eval":
		if !found {
			return cli.Usage(fmt.Errorf("--mode eval: no checkpoint in --model_dir %s", rc.ModelDir))
		}
		if !r.chief() {
			return cli.Usage(errors.New("--mode eval: the chief (worker 0) evaluates"))
		}
		if res, err = est.Evaluate(ctx, evalInput, int64(f.EvalSteps)); err != nil {
			return err
		}
	default:
		hooks, err := trainHooks(rc, f, est, disc, r, w, st, stdout, log)
		if err != nil {
			return err
		}
		hooks = append(hooks, d.hooks...)
		maxSteps := int64(f.MaxSteps)
		if f.Steps > 0 && (maxSteps == 0 || start+int64(f.Steps) < maxSteps) {
			maxSteps = start + int64(f.Steps)
		}
		if !r.chief() {
			tr, err := est.Train(ctx, trainInput, 0, maxSteps, hooks...)
			if err != nil {
				return err
			}
			if w != nil {
				w.report(stdout, st)
			}
			_, err = fmt.Fprintf(stdout, "trained steps=%d (the chief evaluates)\n", tr.GlobalStep)
			return err
		}
		res, err = est.TrainAndEvaluate(ctx,
			estimator.TrainSpec[*batch.Batch]{Input: trainInput, MaxSteps: maxSteps, Hooks: hooks},
			estimator.EvalSpec[*batch.Batch]{Input: evalInput, Steps: int64(f.EvalSteps)})
		if err != nil {
			return err
		}
		if w != nil {
			w.report(stdout, st)
		}
	}
	st.evaluated(res.Metrics["auc"], res.Metrics["log_loss"])
	if in.best != nil {
		fmt.Fprintf(stdout, "best auc=%.4f loss=%.4f\n", in.best.auc, in.best.loss)
		_, err = fmt.Fprintf(stdout, "eval auc=%.4f best auc=%.4f loss=%.4f steps=%d\n", res.Metrics["auc"], in.best.auc, res.Metrics["log_loss"], res.GlobalStep)
		return err
	}
	_, err = fmt.Fprintf(stdout, "eval auc=%.4f loss=%.4f steps=%d\n", res.Metrics["auc"], res.Metrics["log_loss"], res.GlobalStep)
	return err
}

// trainHooks are the command's hooks of the training loop: the barrier the controller places
// (on PS 0 for dnn, so that the workers of other processes stop at it; in this process for
// logreg), the controller hook server on the chief (the reference's ServerHook), a line saying
// where it listens, progress lines, the registration with the service discovery, and dnn's own
// (the job's start, the step gate, the PS health checker).
func trainHooks(rc *runconfig.RunnerConfig, f cputrainingspec.TrainFlags, est *estimator.Estimator[*batch.Batch],
	disc discovery.ServiceDiscovery, r role, w *worker, st *status, stdout io.Writer, log *slog.Logger) ([]runhook.Hook, error) {
	var b interface {
		controller.Barrier
		barrier.Op
	}
	if w != nil {
		b = w.barrier
	} else {
		lb, err := barrier.New(rc.NumWorkers)
		if err != nil {
			return nil, err
		}
		b = lb
	}
	hooks := []runhook.Hook{&barrier.Hook{Index: r.index, Barrier: b}}
	var addr func() string
	if r.chief() {
		ctl, err := controller.NewHook(controller.Config{
			ModelDir: rc.ModelDir, Barrier: b, Saver: est,
			GlobalStep: func(context.Context) (int64, error) { return est.GlobalStep(), nil },
			ListenAddr: f.ControllerAddr, Host: advertisedHost(f.ControllerAddr),
		})
		if err != nil {
			return nil, err
		}
		hooks = append(hooks, ctl, &printHook{f: func() string {
			return fmt.Sprintf("  controller   %s (StopTraining, ResumeTraining, SaveCheckpoint, GetTrainingStatus; address in %s)",
				ctl.Addr(), filepath.Join(rc.ModelDir, controller.ServerAddrFilename))
		}, w: stdout})
		addr = ctl.Addr
	} else {
		if st.addr() == "" && disc != nil {
			return nil, cli.Usage(errors.New("--status_addr is empty: a worker registers its status endpoint's address with the service discovery"))
		}
		addr = st.addr
	}
	if w != nil {
		hooks = append(hooks, w.hooks()...)
	}
	hooks = append(hooks, st.progressHook(rc.LogStepCountSteps, w, stdout))
	if disc != nil {
		hooks = append(hooks, &registerHook{d: disc, serverType: rc.ServerType, index: r.index, want: rc.NumWorkers,
			addr: addr, timeout: f.DiscoveryTimeout, out: stdout, log: log})
	}
	return hooks, nil
}

// advertisedHost is the host the controller writes into its address file: the listen address's
// when it names one, else "" (the controller resolves the host name, as the reference does).
func advertisedHost(listen string) string {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		return ""
	}
	return host
}

// printHook prints a line once the session exists (what the hooks before it started).
type printHook struct {
	runhook.Base
	f func() string
	w io.Writer
}

func (h *printHook) AfterCreateSession(context.Context, *runhook.Session) error {
	_, err := fmt.Fprintln(h.w, h.f())
	return err
}

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
