// Package estimator is the training loop of the reference's Estimator (native_training/estimator.py
// over tf.estimator.Estimator) without TensorFlow: a Model builds an EstimatorSpec per mode, and the
// Estimator runs its ops batch after batch through the run hooks of pkg/hooks/runhook, keeping the
// global step, restoring from the model dir's latest checkpoint (or warm starting) when it starts
// and saving checkpoints every N steps or seconds, at the end and on demand (TriggerSave) through a
// Checkpointer (pkg/estimator/ckptdir for a model directory).
//
// Train's step semantics are tf.estimator.Estimator.train's: steps trains that many more steps from
// the global step, max_steps stops at that absolute global step and skips training once it is
// reached; given both (TensorFlow refuses that), training stops at min(global_step+steps,
// max_steps). An input that ends stops training or evaluation cleanly.
package estimator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/hooks/hookutil"
	"github.com/monolith-go/monolith/pkg/hooks/runhook"
	"github.com/monolith-go/monolith/pkg/runner/checkpoint"
)

// DefaultSaveCheckpointsSteps is how often checkpoints are saved when neither interval is given:
// the reference's 100000000 steps, i.e. in practice only at the end of training.
const DefaultSaveCheckpointsSteps = 100000000

// DefaultLogStepCountSteps is how often progress is logged when no interval is given (RunConfig's
// log_step_count_steps).
const DefaultLogStepCountSteps = 100

// DefaultEvalThrottle is the least time between two evaluations of TrainAndEvaluate (EvalSpec's
// throttle_secs).
const DefaultEvalThrottle = 600 * time.Second

// Config configures an Estimator.
type Config struct {
	// Checkpointer stores the model dir's checkpoints; nil trains without saving or restoring.
	Checkpointer Checkpointer
	// SaveCheckpointsSteps or SaveCheckpointsSecs (at most one) is how often training saves a
	// checkpoint; with neither, DefaultSaveCheckpointsSteps. The end of training always saves.
	SaveCheckpointsSteps int64
	SaveCheckpointsSecs  time.Duration
	// SaverListeners are told before and after each save (CheckpointSaverListener).
	SaverListeners []hookutil.SaverListener
	// WarmStartFrom is a checkpoint path whose variables initialise the model when the model dir
	// has no checkpoint (warm_start_from; the global step is not warm started and stays 0). It is
	// read with WarmStartReader, or with Checkpointer when that is nil.
	WarmStartFrom   string
	WarmStartReader CheckpointReader
	// LogStepCountSteps or LogEvery (at most one) is how often training logs its progress; with
	// neither, DefaultLogStepCountSteps.
	LogStepCountSteps int64
	LogEvery          time.Duration
	// StopGrace bounds the wait for the loop's background goroutines at its end (runhook.Loop).
	StopGrace time.Duration
	// Now is the clock of the intervals; nil means time.Now.
	Now func() time.Time
	// Log receives progress; nil means slog.Default().
	Log *slog.Logger
}

// Estimator trains and evaluates one model. Its methods must not be called concurrently, except
// GlobalStep and TriggerSave, which may be called from any goroutine while it trains.
type Estimator[B any] struct {
	cfg   Config
	model Model[B]
	log   *slog.Logger

	// mu guards the fields below it against GlobalStep and TriggerSave from other goroutines.
	// The variables themselves are only touched by the goroutine running Train or Evaluate, or
	// under mu while no training runs.
	mu sync.Mutex
	// training is true while a training loop's saver hook runs (from AfterCreateSession to End);
	// saveRequests are TriggerSave calls it has to serve after the current step.
	training     bool
	saveRequests []chan error

	globalStep int64
	// initialized is true once the model's variables are known to this estimator: restored,
	// warm started or trained; stateStep is the checkpoint step they equal, -1 for none.
	initialized bool
	stateStep   int64
}

