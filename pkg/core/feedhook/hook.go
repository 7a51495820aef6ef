package feedhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// UserProvidedSignalName is the feature (and outfeed entry) carrying the end-of-stream signal.
const UserProvidedSignalName = "_user_provided_signal_name"

// ErrStopped is returned by BeforeRun once the outfeed has seen a stopping signal (the
// reference raises tf.errors.OutOfRangeError, which ends an Estimator's training loop).
var ErrStopped = errors.New("Stopped by stopping signal.")

// Outfeed is what one dequeue returns.
type Outfeed struct {
	// Signals is the entry under UserProvidedSignalName (it must hold "stopping"), nil when the
	// model sends no stopping signals.
	Signals map[string][]bool
}

// Session runs the TPU's enqueue and dequeue ops.
type Session interface {
	// Enqueue runs the infeed enqueue ops once.
	Enqueue(ctx context.Context) error
	// Dequeue runs the outfeed dequeue ops once.
	Dequeue(ctx context.Context) (Outfeed, error)
}

// HookConfig holds the hook's options.
type HookConfig struct {
	// RunInfeedLoopOnCoordinator enqueues once per iteration (true) or once per signal (false).
	RunInfeedLoopOnCoordinator bool
	// InitialInfeedSleep delays the infeed controller's start (tpu_config.initial_infeed_sleep_secs).
	InitialInfeedSleep time.Duration
	// OutfeedEveryNSteps dequeues on every n-th iteration only.
	OutfeedEveryNSteps int
	// StatusLogEvery is the outfeed status logger's interval (60 s in the reference).
	StatusLogEvery time.Duration
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock of the status logger; nil means time.Now.
	Now func() time.Time
}

// DefaultHookConfig returns the reference's defaults.
func DefaultHookConfig() HookConfig {
	return HookConfig{RunInfeedLoopOnCoordinator: true, OutfeedEveryNSteps: 1, StatusLogEvery: 60 * time.Second}
}

// Hook is the infeed/outfeed part of TPUInfeedOutfeedSessionWithEndOfStreamHandlingHook.
type Hook struct {
	sess Session
	cfg  HookConfig
	log  *slog.Logger

	stopping atomic.Bool
	mu       sync.Mutex
	infeed   *QueueContext
	outfeed  *QueueContext
}

// NewHook returns a hook driving the session; OutfeedEveryNSteps must be positive.
func NewHook(sess Session, cfg HookConfig) (*Hook, error) {
	if sess == nil {
		return nil, errkind.New(errkind.Value, "feed hook: nil session")
	}
	if cfg.OutfeedEveryNSteps <= 0 {
		return nil, errkind.New(errkind.Value, "feed hook: outfeed_every_n_steps must be positive, got %d", cfg.OutfeedEveryNSteps)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Hook{sess: sess, cfg: cfg, log: log}, nil
}

// Stopping says whether a stopping signal has ended the stream.
func (h *Hook) Stopping() bool { return h.stopping.Load() }

// AfterCreateSession starts the infeed and outfeed controllers.
func (h *Hook) AfterCreateSession(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.infeed != nil {
		return errkind.New(errkind.Precondition, "feed hook: controllers already started")
	}
	h.infeed = Start(ctx, "InfeedController", h.runInfeed, h.log)
	h.outfeed = Start(ctx, "OutfeedController", h.runOutfeed, h.log)
	return nil
}

// BeforeRun asks both controllers for the next iterations, or returns ErrStopped once a stopping
// signal was seen.
func (h *Hook) BeforeRun(iterations int) error {
	if h.stopping.Load() {
		h.log.Info("Throw OutOfRangeError error due to encountering stopping signal in before_run.")
		return errkind.New(errkind.Runtime, "feed hook: %w", ErrStopped)
	}
	h.mu.Lock()
	infeed, outfeed := h.infeed, h.outfeed
	h.mu.Unlock()
	if infeed == nil {
		return errkind.New(errkind.Precondition, "feed hook: BeforeRun before AfterCreateSession")
	}
	h.log.Info(fmt.Sprintf("Enqueue next (%d) batch(es) of data to infeed.", iterations))
	infeed.SendNextBatchSignal(iterations)
	h.log.Info(fmt.Sprintf("Dequeue next (%d) batch(es) of data from outfeed.", iterations))
	outfeed.SendNextBatchSignal(iterations)
	return nil
}

// End stops both controllers and returns their errors (what the rendezvous records).
func (h *Hook) End(ctx context.Context) error {
	h.mu.Lock()
	infeed, outfeed := h.infeed, h.outfeed
	h.mu.Unlock()
	if infeed == nil {
		return nil
	}
	h.log.Info("Stop infeed thread controller")
	errIn := infeed.Join(ctx)
	h.log.Info("Stop output thread controller")
	errOut := outfeed.Join(ctx)
	return errors.Join(errIn, errOut)
}

func (h *Hook) runInfeed(ctx context.Context, q *QueueContext) error {
	h.log.Info("Starting infeed thread controller.")
	if h.cfg.InitialInfeedSleep > 0 {
		h.log.Info(fmt.Sprintf("Infeed thread sleeping for %d seconds.", int(h.cfg.InitialInfeedSleep/time.Second)))
		t := time.NewTimer(h.cfg.InitialInfeedSleep)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("infeed: %w", ctx.Err())
		}
		h.log.Info("Infeed thread starting after sleep")
	}
	count := 0
	for steps := range q.ReadIterationCounts(ctx) {
		n := 1
		if h.cfg.RunInfeedLoopOnCoordinator {
			n = steps
		}
		for i := range n {
			h.log.Debug(fmt.Sprintf("Infeed enqueue for iteration (%d, %d)", count, i))
			if err := h.sess.Enqueue(ctx); err != nil {
				return fmt.Errorf("infeed: %w", err)
			}
		}
		count++
	}
	h.log.Info("Infeed thread finished, shutting down.")
	return nil
}

