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
	"github.com/monolith-go/monolith/internal/cli"
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

// train runs the command: config, data, model dir, discovery, then training and evaluation.
func train(ctx context.Context, c cmdFlags, discoveryGiven bool, stdout io.Writer, log *slog.Logger, d deps) (err error) {
	f := c.TrainFlags
	if err := checkFlags(f); err != nil {
		return cli.Usage(err)
	}
	rc, err := runConfig(&c.RunnerFlags, discoveryGiven, d)
	if err != nil {
		return cli.Usage(err)
	}
	dopts, err := discoveryOptions(rc, d, log)
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
		in, err = demoData(ctx, dir, f, compression, stdout)
		if err != nil {
			return err
		}
	} else if in, err = fileData(f, compression, stdout); err != nil {
		return err
	}

	if rc.ModelDir == "" {
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
	if rc.RestoreDir != nil && *rc.RestoreDir != "" {
		if err := rc.PrepareRestore(ctx, runconfig.RestoreOptions{Log: log}); err != nil {
			return cli.Usage(fmt.Errorf("--restore_dir %s: %w", *rc.RestoreDir, err))
		}
	}
	ckpt, err := ckptdir.Open(ckptdir.Options{Dir: rc.ModelDir, MaxToKeep: rc.CheckpointsMaxToKeep, Log: log})
	if err != nil {
		return cli.Usage(fmt.Errorf("--model_dir %s: %w", rc.ModelDir, err))
	}
	var cp estimator.Checkpointer = ckpt
	if rc.RestoreCkpt != nil && *rc.RestoreCkpt != "" {
		cp = &stateCheckpointer{Checkpointer: ckpt, rc: rc, log: log}
	}
	fmt.Fprintf(stdout, "  model_dir    %s (%s, the last %d kept); run again with --model_dir=%s to resume\n",
		rc.ModelDir, saveEvery(rc), rc.CheckpointsMaxToKeep, rc.ModelDir)

	return discovery.WithDiscovery(ctx, dopts, func(ctx context.Context, disc discovery.ServiceDiscovery, _ *discovery.Task) error {
		if err := checkRole(disc, dopts.Type); err != nil {
			return err
		}
		return fit(ctx, rc, f, in, cp, disc, stdout, log, d)
	})
}

// roleOwner is a discovery whose platform fixes this process's role (Primus, MLP): the reference
// takes server_type and index from it.
type roleOwner interface {
	ServerType() (string, error)
	Index() (int, error)
}

// checkRole refuses a role other than worker 0 from a discovery that fixes it.
func checkRole(disc discovery.ServiceDiscovery, t discovery.Type) error {
	o, ok := disc.(roleOwner)
	if !ok {
		return nil
	}
	typ, err := o.ServerType()
	if err != nil {
		return fmt.Errorf("%v discovery: %w", t, err)
	}
	idx, err := o.Index()
	if err != nil {
		return fmt.Errorf("%v discovery: %w", t, err)
	}
	if (typ != "worker" && typ != "chief") || idx != 0 {
		return cli.Usage(fmt.Errorf("%v discovery makes this process %s %d; cmd/train runs worker 0 (the chief) only", t, typ, idx))
	}
	return nil
}

// checkFlags checks the command's own flags.
func checkFlags(f cputrainingspec.TrainFlags) error {
	switch {
	case f.TrainData != "" && f.EvalData == "":
		return errors.New("--train_data needs --eval_data")
	case f.TrainData == "" && f.EvalData != "":
		return errors.New("--eval_data needs --train_data (without both, the demo's data is generated)")
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
	case f.DemoExamples < 4:
		return fmt.Errorf("--demo_examples %d: want at least 4 (a quarter of them is the evaluation set)", f.DemoExamples)
	case f.DemoSeed < 0:
		return fmt.Errorf("--demo_seed %d is negative", f.DemoSeed)
	case f.DiscoveryTimeout <= 0:
		return fmt.Errorf("--discovery_timeout %v is not positive", f.DiscoveryTimeout)
	}
	return nil
}