// New checks cfg and returns an estimator of model.
func New[B any](model Model[B], cfg Config) (*Estimator[B], error) {
	if model == nil {
		return nil, errkind.New(errkind.Value, "estimator: no model")
	}
	if cfg.SaveCheckpointsSteps < 0 || cfg.SaveCheckpointsSecs < 0 || cfg.LogStepCountSteps < 0 || cfg.LogEvery < 0 {
		return nil, errkind.New(errkind.Value, "estimator: checkpoint and log intervals must not be negative")
	}
	if cfg.SaveCheckpointsSteps > 0 && cfg.SaveCheckpointsSecs > 0 {
		return nil, errkind.New(errkind.Value, "Can not provide both save_checkpoints_secs and save_checkpoints_steps.")
	}
	if cfg.SaveCheckpointsSteps == 0 && cfg.SaveCheckpointsSecs == 0 {
		cfg.SaveCheckpointsSteps = DefaultSaveCheckpointsSteps
	}
	if cfg.LogStepCountSteps > 0 && cfg.LogEvery > 0 {
		return nil, errkind.New(errkind.Value, "estimator: give at most one of the log intervals in steps and in time")
	}
	if cfg.LogStepCountSteps == 0 && cfg.LogEvery == 0 {
		cfg.LogStepCountSteps = DefaultLogStepCountSteps
	}
	if cfg.WarmStartFrom != "" && cfg.WarmStartReader == nil {
		if cfg.Checkpointer == nil {
			return nil, errkind.New(errkind.Value, "estimator: warm start from %s needs a checkpoint reader", cfg.WarmStartFrom)
		}
		cfg.WarmStartReader = cfg.Checkpointer
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Estimator[B]{cfg: cfg, model: model, log: cfg.Log, stateStep: -1}, nil
}

// GlobalStep is the global step of the model's current variables.
func (e *Estimator[B]) GlobalStep() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.globalStep
}

// TriggerSave saves a checkpoint of the current variables unless their global step is saved
// already, and returns once it is written (the saver hook's trigger_save, which the controller's
// SaveCheckpoint RPC calls). While training runs, the training loop saves right after its current
// step, telling the saver listeners (a listener's request to stop is ignored then), and TriggerSave
// waits for that until ctx is done; a training that fails first fails the save. Without a
// Checkpointer, or before the model was restored or trained, it is an error of kind Runtime.
func (e *Estimator[B]) TriggerSave(ctx context.Context) error {
	if e.cfg.Checkpointer == nil {
		return errkind.New(errkind.Runtime, "estimator: no checkpointer to save with")
	}
	e.mu.Lock()
	if !e.training {
		defer e.mu.Unlock()
		if !e.initialized {
			// Saving would make untrained variables the model dir's latest checkpoint.
			return errkind.New(errkind.Runtime, "estimator: nothing to save: the model was neither restored nor trained")
		}
		if e.stateStep == e.globalStep {
			return nil
		}
		return e.saveLocked(ctx, e.globalStep)
	}
	done := make(chan error, 1)
	e.saveRequests = append(e.saveRequests, done)
	e.mu.Unlock()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("estimator: triggered save: %w", ctx.Err())
	}
}

// TrainResult says what a Train call did.
type TrainResult struct {
	// GlobalStep is the global step at the end.
	GlobalStep int64
	// Steps is how many steps this call trained.
	Steps int64
	// Skipped is true when max_steps had been reached already, so nothing was trained.
	Skipped bool
}

// Train trains the model on the batches of input (Estimator.train): restore from the latest
// checkpoint (or warm start), then train until input ends, steps more steps were trained or the
// global step reaches maxSteps (0 means not given; see the package comment), saving checkpoints as
// configured and at the end. hooks run before the estimator's own (stop at step, progress, saver).
func (e *Estimator[B]) Train(ctx context.Context, input InputFn[B], steps, maxSteps int64, hooks ...runhook.Hook) (TrainResult, error) {
	return e.train(ctx, input, steps, maxSteps, hooks, nil)
}

