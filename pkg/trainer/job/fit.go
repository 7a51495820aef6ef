package job

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/monolith-go/monolith/pkg/discovery"
	"github.com/monolith-go/monolith/pkg/estimator"
	"github.com/monolith-go/monolith/pkg/hooks/barrier"
	"github.com/monolith-go/monolith/pkg/hooks/controller"
	"github.com/monolith-go/monolith/pkg/hooks/runhook"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
	"github.com/monolith-go/monolith/pkg/trainer/densesync"
	"github.com/monolith-go/monolith/pkg/trainer/dnn"
	"github.com/monolith-go/monolith/pkg/trainer/logreg"
	"github.com/monolith-go/monolith/pkg/trainer/register"
	"github.com/monolith-go/monolith/pkg/trainer/trainstatus"
)

// fit builds the model, the estimator and the hooks, then trains and evaluates (or only evaluates
// in eval mode) and prints the final line. The chief evaluates; the other workers only train.
func fit(ctx context.Context, cfg Config, cp estimator.Checkpointer, disc discovery.ServiceDiscovery, r role, stdout io.Writer, log *slog.Logger) (err error) {
	rc := cfg.Run
	train, err := cfg.Train.Shard(r.index, r.workers)
	if err != nil {
		return configError(err)
	}
	log.Debug("input", "train", train.Describe(), "eval", cfg.Eval.Describe())
	st, err := trainstatus.Start(cfg.StatusAddr, stdout, log)
	if err != nil {
		return err
	}
	defer st.Stop(ctx)

	var (
		model estimator.Model[*batch.Batch]
		w     *worker
	)
	switch cfg.Model {
	case ModelLogreg:
		lr, err := logreg.New(logreg.Config{DenseDim: cfg.Schema.DenseDim(), HashBuckets: cfg.Logreg.HashBuckets,
			Optimizer: logreg.Optimizer(cfg.Logreg.Optimizer), LearningRate: cfg.Logreg.LearningRate})
		if err != nil {
			return configError(err)
		}
		model = lr
	default:
		if w, err = startWorker(ctx, cfg, disc, r, st, cp, stdout, log); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, w.close()) }()
		model, cp = w.model, w.checkpointer
	}
	// The checkpoints record where the chief's input was, so that a restored run goes on from
	// that example, whatever the batches before it held.
	trk := newTracker()
	// logreg's input starts over in every run (tf.estimator's train), the global step going on.
	trk.resume = w != nil
	pcp := &positionCheckpointer{Checkpointer: cp, tr: trk, own: r.chief(), prefix: checkpointPrefix(rc.ModelDir), log: log}
	if c, ok := cfg.Train.(interface {
		Commit(context.Context, []byte) error
	}); ok && r.chief() {
		pcp.commit = c.Commit
	}
	cp = pcp
	if c, ok := cfg.Train.(interface{ Collector() prometheus.Collector }); ok {
		if err := st.Register(c.Collector()); err != nil {
			return err
		}
	}
	ecfg := estimator.Config{Checkpointer: cp, LogStepCountSteps: int64(rc.LogStepCountSteps), Log: log}
	if ecfg.SaverListeners, err = exportListeners(cfg, w, r, stdout, log); err != nil {
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
		return configError(err)
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
	var sync *densesync.Sync
	if w != nil {
		sync = w.sync
	}
	// An interrupted job resumes where its input was (trk: the restored checkpoint's position).
	trainInput := inputFn(train, "training input", trk, st, sync, cfg.Stop)
	evalInput := inputFn(cfg.Eval, "evaluation input", nil, nil, nil, nil)

	var res estimator.EvalResult
	switch {
	case rc.Mode == "eval":
		if !found {
			return configError(fmt.Errorf("--mode eval: no checkpoint in --model_dir %s", rc.ModelDir))
		}
		if !r.chief() {
			return configError(errors.New("--mode eval: the chief (worker 0) evaluates"))
		}
		if res, err = est.Evaluate(ctx, evalInput, int64(cfg.EvalSteps)); err != nil {
			return err
		}
	default:
		hooks, err := trainHooks(cfg, est, disc, r, w, st, stdout, log)
		if err != nil {
			return err
		}
		if sync == nil {
			// With several workers Config.Stop ends the input instead (peekInput.Ended): the
			// job stops after the step whose allreduce carries it, on every worker.
			hooks = append(hooks, &stopHook{stop: cfg.Stop, tr: trk})
		}
		if r.chief() {
			hooks = append(hooks, &evalHook{est: est, input: evalInput, steps: int64(cfg.EvalSteps), every: int64(cfg.EvalEverySteps), tr: trk, out: stdout})
		}
		hooks = append(hooks, cfg.Hooks...)
		maxSteps := int64(cfg.MaxSteps)
		if cfg.Steps > 0 && (maxSteps == 0 || start+int64(cfg.Steps) < maxSteps) {
			maxSteps = start + int64(cfg.Steps)
		}

		if !r.chief() {
			tr, err := est.Train(ctx, trainInput, 0, maxSteps, hooks...)
			if err != nil {
				return err
			}
			if w != nil {
				st.Report(stdout, w.model)
			}
			printStop(stdout, cfg, r, trk, tr.GlobalStep, maxSteps)
			_, err = fmt.Fprintf(stdout, "trained steps=%d (the chief evaluates)\n", tr.GlobalStep)
			return err
		}
		res, err = est.TrainAndEvaluate(ctx,
			estimator.TrainSpec[*batch.Batch]{Input: trainInput, MaxSteps: maxSteps, Hooks: hooks},
			estimator.EvalSpec[*batch.Batch]{Input: evalInput, Steps: int64(cfg.EvalSteps)})
		if err != nil {
			return err
		}
		if w != nil {
			st.Report(stdout, w.model)
		}
		printStop(stdout, cfg, r, trk, est.GlobalStep(), maxSteps)
	}
	st.Evaluated(res.Metrics["auc"], res.Metrics["log_loss"])
	if b := cfg.Best; b != nil {
		fmt.Fprintf(stdout, "best auc=%.4f loss=%.4f\n", b.AUC, b.Loss)
		_, err = fmt.Fprintf(stdout, "eval auc=%.4f best auc=%.4f loss=%.4f steps=%d\n", res.Metrics["auc"], b.AUC, res.Metrics["log_loss"], res.GlobalStep)
		return err
	}
	_, err = fmt.Fprintf(stdout, "eval auc=%.4f loss=%.4f steps=%d\n", res.Metrics["auc"], res.Metrics["log_loss"], res.GlobalStep)
	return err
}

