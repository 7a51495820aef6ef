// Command train trains a model without TensorFlow: the training runtime of Monolith's
// native_training (runner_utils' RunnerConfig, service discovery, the estimator loop with its
// checkpoints and the controller hook server) driving, over TFRecord files of Monolith Examples,
// either the sparse + dense recommendation model of pkg/trainer/dnn (--model=dnn, the default:
// embedding tables on parameter servers over gRPC, pooled per slot by the fused layout kernel, an
// MLP with the dot interaction) or a logistic regression (--model=logreg, pkg/trainer/logreg).
//
// With no --train_data it runs a self-contained demo: a deterministic synthetic click log
// (pkg/trainer/synth; for dnn its ids have latent factors, so that only embeddings do well, and
// the best achievable AUC is known) is written as TFRecords into a temporary directory, the model
// trains on it and is evaluated on a held-out stream. With --num_ps 0 (the default) the dnn's
// parameter servers run in this process (--local_ps of them, each on a loopback gRPC listener):
// `train` with no flags is a cluster of 2 parameter servers and 1 worker. It prints progress
// (step, examples/s, loss, train AUC, PS lookup latency) every --log_step_count_steps, the
// throughput with the time split between the step's phases, and ends with the line
// "eval auc=<x> best auc=<b> loss=<y> steps=<global step>" ("eval auc=<x> loss=<y> steps=<n>" on
// files). Checkpoints go to --model_dir (a new temporary directory when not given, printed) every
// --save_checkpoints_steps (100 unless a save interval is given), the last
// --checkpoints_max_to_keep kept; for dnn a checkpoint holds the dense parameters and, beside
// them, the tables' dump of the same step (<model_dir>/model.ckpt-<step>.embeddings/). A run with
// the same --model_dir resumes from its last checkpoint: the global step continues and (dnn) the
// input goes on at the batch the step had reached.
//
// A cluster of processes: cmd/ps processes and cmd/train workers (--num_ps, --num_workers,
// --index or --role) find each other through the service discovery (--discovery_type zk with
// --zk_server, primus with --tf_config, mlp, consul). The chief (worker 0) creates the tables,
// restores and saves the checkpoints and evaluates; the dense parameters stay synchronous across
// workers by an allreduce of their gradients on PS 0 (pkg/ps AllReduce).
//
// The run is local unless --discovery_type is given: then it registers itself as worker.<index>
// with that service discovery while it trains, and deregisters at the end. While training runs
// the chief's controller hook server (the reference's ServerHook) serves StopTraining,
// ResumeTraining, SaveCheckpoint and GetTrainingStatus; its address is in
// <model_dir>/controller_server_addr.txt. The status endpoint (--status_addr) serves Prometheus
// metrics.
//
// SIGTERM or SIGINT (the first; a second kills the process) stops the run in order once training
// has begun: the step in progress ends, the chief saves its final checkpoint of that step and
// evaluates, the worker deregisters from the service discovery and exits 0, printing "stopped
// step=<n> ... by SIGTERM: ..." (a signal before training begins cancels the run: exit 1, naming
// the signal; so does an orderly stop that outlasts --stop_grace). In a job of several workers
// the signal stops the whole job, whichever worker gets it: the signalled worker announces its
// stop in the next step's dense allreduce on PS 0 (the flag a worker's last batch sets), and every
// worker stops after that step, the chief with its final checkpoint of it, all exiting 0; the
// others print "stopped step=<n> by another worker ...". A worker or parameter server that dies
// (killed, or failed: the chief's saver on a full disk) is seen by the others through their
// watch of the job's processes (a TCP probe of its address every 200 ms: the parameter servers',
// the chief's controller server's, the workers' status endpoints'): a worker waiting for it (at
// the step gate, the job's barrier, the allreduce) fails at once, naming it ("worker 0 (the chief,
// <addr>) is gone ..."), rather than after --ps_timeout.
//
// The worker is pkg/trainer/job (its parts: pkg/trainer/trainstatus, densesync, psservers,
// register, dnnckpt); this command maps its flags onto a job.Config, reads the input patterns or
// generates the demo's data, and turns the job's errors into exit statuses.
//
// Exit status: 0 after training and evaluation, 2 for a bad command line or bad input (missing or
// corrupt data files, a bad pattern, an unwritable --model_dir, a bad --restore_dir), 1 for a
// failure at run time (a parameter server gone, a corrupt checkpoint, a discovery that cannot be
// reached).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	cputrainingspec "github.com/monolith-go/monolith/gen/spec/native_training/cpu_training"
	exporthooksspec "github.com/monolith-go/monolith/gen/spec/native_training/model_export/export_hooks"
	"github.com/monolith-go/monolith/internal/cli"
	"github.com/monolith-go/monolith/internal/jobdiscovery"
	"github.com/monolith-go/monolith/pkg/dataset"
	"github.com/monolith-go/monolith/pkg/hooks/runhook"
	"github.com/monolith-go/monolith/pkg/runconfig"
	"github.com/monolith-go/monolith/pkg/runner/checkpoint"
	"github.com/monolith-go/monolith/pkg/tlsconfig"
	"github.com/monolith-go/monolith/pkg/trainenv"
	"github.com/monolith-go/monolith/pkg/trainer/hashbucket"
	"github.com/monolith-go/monolith/pkg/trainer/job"
	"github.com/monolith-go/monolith/pkg/trainer/traininput"
)