func (e *Estimator[B]) train(ctx context.Context, input InputFn[B], steps, maxSteps int64, hooks []runhook.Hook, extraListeners []hookutil.SaverListener) (TrainResult, error) {
	if steps < 0 {
		return TrainResult{}, errkind.New(errkind.Value, "Must specify steps > 0, given: %d", steps)
	}
	if maxSteps < 0 {
		return TrainResult{}, errkind.New(errkind.Value, "Must specify max_steps > 0, given: %d", maxSteps)
	}
	if err := e.restore(ctx, true); err != nil {
		return TrainResult{}, err
	}
	start := e.globalStep
	if maxSteps > 0 && start >= maxSteps {
		e.log.Info("Skipping training since max_steps has already saved.", "global_step", start, "max_steps", maxSteps)
		return TrainResult{GlobalStep: start, Skipped: true}, nil
	}
	last := int64(-1)
	switch {
	case steps > 0 && maxSteps > 0:
		last = min(start+steps, maxSteps)
	case steps > 0:
		last = start + steps
	case maxSteps > 0:
		last = maxSteps
	}
	spec, err := e.model.Spec(ctx, ModeTrain)
	if err != nil {
		return TrainResult{}, fmt.Errorf("estimator: build the train spec: %w", err)
	}
	if err := spec.validate(ModeTrain); err != nil {
		return TrainResult{}, err
	}
	in, err := input(ctx, ModeTrain)
	if err != nil {
		return TrainResult{}, fmt.Errorf("estimator: open the train input: %w", err)
	}
	defer in.Close()

	own := []runhook.Hook{}
	if last >= 0 {
		own = append(own, &stopAtStepHook{last: last})
	}
	pt, err := checkpoint.NewTimer(e.cfg.LogEvery, e.cfg.LogStepCountSteps, e.cfg.Now)
	if err != nil {
		return TrainResult{}, fmt.Errorf("estimator: progress: %w", err)
	}
	own = append(own, &progressHook{t: pt, now: e.cfg.Now, log: e.log})
	if e.cfg.Checkpointer != nil {
		st, err := checkpoint.NewTimer(e.cfg.SaveCheckpointsSecs, e.cfg.SaveCheckpointsSteps, e.cfg.Now)
		if err != nil {
			return TrainResult{}, fmt.Errorf("estimator: checkpoints: %w", err)
		}
		listeners := append(append([]hookutil.SaverListener(nil), e.cfg.SaverListeners...), extraListeners...)
		own = append(own, &saverHook[B]{e: e, t: st, listeners: listeners})
	}
	st := &loopState{}
	e.initialized = true
	step := func(ctx context.Context, rc *runhook.RunContext) error {
		st.ran = false
		batch, err := in.Next(ctx)
		if errors.Is(err, io.EOF) {
			e.log.Info("train input ended", "global_step", e.globalStep)
			rc.RequestStop()
			return nil
		}
		if err != nil {
			return fmt.Errorf("estimator: train input: %w", err)
		}
		out, err := spec.TrainOp(ctx, batch)
		if err != nil {
			return fmt.Errorf("estimator: train step %d: %w", e.globalStep+1, err)
		}
		if math.IsNaN(out.Loss) || math.IsInf(out.Loss, 0) {
			// NanTensorHook with fail_on_nan_loss: the variables are garbage from here on.
			return errkind.New(errkind.Runtime, "estimator: loss is %v at global step %d (NaN loss during training)", out.Loss, e.globalStep+1)
		}
		e.mu.Lock()
		e.globalStep++
		e.stateStep = -1
		e.mu.Unlock()
		st.ran, st.values = true, RunValues{Mode: ModeTrain, GlobalStep: e.globalStep, Output: out}
		return nil
	}
	e.log.Info("training", "global_step", start, "last_step", last)
	loop := runhook.Loop{Hooks: adapt(st, append(append([]runhook.Hook(nil), hooks...), own...)), Step: step, StopGrace: e.cfg.StopGrace}
	res := TrainResult{GlobalStep: e.globalStep}
	if err := loop.Run(ctx); err != nil {
		res.GlobalStep, res.Steps = e.globalStep, e.globalStep-start
		return res, fmt.Errorf("estimator: train: %w", err)
	}
	res.GlobalStep, res.Steps = e.globalStep, e.globalStep-start
	e.log.Info("training finished", "global_step", e.globalStep, "steps", res.Steps)
	return res, nil
}