// runConfig builds the RunnerConfig from the flags (runconfig's merge rule) over the command's own
// values: a local run unless --discovery_type was given, and a checkpoint every
// defaultSaveCheckpointsSteps unless a save interval was given. It refuses what this trainer cannot
// run: parameter servers, several workers, synchronous training, inference.
func runConfig(flags *runconfig.RunnerFlags, discoveryGiven bool, d deps) (*runconfig.RunnerConfig, error) {
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
		return nil, fmt.Errorf("--server_type %s: cmd/train runs a worker (parameter servers come with the embedding model)", rc.ServerType)
	case rc.NumPS != 0:
		return nil, fmt.Errorf("--num_ps %d: the logistic regression trains without parameter servers", rc.NumPS)
	case rc.NumWorkers != 1 || rc.Index != 0:
		return nil, fmt.Errorf("--num_workers %d --index %d: cmd/train runs one worker, index 0 (without parameter servers, workers share no model)", rc.NumWorkers, rc.Index)
	case rc.EnableSyncTraining:
		return nil, errors.New("--enable_sync_training: synchronous training is not supported by cmd/train")
	case rc.Mode != "train" && rc.Mode != "eval":
		return nil, fmt.Errorf("--mode %s: cmd/train runs train or eval", rc.Mode)
	}
	return rc, nil
}