func (h *Hook) runOutfeed(ctx context.Context, q *QueueContext) error {
	h.log.Info("Starting outfeed thread controller.")
	status := NewPeriodicLogger(h.cfg.StatusLogEvery, h.log, h.cfg.Now)
	stopping := false
	count := 0
	for steps := range q.ReadIterationCounts(ctx) {
		for i := range max(steps, 0) {
			h.log.Debug(fmt.Sprintf("Outfeed dequeue for iteration (%d, %d)", count, i))
			if i%h.cfg.OutfeedEveryNSteps == 0 {
				ret, err := h.sess.Dequeue(ctx)
				if err != nil {
					return fmt.Errorf("outfeed: %w", err)
				}
				if ret.Signals != nil {
					sig, ok := ret.Signals["stopping"]
					if !ok {
						return errkind.New(errkind.Runtime, "ret[%s] must contain key 'stopping'.", UserProvidedSignalName)
					}
					if len(sig) == 0 {
						return errkind.New(errkind.Value, "outfeed: empty stopping signal")
					}
					if sig[0] && !stopping {
						stopping = true
						h.log.Info(fmt.Sprintf("Encountered stop signal at iteration (%d, %d).", count, i))
					}
				}
			}
			status.Log("Outfeed finished for iteration (%d, %d)", count, i)
		}
		if stopping {
			h.log.Info(fmt.Sprintf("Set shared stop signal at iteration %d.", count))
			h.stopping.Store(true)
		}
		count++
	}
	h.log.Info("Outfeed thread finished, shutting down.")
	return nil
}

// StoppingSignals is the computation of get_stopping_signals_and_name: every replica's signals
// cast to int32, summed across replicas (tf.tpu.cross_replica_sum), and compared > 0. All
// replicas must send the same number of signals; no replicas gives nil.
func StoppingSignals(perReplica [][]bool) ([]bool, error) {
	if len(perReplica) == 0 {
		return nil, nil
	}
	sums := make([]int32, len(perReplica[0]))
	for r, sig := range perReplica {
		if len(sig) != len(sums) {
			return nil, errkind.New(errkind.Value, "stopping signals: replica %d sent %d signals, replica 0 sent %d", r, len(sig), len(sums))
		}
		for i, s := range sig {
			if s {
				sums[i]++
			}
		}
	}
	out := make([]bool, len(sums))
	for i, s := range sums {
		out[i] = s > 0
	}
	return out, nil
}