// restore brings the model to the model dir's latest checkpoint when its variables are not that
// checkpoint's already; with none, warmStart applies WarmStartFrom to a model not yet initialized.
func (e *Estimator[B]) restore(ctx context.Context, warmStart bool) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.cfg.Checkpointer
	var (
		path string
		step int64
		ok   bool
		err  error
	)
	if c != nil {
		if path, step, ok, err = c.Latest(ctx); err != nil {
			return fmt.Errorf("estimator: latest checkpoint: %w", err)
		}
	}
	if ok {
		if e.initialized && e.stateStep == step {
			return nil
		}
		ts, err := c.Restore(ctx, path)
		if err != nil {
			return fmt.Errorf("estimator: restore: %w", err)
		}
		gs, found, rest, err := splitGlobalStep(path, ts)
		if err != nil {
			return err
		}
		if !found {
			return errkind.New(errkind.Value, "estimator: checkpoint %s holds no %s", path, GlobalStepName)
		}
		if err := e.model.Assign(rest); err != nil {
			return fmt.Errorf("estimator: restore %s: %w", path, err)
		}
		e.globalStep, e.stateStep, e.initialized = gs, step, true
		e.log.Info("restored checkpoint", "checkpoint", path, "global_step", gs)
		return nil
	}
	if !warmStart || e.initialized || e.cfg.WarmStartFrom == "" {
		return nil
	}
	ts, err := e.cfg.WarmStartReader.Restore(ctx, e.cfg.WarmStartFrom)
	if err != nil {
		return fmt.Errorf("estimator: warm start: %w", err)
	}
	_, _, rest, err := splitGlobalStep(e.cfg.WarmStartFrom, ts)
	if err != nil {
		return err
	}
	if err := e.model.Assign(rest); err != nil {
		return fmt.Errorf("estimator: warm start from %s: %w", e.cfg.WarmStartFrom, err)
	}
	e.globalStep, e.stateStep, e.initialized = 0, -1, true
	e.log.Info("warm started", "checkpoint", e.cfg.WarmStartFrom)
	return nil
}

// saveLocked writes the model's variables and the global step as the checkpoint of step. The
// caller holds e.mu.
func (e *Estimator[B]) saveLocked(ctx context.Context, step int64) error {
	ts := append(e.model.Tensors(), Tensor{Name: GlobalStepName, Int64: []int64{step}})
	path, err := e.cfg.Checkpointer.Save(ctx, step, ts)
	if err != nil {
		return fmt.Errorf("estimator: save checkpoint at step %d: %w", step, err)
	}
	e.stateStep = step
	e.log.Info("checkpoint saved", "checkpoint", path, "global_step", step)
	return nil
}

// EvalResult is an evaluation's outcome.
type EvalResult struct {
	// GlobalStep is the global step of the evaluated variables.
	GlobalStep int64
	// Loss is the mean of the batches' losses (TensorFlow's "loss" metric).
	Loss float64
	// Steps and Examples count the evaluated batches and examples.
	Steps    int64
	Examples int64
	// Metrics are the values of the spec's EvalMetrics.
	Metrics map[string]float64
}

// Evaluate evaluates the model on input (Estimator.evaluate): the variables of the model dir's
// latest checkpoint (the current ones when there is none), over steps batches or, with steps 0,
// until input ends.
func (e *Estimator[B]) Evaluate(ctx context.Context, input InputFn[B], steps int64, hooks ...runhook.Hook) (EvalResult, error) {
	if steps < 0 {
		return EvalResult{}, errkind.New(errkind.Value, "Must specify steps > 0, given: %d", steps)
	}
	if err := e.restore(ctx, false); err != nil {
		return EvalResult{}, err
	}
	return e.evaluate(ctx, input, steps, hooks)
}

// EvaluateNow evaluates the model's current variables on input, restoring nothing: an evaluation
// in the middle of training (a hook's, between two steps), of what the training has reached.
func (e *Estimator[B]) EvaluateNow(ctx context.Context, input InputFn[B], steps int64, hooks ...runhook.Hook) (EvalResult, error) {
	if steps < 0 {
		return EvalResult{}, errkind.New(errkind.Value, "Must specify steps > 0, given: %d", steps)
	}
	return e.evaluate(ctx, input, steps, hooks)
}