const name = "train"

const description = "Train a recommendation model (embedding tables on parameter servers and an MLP, or a logistic " +
	"regression) on TFRecord files of Monolith Examples with the training runtime (run config, service discovery, " +
	"checkpoints, controller). Without --train_data it trains on a generated click log in an in-process cluster " +
	"(nothing to install) and prints the generator's best AUC and the model's eval AUC."

// cmdFlags is the command line: the RunnerConfig's flags and the command's own, both from specs.
// The train flags come first: --help lists the ungrouped ones (what a user needs first), then the
// groups in the order their first flag comes, the reference's RunnerConfig flags last but one.
type cmdFlags struct {
	cli.Common
	cputrainingspec.TrainFlags
	exporthooksspec.ExportHookFlags
	runconfig.RunnerFlags
}

// deps is what run takes from its process; tests replace it.
type deps struct {
	// env is the environment the run config and the service discovery read (nil: the process's).
	env trainenv.Env
	// setenv receives the run config's environment exports (nil: os.Setenv).
	setenv func(name, value string) error
	// hooks run in the training loop after the job's own (tests watch the run through them).
	hooks []runhook.Hook
	// stop, closed, stops the training in order (job.Config.Stop); stopReason names why
	// (job.Config.StopReason).
	stop       <-chan struct{}
	stopReason func() string
}

// main is cli.Main's, with the signal kept as the cause of the context's cancellation, so that
// the run names it ("stopped step=<n> by SIGTERM: ..."): the first SIGINT or SIGTERM cancels the
// command's context, and a second one kills the process at once (cli.KillOnSecondSignal).
func main() {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-sigs
		signal.Reset(syscall.SIGINT, syscall.SIGTERM)
		cancel(signalled{s})
	}()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, deps{})
	cancel(nil)
	os.Exit(code)
}

// signalled is the cause of the command's context when a signal cancelled it.
type signalled struct{ sig os.Signal }

func (s signalled) Error() string { return signalName(s.sig) + " received" }

// signalName is a signal's name as kill(1) spells it.
func signalName(s os.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
}

// stopReason names what cancelled ctx: the signal, when main's handler did ("a signal" when it
// is not known, a test's cancellation).
func stopReason(ctx context.Context) string {
	var s signalled
	if errors.As(context.Cause(ctx), &s) {
		return signalName(s.sig)
	}
	return "a signal"
}

// run runs the command and returns its exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, d deps) int {
	var c cmdFlags
	return cli.Run(name, description, &c, &c.LogLevel, args, stdout, stderr, func(log *slog.Logger) error {
		if d.env == nil {
			d.env = trainenv.FromOS()
		}
		if d.setenv == nil {
			d.setenv = os.Setenv
		}
		o := newOrderly(ctx, c.StopGrace)
		defer o.release()
		d.hooks = append(d.hooks, o.startedHook())
		d.stop = o.stop
		d.stopReason = func() string { return stopReason(ctx) }
		err := train(o.ctx, c, cli.FlagGiven(args, "discovery_type"), stdout, log, d)
		if err != nil && ctx.Err() != nil {
			// What the signal cut short says so, naming it.
			when := ""
			switch {
			case !o.started.Load():
				when = " before training began"
			case o.ctx.Err() != nil:
				when = fmt.Sprintf(" (the orderly stop took longer than --stop_grace %v)", c.StopGrace)
			}
			err = fmt.Errorf("stopped by %s%s: %w", stopReason(ctx), when, err)
		}
		return cli.OneLine(classify(err))
	})
}

// orderly turns the first signal (the cancellation of the command's context) into an orderly
// stop: once training has begun, it ends at the step's end with a final checkpoint (stop closes),
// and the run's context is cancelled only if that takes longer than grace; before training
// begins, the signal cancels the run at once.
type orderly struct {
	ctx     context.Context
	stop    chan struct{}
	started atomic.Bool
	release func()
}

func newOrderly(signalled context.Context, grace time.Duration) *orderly {
	ctx, cancel := context.WithCancel(context.WithoutCancel(signalled))
	o := &orderly{ctx: ctx, stop: make(chan struct{})}
	done := make(chan struct{})
	o.release = func() { close(done); cancel() }
	go func() {
		select {
		case <-done:
			return
		case <-signalled.Done():
		}
		close(o.stop)
		if !o.started.Load() {
			cancel()
			return
		}
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-done:
		}
	}()
	return o
}

