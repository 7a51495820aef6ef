package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	monolithckptpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/hooks/hookutil"
	"github.com/monolith-go/monolith/pkg/hooks/runhook"
)

// Timer triggers at most once every EverySecs or once every EverySteps steps (TensorFlow's
// SecondOrStepTimer). Exactly one of the two is set.
type Timer struct {
	everySecs  time.Duration
	everySteps int64
	now        func() time.Time

	triggered bool
	lastStep  int64
	lastTime  time.Time
}

// NewTimer returns a timer of every (a duration) or steps; exactly one must be positive. now nil
// means time.Now.
func NewTimer(every time.Duration, steps int64, now func() time.Time) (*Timer, error) {
	if (every > 0) == (steps > 0) {
		return nil, errkind.New(errkind.Value, "exactly one of every_secs and every_steps should be provided.")
	}
	if now == nil {
		now = time.Now
	}
	return &Timer{everySecs: every, everySteps: steps, now: now}, nil
}

// ShouldTrigger reports whether step should trigger: always before the first trigger, never for the
// step that triggered last, else once the interval has passed.
func (t *Timer) ShouldTrigger(step int64) bool {
	switch {
	case !t.triggered:
		return true
	case t.lastStep == step:
		return false
	case t.everySecs > 0:
		return !t.now().Before(t.lastTime.Add(t.everySecs))
	default:
		return step >= t.lastStep+t.everySteps
	}
}

// Update records that step triggered now.
func (t *Timer) Update(step int64) {
	t.triggered, t.lastStep, t.lastTime = true, step, t.now()
}

// Reset forgets the last trigger, so the next step triggers.
func (t *Timer) Reset() { t.triggered = false }

// LastTriggeredStep is the step that triggered last; ok is false before the first trigger.
func (t *Timer) LastTriggeredStep() (step int64, ok bool) { return t.lastStep, t.triggered }

// GlobalStep reads the training's global step.
type GlobalStep func(ctx context.Context) (int64, error)

// HookOptions configure a SaverHook (the reference's NoFirstSaveCheckpointSaverHook arguments).
type HookOptions struct {
	// Saver writes the checkpoints; required.
	Saver *Saver
	// GlobalStep reads the step to save at; required.
	GlobalStep GlobalStep
	// SaveSecs or SaveSteps (exactly one) is how often AfterRun saves.
	SaveSecs  time.Duration
	SaveSteps int64
	// Listeners are told before and after each save, in order; an error of theirs fails the save. A
	// listener's AfterSave may ask the training to stop.
	Listeners []hookutil.SaverListener
	// GuardListeners are told before each save attempt in order and after it in reverse order, even
	// when it fails; their errors are logged, never returned (guard_saver_listeners).
	GuardListeners []hookutil.SaverListener
	// FirstSave saves when the session is created too; by default that first save is skipped, as the
	// reference's no_first_save does (it would only rewrite the checkpoint just restored).
	FirstSave bool
	// IgnoreSaveErrors makes a save that failed twice log instead of failing the step (TriggerSave
	// always returns the error).
	IgnoreSaveErrors bool
	// NoMonolithState leaves monolith_checkpoint alone (the reference writes it only when
	// save_graph_def is set, its default).
	NoMonolithState bool
	// NativeMultiHashTable records MULTI_CUCKOO_HASH_MAP rather than CUCKOO_HASH_MAP as the hash
	// table type of a new monolith_checkpoint.
	NativeMultiHashTable bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Log receives progress; nil means slog.Default().
	Log *slog.Logger
}

// SaverHook saves checkpoints while training runs (the reference's NoFirstSaveCheckpointSaverHook,
// a TensorFlow CheckpointSaverHook): every SaveSecs or SaveSteps after a step, once more at the end
// unless the last step was just saved, and on demand (TriggerSave, which the controller's
// SaveCheckpoint RPC calls). It keeps the directory's monolith_checkpoint: created when the session
// starts, its last save time updated after each save. Each save is tried twice.
type SaverHook struct {
	runhook.Base
	o HookOptions

	// mu serializes saves: the run loop's AfterRun and End against TriggerSave from an RPC.
	mu          sync.Mutex
	timer       *Timer
	noFirstSave bool
}

