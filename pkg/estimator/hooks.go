package estimator

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/monolith-go/monolith/pkg/hooks/hookutil"
	"github.com/monolith-go/monolith/pkg/hooks/runhook"
	"github.com/monolith-go/monolith/pkg/runner/checkpoint"
)

// RunValues are what one step of the loop computed: TensorFlow's run_values, which a hook's
// after_run receives.
type RunValues struct {
	Mode Mode
	// GlobalStep is the global step after the step (unchanged by eval steps).
	GlobalStep int64
	// Output is what the model's op returned for the batch.
	Output StepOutput
}

// ValuesHook is implemented by hooks that want each step's values (after_run's run_values). The
// estimator calls AfterRunValues right after the hook's own AfterRun, for every step that ran a
// batch.
type ValuesHook interface {
	AfterRunValues(ctx context.Context, rc *runhook.RunContext, v RunValues) error
}

// loopState is what the estimator's step shares with its hooks during one loop.
type loopState struct {
	// ran is false when the last step found the input over and ran no batch.
	ran    bool
	values RunValues
}

// adapted wraps a hook for the estimator's loop: as in TensorFlow, a step whose input is over
// (OutOfRangeError) gets no after_run; every other step's AfterRun is followed by AfterRunValues
// when the hook implements ValuesHook.
type adapted struct {
	h  runhook.Hook
	st *loopState
}

func (a adapted) Begin(ctx context.Context) error { return a.h.Begin(ctx) }

func (a adapted) AfterCreateSession(ctx context.Context, s *runhook.Session) error {
	return a.h.AfterCreateSession(ctx, s)
}

func (a adapted) BeforeRun(ctx context.Context, rc *runhook.RunContext) error {
	return a.h.BeforeRun(ctx, rc)
}

func (a adapted) AfterRun(ctx context.Context, rc *runhook.RunContext) error {
	if !a.st.ran {
		return nil
	}
	if err := a.h.AfterRun(ctx, rc); err != nil {
		return fmt.Errorf("%T: %w", a.h, err)
	}
	if vh, ok := a.h.(ValuesHook); ok {
		if err := vh.AfterRunValues(ctx, rc, a.st.values); err != nil {
			return fmt.Errorf("%T.AfterRunValues: %w", a.h, err)
		}
	}
	return nil
}

func (a adapted) End(ctx context.Context, s *runhook.Session, runErr error) error {
	return a.h.End(ctx, s, runErr)
}

func adapt(st *loopState, hooks []runhook.Hook) []runhook.Hook {
	out := make([]runhook.Hook, len(hooks))
	for i, h := range hooks {
		out[i] = adapted{h: h, st: st}
	}
	return out
}

// stopAtStepHook stops the loop once the global step reaches last (StopAtStepHook).
type stopAtStepHook struct {
	runhook.Base
	last int64
}

func (h *stopAtStepHook) AfterRunValues(_ context.Context, rc *runhook.RunContext, v RunValues) error {
	if v.GlobalStep >= h.last {
		rc.RequestStop()
	}
	return nil
}

// stopAfterNHook stops an evaluation after n batches (_StopAfterNEvalsHook).
type stopAfterNHook struct {
	runhook.Base
	n, done int64
}

func (h *stopAfterNHook) AfterRunValues(_ context.Context, rc *runhook.RunContext, _ RunValues) error {
	h.done++
	if h.done >= h.n {
		rc.RequestStop()
	}
	return nil
}

// progressHook logs the training's progress (step, steps/s, examples/s, mean loss) every interval:
// TensorFlow's StepCounterHook and the loss logging of LoggingTensorHook in one line.
type progressHook struct {
	runhook.Base
	t   *checkpoint.Timer
	now func() time.Time
	log *slog.Logger

	lastTime time.Time
	lastStep int64
	examples int64
	lossSum  float64
	batches  int64
}