// trainHooks are the job's hooks of the training loop: the barrier the controller places (on PS
// 0 for dnn, so that the workers of other processes stop at it; in this process for logreg), the
// controller hook server on the chief (the reference's ServerHook), a line saying where it
// listens, the dnn worker's own (the job's start, the step gate, the PS health checker), progress
// lines, the registration with the service discovery, and with several workers the watch of the
// job's other processes (the barrier's and the gate's waits run under it).
func trainHooks(cfg Config, est *estimator.Estimator[*batch.Batch], disc discovery.ServiceDiscovery, r role, w *worker,
	st *trainstatus.Status, stdout io.Writer, log *slog.Logger) ([]runhook.Hook, error) {
	rc := cfg.Run
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
	var hooks []runhook.Hook
	if w != nil && w.peers != nil {
		hooks = append(hooks, waitHook{Hook: &barrier.Hook{Index: r.index, Barrier: b}, p: w.peers})
	} else {
		hooks = append(hooks, &barrier.Hook{Index: r.index, Barrier: b})
	}
	var addr func() string
	if r.chief() {
		ctl, err := controller.NewHook(controller.Config{
			ModelDir: rc.ModelDir, Barrier: b, Saver: est,
			GlobalStep: func(context.Context) (int64, error) { return est.GlobalStep(), nil },
			ListenAddr: cfg.ControllerAddr, Host: advertisedHost(cfg.ControllerAddr),
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
		if st.Addr() == "" && disc != nil {
			return nil, configError(errors.New("--status_addr is empty: a worker registers its status endpoint's address with the service discovery"))
		}
		addr = st.Addr
	}
	var model *dnn.Model
	if w != nil {
		hooks = append(hooks, w.hooks()...)
		model = w.model
	}
	hooks = append(hooks, st.ProgressHook(rc.LogStepCountSteps, model, stdout))
	if disc != nil {
		hooks = append(hooks, register.NewHook(register.Config{Discovery: disc, ServerType: rc.ServerType, Index: r.index, Want: rc.NumWorkers,
			Addr: addr, Timeout: cfg.DiscoveryTimeout, Out: stdout, Log: log}))
	}
	if w != nil {
		if h := w.watchHook(disc); h != nil {
			hooks = append(hooks, h)
		}
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

// printStop says what ended the training: a signal (Config.Stop, named by Config.StopReason),
// the input running out (--epochs), the step limit (--steps, --max_steps; a limit the input ran
// out before is named), or, in a job of several workers, another worker.
func printStop(out io.Writer, cfg Config, r role, trk *tracker, step, maxSteps int64) {
	limit := ""
	switch {
	case cfg.Steps > 0 && maxSteps != int64(cfg.MaxSteps):
		limit = fmt.Sprintf("--steps=%d", cfg.Steps)
	case maxSteps > 0:
		limit = fmt.Sprintf("--max_steps=%d", maxSteps)
	}
	examples := ""
	if n := trk.position(); n >= 0 {
		examples = fmt.Sprintf(" examples=%d", n)
	}
	epochs := "the end of the input"
	if e, ok := cfg.Train.(interface{ EpochCount() int }); ok {
		epochs = fmt.Sprintf("--epochs=%d", e.EpochCount())
	}
	saved := "the final checkpoint is saved"
	if !r.chief() {
		saved = "the chief saves the final checkpoint"
	}
	switch {
	case trk.stopped():
		reason := "a signal"
		if cfg.StopReason != nil && cfg.StopReason() != "" {
			reason = cfg.StopReason()
		}
		fmt.Fprintf(out, "stopped step=%d%s by %s: %s\n", step, examples, reason, saved)
	case trk.inputEnded() && limit != "":
		fmt.Fprintf(out, "stopped step=%d%s by %s: the training input ran out before %s\n", step, examples, epochs, limit)
	case trk.inputEnded():
		fmt.Fprintf(out, "stopped step=%d%s by %s: the training input ran out\n", step, examples, epochs)
	case limit != "" && step >= maxSteps:
		fmt.Fprintf(out, "stopped step=%d%s by %s\n", step, examples, limit)
	case r.workers > 1:
		fmt.Fprintf(out, "stopped step=%d%s by another worker (its input ran out, or it was stopped): %s\n", step, examples, saved)
	default:
		fmt.Fprintf(out, "stopped step=%d%s\n", step, examples)
	}
}

// stopHook ends the training loop after the step in progress once stop is closed.
type stopHook struct {
	runhook.Base
	stop <-chan struct{}
	tr   *tracker
}

func (h *stopHook) AfterRun(_ context.Context, rc *runhook.RunContext) error {
	select {
	case <-h.stop:
		h.tr.stop()
		rc.RequestStop()
	default:
	}
	return nil
}