var _ runhook.Hook = (*SaverHook)(nil)

// NewSaverHook checks o and returns the hook.
func NewSaverHook(o HookOptions) (*SaverHook, error) {
	if o.Saver == nil || o.GlobalStep == nil {
		return nil, errkind.New(errkind.Value, "checkpoint: saver hook needs a Saver and a GlobalStep")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	t, err := NewTimer(o.SaveSecs, o.SaveSteps, o.Now)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: saver hook: %w", err)
	}
	return &SaverHook{o: o, timer: t, noFirstSave: !o.FirstSave}, nil
}

// Begin creates the checkpoint directory (as the estimator does for its model dir) and tells the
// listeners.
func (h *SaverHook) Begin(ctx context.Context) error {
	if err := os.MkdirAll(h.o.Saver.Dir(), 0o755); err != nil {
		return fmt.Errorf("checkpoint: create checkpoint directory: %w", err)
	}
	for _, l := range h.o.Listeners {
		if err := l.Begin(ctx); err != nil {
			return fmt.Errorf("checkpoint: listener %T.Begin: %w", l, err)
		}
	}
	return nil
}

// AfterCreateSession saves the state the session starts from (skipped unless FirstSave) and creates
// monolith_checkpoint when the directory has none.
func (h *SaverHook) AfterCreateSession(ctx context.Context, _ *runhook.Session) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	step, err := h.o.GlobalStep(ctx)
	if err != nil {
		return fmt.Errorf("checkpoint: global step: %w", err)
	}
	if _, err := h.save(ctx, step, h.o.IgnoreSaveErrors); err != nil {
		return err
	}
	h.timer.Update(step)
	return h.updateMonolithState(false)
}

// AfterRun saves when the timer says so, and stops the loop when a listener asks.
func (h *SaverHook) AfterRun(ctx context.Context, rc *runhook.RunContext) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	stop, err := h.maybeSave(ctx, h.o.IgnoreSaveErrors)
	if stop {
		rc.RequestStop()
	}
	return err
}

// TriggerSave saves a checkpoint at the current step now, whatever the timer says, and returns once
// it is written (trigger_save); a failed save is returned even with IgnoreSaveErrors.
func (h *SaverHook) TriggerSave(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.timer.Reset()
	_, err := h.maybeSave(ctx, false)
	return err
}

func (h *SaverHook) maybeSave(ctx context.Context, ignoreErrors bool) (bool, error) {
	step, err := h.o.GlobalStep(ctx)
	if err != nil {
		return false, fmt.Errorf("checkpoint: global step: %w", err)
	}
	if !h.timer.ShouldTrigger(step) {
		return false, nil
	}
	h.timer.Update(step)
	return h.save(ctx, step, ignoreErrors)
}

// End saves the last step unless it was just saved, then tells the listeners. After a failed loop
// (runErr set) it does neither, as TensorFlow calls end only on a clean finish.
func (h *SaverHook) End(ctx context.Context, _ *runhook.Session, runErr error) error {
	if runErr != nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	step, err := h.o.GlobalStep(ctx)
	if err != nil {
		return fmt.Errorf("checkpoint: global step: %w", err)
	}
	if last, ok := h.timer.LastTriggeredStep(); !ok || last != step {
		if _, err := h.save(ctx, step, h.o.IgnoreSaveErrors); err != nil {
			return err
		}
	}
	for _, l := range h.o.Listeners {
		if err := l.End(ctx, step); err != nil {
			return fmt.Errorf("checkpoint: listener %T.End: %w", l, err)
		}
	}
	return nil
}

// listenerError marks a listener's failure, which fails a save at once (no second try).
type listenerError struct{ err error }

func (e *listenerError) Error() string { return e.err.Error() }
func (e *listenerError) Unwrap() error { return e.err }