// startedHook marks the training begun.
func (o *orderly) startedHook() runhook.Hook { return &startedHook{o: o} }

type startedHook struct {
	runhook.Base
	o *orderly
}

func (h *startedHook) AfterCreateSession(context.Context, *runhook.Session) error {
	h.o.started.Store(true)
	return nil
}

// classify makes the job's errors of its settings and of its input usage errors (exit status 2);
// an input error is named by itself rather than by the layers of the loop it went through.
func classify(err error) error {
	var ie *job.InputError
	switch {
	case errors.As(err, new(cli.UsageError)):
		return err
	case errors.As(err, new(*job.ConfigError)):
		return cli.Usage(err)
	case errors.As(err, &ie):
		return cli.Usage(ie)
	}
	return err
}

// defaultSaveCheckpointsSteps is how often the command saves when no save interval is given (the
// estimator's own default saves only at the end, which would show no retention).
const defaultSaveCheckpointsSteps = 100

// train runs the command: flags, run config and job config, data, model dir, then the job.
func train(ctx context.Context, c cmdFlags, discoveryGiven bool, stdout io.Writer, log *slog.Logger, d deps) (err error) {
	f := c.TrainFlags
	if err := checkFlags(f, c.RunnerFlags.KafkaTopics != nil && strings.TrimSpace(*c.RunnerFlags.KafkaTopics) != ""); err != nil {
		return cli.Usage(err)
	}
	rc, err := runConfig(&c.RunnerFlags, discoveryGiven, d)
	if err != nil {
		return cli.Usage(err)
	}
	cfg := jobConfig(c, rc, d)
	if err := cfg.Check(); err != nil {
		return cli.Usage(err)
	}
	if psTLS := (tlsconfig.Files{Cert: f.TlsCert, Key: f.TlsKey, CA: f.TlsCa}); psTLS.Enabled() {
		// The job's parameter servers (cmd/ps --tls_*) are reached over TLS.
		opt, err := psTLS.DialOption()
		if err != nil {
			return cli.Usage(err)
		}
		cfg.DNN.PSDialOptions = append(cfg.DNN.PSDialOptions, opt)
	}
	if cfg.Discovery, err = jobdiscovery.Options(rc, d.env, log); err != nil {
		return cli.Usage(err)
	}
	compression, err := dataset.ParseCompression(f.Compression)
	if err != nil {
		return cli.Usage(fmt.Errorf("--compression: %w", err))
	}
	if rc.RestoreDir != nil && *rc.RestoreDir != "" {
		if st, err := os.Stat(*rc.RestoreDir); err != nil || !st.IsDir() {
			return cli.Usage(fmt.Errorf("--restore_dir %s is not a directory", *rc.RestoreDir))
		}
	}

	var in traininput.Input
	if len(rc.KafkaTopics) > 0 {
		var stopBroker func()
		if in, stopBroker, err = traininput.FromStream(ctx, f, rc, compression, stdout, log, d.stop); err != nil {
			return err
		}
		defer stopBroker()
	} else if f.TrainData != "" {
		// Files are checked before anything is written into the model dir.
		if in, err = traininput.FromFiles(f, compression, stdout); err != nil {
			return err
		}
		if err := in.Check(ctx); err != nil {
			return err
		}
	}
	// The model dir is checked before the demo's data is generated.
	if rc.ModelDir != "" {
		if err := checkWritable(rc.ModelDir); err != nil {
			return cli.Usage(fmt.Errorf("--model_dir %s is not writable: %w", rc.ModelDir, err))
		}
	}
	if f.TrainData == "" && len(rc.KafkaTopics) == 0 {
		dir, err := os.MkdirTemp("", "monolith-train-data-")
		if err != nil {
			return fmt.Errorf("demo data directory: %w", err)
		}
		defer os.RemoveAll(dir)
		if in, err = traininput.FromDemo(ctx, dir, f, rc.NumWorkers, compression, stdout); err != nil {
			return err
		}
	}
	cfg.Train, cfg.Eval, cfg.Schema, cfg.Best = in.Train, in.Eval, in.Schema, in.Best
	cfg.DNN.Sparse = traininput.DNNSparse(f, in.Features)

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
	return job.Run(ctx, cfg, stdout, log)
}