func (h *progressHook) AfterRunValues(_ context.Context, _ *runhook.RunContext, v RunValues) error {
	h.examples += int64(v.Output.Examples)
	h.lossSum += v.Output.Loss
	h.batches++
	if !h.t.ShouldTrigger(v.GlobalStep) {
		return nil
	}
	_, first := h.t.LastTriggeredStep()
	first = !first
	h.t.Update(v.GlobalStep)
	now := h.now()
	attrs := []any{"step", v.GlobalStep, "loss", h.lossSum / float64(h.batches)}
	if dt := now.Sub(h.lastTime); !first && dt > 0 {
		attrs = append(attrs, "steps_per_sec", float64(v.GlobalStep-h.lastStep)/dt.Seconds(), "examples_per_sec", float64(h.examples)/dt.Seconds())
	}
	h.log.Info("training progress", attrs...)
	h.lastTime, h.lastStep = now, v.GlobalStep
	h.examples, h.lossSum, h.batches = 0, 0, 0
	return nil
}

// saverHook saves checkpoints while training runs (the reference's NoFirstSaveCheckpointSaverHook
// over TensorFlow's CheckpointSaverHook): not when the session is created (that would rewrite the
// checkpoint just restored), then whenever the timer says after a step, and at the end of a clean
// loop unless its last step was saved already. Listeners are told around each save; one whose
// AfterSave asks to stop stops the loop. After each step and at the end it also serves the saves
// TriggerSave asked for.
type saverHook[B any] struct {
	runhook.Base
	e         *Estimator[B]
	t         *checkpoint.Timer
	listeners []hookutil.SaverListener
}

func (h *saverHook[B]) Begin(ctx context.Context) error {
	for _, l := range h.listeners {
		if err := l.Begin(ctx); err != nil {
			return fmt.Errorf("saver listener %T.Begin: %w", l, err)
		}
	}
	return nil
}

func (h *saverHook[B]) AfterCreateSession(context.Context, *runhook.Session) error {
	h.e.mu.Lock()
	defer h.e.mu.Unlock()
	h.t.Update(h.e.globalStep)
	h.e.training = true
	return nil
}

func (h *saverHook[B]) AfterRunValues(ctx context.Context, rc *runhook.RunContext, v RunValues) error {
	h.e.mu.Lock()
	defer h.e.mu.Unlock()
	var stop bool
	var err error
	if h.t.ShouldTrigger(v.GlobalStep) {
		h.t.Update(v.GlobalStep)
		stop, err = h.saveLocked(ctx)
		if stop {
			rc.RequestStop()
		}
		if err != nil {
			return err
		}
	}
	if len(h.e.saveRequests) > 0 {
		_, err = h.saveLocked(ctx)
		h.answerLocked(err)
	}
	return err
}

func (h *saverHook[B]) End(ctx context.Context, _ *runhook.Session, runErr error) error {
	h.e.mu.Lock()
	defer h.e.mu.Unlock()
	h.e.training = false
	if runErr != nil {
		h.answerLocked(fmt.Errorf("estimator: training failed before the triggered save: %w", runErr))
		return nil
	}
	step := h.e.globalStep
	_, err := h.saveLocked(ctx)
	h.answerLocked(err)
	if err != nil {
		return err
	}
	for _, l := range h.listeners {
		if err := l.End(ctx, step); err != nil {
			return fmt.Errorf("saver listener %T.End: %w", l, err)
		}
	}
	return nil
}

// answerLocked ends the pending TriggerSave calls with err.
func (h *saverHook[B]) answerLocked(err error) {
	for _, done := range h.e.saveRequests {
		done <- err
	}
	h.e.saveRequests = nil
}

// saveLocked saves the current global step unless it was saved already, telling the listeners.
// The caller holds e.mu.
func (h *saverHook[B]) saveLocked(ctx context.Context) (stop bool, err error) {
	step := h.e.globalStep
	if h.e.stateStep == step {
		return false, nil
	}
	for _, l := range h.listeners {
		if err := l.BeforeSave(ctx, step); err != nil {
			return false, fmt.Errorf("saver listener %T.BeforeSave: %w", l, err)
		}
	}
	if err := h.e.saveLocked(ctx, step); err != nil {
		return false, err
	}
	for _, l := range h.listeners {
		s, err := l.AfterSave(ctx, step)
		if err != nil {
			return false, fmt.Errorf("saver listener %T.AfterSave: %w", l, err)
		}
		if s {
			h.e.log.Info("a checkpoint listener requested that training be stopped", "listener", fmt.Sprintf("%T", l), "step", step)
			stop = true
		}
	}
	return stop, nil
}