// save is NoFirstSaveCheckpointSaverHook._save: skipped the first time unless FirstSave; guard
// listeners around two tries of the listeners and the saver; the monolith state updated after a
// successful save.
func (h *SaverHook) save(ctx context.Context, step int64, ignoreErrors bool) (bool, error) {
	if h.noFirstSave {
		h.noFirstSave = false
		h.o.Log.Info("first save skipped", "step", step)
		return false, nil
	}
	for _, l := range h.o.GuardListeners {
		if err := l.BeforeSave(ctx, step); err != nil {
			h.o.Log.Error("guard listener BeforeSave failed", "listener", fmt.Sprintf("%T", l), "step", step, "err", err)
		}
	}
	defer func() {
		for i := len(h.o.GuardListeners) - 1; i >= 0; i-- {
			l := h.o.GuardListeners[i]
			if _, err := l.AfterSave(ctx, step); err != nil {
				h.o.Log.Error("guard listener AfterSave failed", "listener", fmt.Sprintf("%T", l), "step", step, "err", err)
			}
		}
	}()
	var lastErr error
	for try := 0; try < 2; try++ {
		start := h.o.Now()
		stop, err := h.saveOnce(ctx, step)
		if err == nil {
			err = h.updateMonolithState(true)
		}
		if err == nil {
			h.o.Log.Info("checkpoint saved", "step", step, "seconds", h.o.Now().Sub(start).Seconds())
			return stop, nil
		}
		var le *listenerError
		if errors.As(err, &le) || ctx.Err() != nil {
			return false, err
		}
		lastErr = err
		h.o.Log.Error("checkpoint save failed", "step", step, "try", try+1, "err", err)
	}
	if ignoreErrors {
		return false, nil
	}
	return false, lastErr
}

// saveOnce is CheckpointSaverHook._save: listeners before, the saver, listeners after.
func (h *SaverHook) saveOnce(ctx context.Context, step int64) (bool, error) {
	for _, l := range h.o.Listeners {
		if err := l.BeforeSave(ctx, step); err != nil {
			return false, &listenerError{fmt.Errorf("checkpoint: listener %T.BeforeSave: %w", l, err)}
		}
	}
	if _, err := h.o.Saver.Save(ctx, step); err != nil {
		return false, err
	}
	stop := false
	for _, l := range h.o.Listeners {
		s, err := l.AfterSave(ctx, step)
		if err != nil {
			return false, &listenerError{fmt.Errorf("checkpoint: listener %T.AfterSave: %w", l, err)}
		}
		if s {
			h.o.Log.Info("a checkpoint listener requested that training be stopped", "listener", fmt.Sprintf("%T", l))
			stop = true
		}
	}
	return stop, nil
}

// updateMonolithState is _create_or_update_monolith_ckpt_state: create monolith_checkpoint when
// missing; with update, also refresh an existing one's last save time (dropping exempt checkpoints
// that no longer exist).
func (h *SaverHook) updateMonolithState(update bool) error {
	if h.o.NoMonolithState {
		return nil
	}
	return UpdateMonolithState(h.o.Saver.Dir(), update, h.o.NativeMultiHashTable, h.o.Now(), h.o.Log)
}

// UpdateMonolithState is _create_or_update_monolith_ckpt_state for the checkpoints in dir: it
// creates monolith_checkpoint when missing (hash table type CUCKOO_HASH_MAP, or
// MULTI_CUCKOO_HASH_MAP with multiHashTable) with now as the last save time; with update it also
// sets an existing one's last save time (dropping exempt checkpoints that no longer exist).
func UpdateMonolithState(dir string, update, multiHashTable bool, now time.Time, log *slog.Logger) error {
	st, err := ReadMonolithState(dir, true, log)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	switch {
	case st == nil:
		st = &MonolithState{}
		t := monolithckptpb.MonolithCheckpointState_CUCKOO_HASH_MAP
		if multiHashTable {
			t = monolithckptpb.MonolithCheckpointState_MULTI_CUCKOO_HASH_MAP
		}
		st.BuiltinHashTableType = &t
	case !update:
		return nil
	}
	ts := now.Unix()
	st.LastCheckpointSaveTimestamp = &ts
	if err := WriteMonolithState(dir, st); err != nil {
		return fmt.Errorf("checkpoint: monolith state: %w", err)
	}
	return nil
}