// jobConfig maps the flags onto the job's settings; the input, its schema and (dnn) its fid slots
// are set once the data is there.
func jobConfig(c cmdFlags, rc *runconfig.RunnerConfig, d deps) job.Config {
	f, ex := c.TrainFlags, c.ExportHookFlags
	hidden, _ := traininput.ParseHidden(f.Hidden) // checkFlags checked it
	return job.Config{
		Run: rc, Role: f.Role, Model: f.Model,
		Steps: f.Steps, MaxSteps: f.MaxSteps, EvalSteps: f.EvalSteps, Seed: uint64(f.Seed), EvalEverySteps: f.EvalEverySteps,
		DNN: job.DNNConfig{EmbeddingDim: f.EmbeddingDim, EmbeddingLearningRate: f.EmbeddingLearningRate, Hidden: hidden,
			DenseOptimizer: f.DenseOptimizer, DenseLearningRate: f.DenseLearningRate, LocalPS: f.LocalPS, PSTimeout: f.PSTimeout},
		Logreg:         job.LogregConfig{Optimizer: f.Optimizer, LearningRate: f.LearningRate, HashBuckets: f.HashBuckets},
		Export:         job.ExportConfig{Dir: ex.ExportDir, Every: ex.ExportEvery, Keep: ex.ExportKeep},
		ControllerAddr: f.ControllerAddr, StatusAddr: f.StatusAddr, DiscoveryTimeout: f.DiscoveryTimeout,
		Hooks: d.hooks, Stop: d.stop, StopReason: d.stopReason,
	}
}

// checkFlags checks the flags the job does not see: the input's and the demo's (job.Config.Check
// checks the others).
func checkFlags(f cputrainingspec.TrainFlags, stream bool) error {
	switch {
	case f.TrainData != "" && f.EvalData == "":
		return errors.New("--train_data needs --eval_data")
	case f.TrainData == "" && f.EvalData != "" && !stream:
		return errors.New("--eval_data needs --train_data (without both, the demo's data is generated)")
	case f.TrainData != "" && stream:
		return errors.New("--train_data and --kafka_topics: train on files or on a stream, not both")
	case stream && f.EvalData == "" && f.HoldoutEvery <= 0:
		return fmt.Errorf("--holdout_every %d with --kafka_topics and no --eval_data: nothing to evaluate on", f.HoldoutEvery)
	case f.MaxBadRecords < 0:
		return fmt.Errorf("--max_bad_records %d is negative", f.MaxBadRecords)
	case f.HoldoutSize <= 0:
		return fmt.Errorf("--holdout_size %d is not positive", f.HoldoutSize)
	case f.StreamLinger <= 0:
		return fmt.Errorf("--stream_linger %v is not positive", f.StreamLinger)
	case f.BatchSize <= 0:
		return fmt.Errorf("--batch_size %d is not positive", f.BatchSize)
	case f.Epochs <= 0:
		return fmt.Errorf("--epochs %d is not positive", f.Epochs)
	case f.DemoExamples < 4:
		return fmt.Errorf("--demo_examples %d: want at least 4 (a quarter of them is the evaluation set)", f.DemoExamples)
	case f.DemoSeed < 0:
		return fmt.Errorf("--demo_seed %d is negative", f.DemoSeed)
	case f.Seed < 0:
		return fmt.Errorf("--seed %d is negative", f.Seed)
	case f.ShuffleBuffer < 0:
		return fmt.Errorf("--shuffle_buffer %d is negative", f.ShuffleBuffer)
	case f.EmbeddingBuckets < 0 || f.EmbeddingBuckets > hashbucket.MaxBuckets:
		return fmt.Errorf("--embedding_buckets %d: want 0 (collisionless) to %d", f.EmbeddingBuckets, hashbucket.MaxBuckets)
	}
	if _, err := traininput.ParseHidden(f.Hidden); err != nil {
		return err
	}
	return nil
}

// runConfig builds the RunnerConfig from the flags (runconfig's merge rule) over the command's own
// values: a local run unless --discovery_type was given, and a checkpoint every
// defaultSaveCheckpointsSteps unless a save interval was given. What the job cannot run with it is
// refused by job.Config.Check.
func runConfig(flags *runconfig.RunnerFlags, discoveryGiven bool, d deps) (*runconfig.RunnerConfig, error) {
	values := map[string]any{}
	if !discoveryGiven {
		values["is_local"] = true
	}
	if n := flags.SaveCheckpointsSteps; n != nil && *n <= 0 {
		return nil, fmt.Errorf("--save_checkpoints_steps %d: want a positive number of steps (or --save_checkpoints_secs)", *n)
	}
	if n := flags.SaveCheckpointsSecs; n != nil && *n <= 0 {
		return nil, fmt.Errorf("--save_checkpoints_secs %d: want a positive number of seconds (or --save_checkpoints_steps)", *n)
	}
	if flags.SaveCheckpointsSteps == nil && flags.SaveCheckpointsSecs == nil {
		values["save_checkpoints_steps"] = defaultSaveCheckpointsSteps
	}
	return runconfig.New(runconfig.Sources{Values: values, Flags: runconfig.FlagValues(flags), Env: d.env.Lookup})
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