// discoveryOptions are the discovery the config asks for (none for a local run), checked for what
// each type needs before anything connects.
func discoveryOptions(rc *runconfig.RunnerConfig, d deps, log *slog.Logger) (discovery.Options, error) {
	o := discovery.Options{IsLocal: rc.IsLocal, UUID: rc.Uuid, Env: d.env, Logger: log}
	which, err := rc.Discovery()
	if err != nil {
		return o, fmt.Errorf("--discovery_type %s: %w (give --tf_config)", rc.DiscoveryType, err)
	}
	if which == "" {
		// Local: no discovery; the type is still the configured one, for the log.
		which = rc.DiscoveryType
	}
	if o.Type, err = discovery.ParseType(which); err != nil {
		return o, err
	}
	if o.IsLocal {
		return o, nil
	}
	o.TFConfig = deref(rc.TfConfig)
	o.JobName = deref(rc.DeepInsightName)
	o.ZKServer = deref(rc.ZKServer)
	if o.Type == discovery.ZK && (o.ZKServer == "" || o.JobName == "") {
		return o, errors.New("--discovery_type zk needs --zk_server and --deep_insight_name (the job's directory /monolith/<deep_insight_name>)")
	}
	return o, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
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
// in eval mode) and prints the final line.
func fit(ctx context.Context, rc *runconfig.RunnerConfig, f cputrainingspec.TrainFlags, in data, cp estimator.Checkpointer,
	disc discovery.ServiceDiscovery, stdout io.Writer, log *slog.Logger, d deps) error {
	model, err := logreg.New(logreg.Config{DenseDim: in.schema.DenseDim(), HashBuckets: f.HashBuckets,
		Optimizer: logreg.Optimizer(f.Optimizer), LearningRate: f.LearningRate})
	if err != nil {
		return cli.Usage(err)
	}
	ecfg := estimator.Config{Checkpointer: cp, LogStepCountSteps: int64(rc.LogStepCountSteps), Log: log}
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
	_, start, found, err := cp.Latest(ctx)
	if err != nil {
		return err
	}
	trainInput := inputFn(slices.Repeat(in.train, f.Epochs), in, f.BatchSize, "training input")
	evalInput := inputFn(in.eval, in, f.BatchSize, "evaluation input")

	var res estimator.EvalResult
	if rc.Mode == "eval" {
		if !found {
			return cli.Usage(fmt.Errorf("--mode eval: no checkpoint in --model_dir %s", rc.ModelDir))
		}
		if res, err = est.Evaluate(ctx, evalInput, int64(f.EvalSteps)); err != nil {
			return err
		}
	} else {
		hooks, err := trainHooks(rc, f, est, disc, stdout, log)
		if err != nil {
			return err
		}
		hooks = append(hooks, d.hooks...)
		maxSteps := int64(f.MaxSteps)
		if f.Steps > 0 && (maxSteps == 0 || start+int64(f.Steps) < maxSteps) {
			maxSteps = start + int64(f.Steps)
		}
		res, err = est.TrainAndEvaluate(ctx,
			estimator.TrainSpec[*batch.Batch]{Input: trainInput, MaxSteps: maxSteps, Hooks: hooks},
			estimator.EvalSpec[*batch.Batch]{Input: evalInput, Steps: int64(f.EvalSteps)})
		if err != nil {
			return err
		}
	}
	if in.best != nil {
		fmt.Fprintf(stdout, "best auc=%.4f loss=%.4f\n", in.best.auc, in.best.loss)
	}
	_, err = fmt.Fprintf(stdout, "eval auc=%.4f loss=%.4f steps=%d\n", res.Metrics["auc"], res.Metrics["log_loss"], res.GlobalStep)
	return err
}

// trainHooks are the command's hooks of the training loop: the barrier the controller places,
// the controller hook server (the reference's ServerHook, started unless training is synchronous,
// which runConfig refuses), a line saying where it listens, and the registration with the service
// discovery.
func trainHooks(rc *runconfig.RunnerConfig, f cputrainingspec.TrainFlags, est *estimator.Estimator[*batch.Batch],
	disc discovery.ServiceDiscovery, stdout io.Writer, log *slog.Logger) ([]runhook.Hook, error) {
	b, err := barrier.New(rc.NumWorkers)
	if err != nil {
		return nil, err
	}
	ctl, err := controller.NewHook(controller.Config{
		ModelDir: rc.ModelDir, Barrier: b, Saver: est,
		GlobalStep: func(context.Context) (int64, error) { return est.GlobalStep(), nil },
		ListenAddr: f.ControllerAddr, Host: advertisedHost(f.ControllerAddr),
	})
	if err != nil {
		return nil, err
	}
	hooks := []runhook.Hook{&barrier.Hook{Index: rc.Index, Barrier: b}, ctl, &printHook{f: func() string {
		return fmt.Sprintf("  controller   %s (StopTraining, ResumeTraining, SaveCheckpoint, GetTrainingStatus; address in %s)",
			ctl.Addr(), filepath.Join(rc.ModelDir, controller.ServerAddrFilename))
	}, w: stdout}}
	if disc != nil {
		hooks = append(hooks, &registerHook{d: disc, serverType: rc.ServerType, index: rc.Index, want: rc.NumWorkers,
			addr: ctl.Addr, timeout: f.DiscoveryTimeout, out: stdout, log: log})
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

// inputFn opens files as batches of size; every error reading them is an inputError.
func inputFn(files []string, in data, size int, what string) estimator.InputFn[*batch.Batch] {
	return func(context.Context, estimator.Mode) (estimator.Input[*batch.Batch], error) {
		r, err := batch.Open(files, in.opts, in.schema, size)
		if err != nil {
			return nil, &inputError{what: what, err: err}
		}
		return checkedInput{r: r, what: what}, nil
	}
}

// checkedInput marks the reader's errors as input errors.
type checkedInput struct {
	r    *batch.Reader
	what string
}

func (c checkedInput) Next(ctx context.Context) (*batch.Batch, error) {
	b, err := c.r.Next(ctx)
	if err != nil && !errors.Is(err, io.EOF) && ctx.Err() == nil {
		return nil, &inputError{what: c.what, err: err}
	}
	return b, err
}

func (c checkedInput) Close() error { return c.r.Close() }