func (e *Estimator[B]) evaluate(ctx context.Context, input InputFn[B], steps int64, hooks []runhook.Hook) (EvalResult, error) {
	spec, err := e.model.Spec(ctx, ModeEval)
	if err != nil {
		return EvalResult{}, fmt.Errorf("estimator: build the eval spec: %w", err)
	}
	if err := spec.validate(ModeEval); err != nil {
		return EvalResult{}, err
	}
	in, err := input(ctx, ModeEval)
	if err != nil {
		return EvalResult{}, fmt.Errorf("estimator: open the eval input: %w", err)
	}
	defer in.Close()
	var own []runhook.Hook
	if steps > 0 {
		own = append(own, &stopAfterNHook{n: steps})
	}
	res := EvalResult{GlobalStep: e.globalStep, Metrics: map[string]float64{}}
	var lossSum float64
	st := &loopState{}
	step := func(ctx context.Context, rc *runhook.RunContext) error {
		st.ran = false
		batch, err := in.Next(ctx)
		if errors.Is(err, io.EOF) {
			rc.RequestStop()
			return nil
		}
		if err != nil {
			return fmt.Errorf("estimator: eval input: %w", err)
		}
		out, err := spec.EvalOp(ctx, batch)
		if err != nil {
			return fmt.Errorf("estimator: eval step %d: %w", res.Steps+1, err)
		}
		for name, m := range spec.EvalMetrics {
			if err := m.Update(out.Labels, out.Predictions); err != nil {
				return fmt.Errorf("estimator: eval metric %s: %w", name, err)
			}
		}
		res.Steps++
		res.Examples += int64(out.Examples)
		lossSum += out.Loss
		st.ran, st.values = true, RunValues{Mode: ModeEval, GlobalStep: e.globalStep, Output: out}
		return nil
	}
	loop := runhook.Loop{Hooks: adapt(st, append(append([]runhook.Hook(nil), hooks...), own...)), Step: step, StopGrace: e.cfg.StopGrace}
	if err := loop.Run(ctx); err != nil {
		return res, fmt.Errorf("estimator: evaluate: %w", err)
	}
	if res.Steps > 0 {
		res.Loss = lossSum / float64(res.Steps)
	}
	attrs := []any{"global_step", res.GlobalStep, "steps", res.Steps, "examples", res.Examples, "loss", res.Loss}
	for name, m := range spec.EvalMetrics {
		res.Metrics[name] = m.Value()
		attrs = append(attrs, name, res.Metrics[name])
	}
	e.log.Info("evaluation finished", attrs...)
	return res, nil
}

// TrainSpec is TrainAndEvaluate's training: its input, max_steps (0: until the input ends) and hooks.
type TrainSpec[B any] struct {
	Input    InputFn[B]
	MaxSteps int64
	Hooks    []runhook.Hook
}

// EvalSpec is TrainAndEvaluate's evaluation: its input, steps (0: until the input ends), hooks and
// the least time between two evaluations (0: DefaultEvalThrottle).
type EvalSpec[B any] struct {
	Input    InputFn[B]
	Steps    int64
	Hooks    []runhook.Hook
	Throttle time.Duration
}

// TrainAndEvaluate trains and evaluates as tf.estimator.train_and_evaluate does locally: training
// to train.MaxSteps, an evaluation after a checkpoint save when eval.Throttle has passed since the
// last one started, and a last evaluation of the final variables unless the last save was just
// evaluated. It returns the last evaluation. Unlike TensorFlow, a training skipped because
// max_steps was reached still ends with an evaluation, so the call always reports one.
func (e *Estimator[B]) TrainAndEvaluate(ctx context.Context, train TrainSpec[B], eval EvalSpec[B]) (EvalResult, error) {
	if eval.Steps < 0 {
		return EvalResult{}, errkind.New(errkind.Value, "Must specify steps > 0, given: %d", eval.Steps)
	}
	throttle := eval.Throttle
	if throttle <= 0 {
		throttle = DefaultEvalThrottle
	}
	t, err := checkpoint.NewTimer(throttle, 0, e.cfg.Now)
	if err != nil {
		return EvalResult{}, err
	}
	l := &evalListener[B]{e: e, spec: eval, t: t}
	if _, err := e.train(ctx, train.Input, 0, train.MaxSteps, train.Hooks, []hookutil.SaverListener{l}); err != nil {
		return EvalResult{}, err
	}
	if l.evaluated && l.last.GlobalStep == e.globalStep {
		return l.last, nil
	}
	if err := e.restore(ctx, false); err != nil {
		return EvalResult{}, err
	}
	return e.evaluate(ctx, eval.Input, eval.Steps, eval.Hooks)
}

// evalListener evaluates after a save once the throttle has passed
// (_NewCheckpointListenerForEvaluate).
type evalListener[B any] struct {
	hookutil.BaseListener
	e    *Estimator[B]
	spec EvalSpec[B]
	t    *checkpoint.Timer

	evaluated bool
	last      EvalResult
}

func (l *evalListener[B]) AfterSave(ctx context.Context, step int64) (bool, error) {
	if !l.t.ShouldTrigger(step) {
		return false, nil
	}
	l.t.Update(step)
	res, err := l.e.evaluate(ctx, l.spec.Input, l.spec.Steps, l.spec.Hooks)
	if err != nil {
		return false, err
	}
	l.evaluated, l.last = true, res
	return false, nil
}
