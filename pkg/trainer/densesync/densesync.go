// Package densesync keeps the workers of a dnn job in step. They meet on PS 0 (ps.Client's
// Arrive and AllReduce):
//
//   - at the start: the chief arrives once it has restored the checkpoint (dense parameters and
//     tables); the others wait for it before they read the model dir. The rendezvous' round
//     number, the same for all, names this run's meeting points, so that a job restarted on the
//     same parameter servers never meets a round of its predecessor. Then an allreduce checks
//     that all start at the same global step.
//   - at every step: the dense gradients are averaged (dnn's SyncGradients: an allreduce whose
//     mean every worker applies, so the dense parameters stay the same everywhere); the values
//     carry a flag saying whether the worker's input ends with this batch, and all stop after
//     the step when one's does.
//   - before every step but the first: a gate, so that nobody starts a step (and updates the
//     tables) before the chief has finished the previous one, its checkpoint included: a
//     checkpoint's tables and dense parameters are of the same step.
//
// The allreduce is held by PS 0 rather than by the workers themselves: the workers already reach
// it, it needs no listener on the workers nor a ring of them, and the dense gradients of the demo
// model (about 5,000 values) are small next to a step's embedding traffic.
package densesync

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/monolith-go/monolith/pkg/hooks/barrier"
	"github.com/monolith-go/monolith/pkg/ps"
)

// startName is the start rendezvous' name on PS 0.
const startName = "train_start"

// barrierPoll is how often the chief looks whether the barrier is still placed.
const barrierPoll = 200 * time.Millisecond

// abortTimeout bounds the abort of a failed worker.
const abortTimeout = 2 * time.Second

// Config is a worker's place in its job's synchronization.
type Config struct {
	// Client is PS 0's, where the workers meet.
	Client *ps.Client
	// Index is this worker's, of Count workers (0: the chief).
	Index, Count int
	// Timeout bounds each wait for the others (the job's PS call deadline); StartTimeout the wait
	// at the start (the job's discovery timeout: the chief restores meanwhile).
	Timeout, StartTimeout time.Duration
	// Barrier is the job's barrier on PS 0 (StopTraining, an unhealthy PS): a step gate that
	// outlasts Timeout while it is placed waits for its removal.
	Barrier *barrier.Remote
	// ObserveAllreduce, when not nil, is told how long each allreduce of the gradients took.
	ObserveAllreduce func(time.Duration)
	Log              *slog.Logger
}

// InputEnd is what the synchronization asks of a worker's training input: whether it has no
// batch at all, and whether the batch it returned last is its last one.
type InputEnd interface {
	Empty() bool
	Ended() bool
}

// Sync is a worker's part in its job's synchronization.
type Sync struct {
	cfg Config

	round int64    // the start rendezvous' round: names this run's meeting points
	input InputEnd // the training input, which knows its last batch
	buf   []float64
	// stop is set when a worker's input ended with the step just reduced.
	stop atomic.Bool
}

// New is a worker's synchronization with the others of its job.
func New(cfg Config) *Sync { return &Sync{cfg: cfg} }

// SetInput tells the synchronization the training input (each time the loop opens it), whose end
// it announces to the others.
func (s *Sync) SetInput(in InputEnd) { s.input = in }

func (s *Sync) name(what string) string { return fmt.Sprintf("%s/%d", what, s.round) }

// Start waits at the start rendezvous until every worker has arrived.
func (s *Sync) Start(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StartTimeout)
	defer cancel()
	round, err := s.cfg.Client.Arrive(ctx, startName, s.cfg.Index, s.cfg.Count)
	if err != nil {
		return fmt.Errorf("the job's start: not all %d workers arrived within --discovery_timeout %v (the chief arrives once it has restored): %w",
			s.cfg.Count, s.cfg.StartTimeout, err)
	}
	s.round = round
	s.cfg.Log.Info("the job's workers met", "round", round, "worker", s.cfg.Index, "workers", s.cfg.Count)
	return nil
}

// checkStart checks that every worker starts at step; it reports whether one's input is empty.
func (s *Sync) checkStart(ctx context.Context, step int64) (empty bool, err error) {
	e := 0.0
	if s.input != nil && s.input.Empty() {
		e = 1
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	mean, err := s.cfg.Client.AllReduce(ctx, s.name("start"), 0, s.cfg.Index, s.cfg.Count, []float64{float64(step), e})
	if err != nil {
		return false, fmt.Errorf("the job's start: %w", err)
	}
	if mean[0] != float64(step) {
		return false, fmt.Errorf("the job's start: this worker restored global step %d, the %d workers' mean is %v: do all read the same --model_dir?", step, s.cfg.Count, mean[0])
	}
	return mean[1] > 0, nil
}

// Reduce is dnn's SyncGradients: the gradients become their mean over the workers.
func (s *Sync) Reduce(ctx context.Context, step int64, grads [][]float64) error {
	s.buf = s.buf[:0]
	for _, g := range grads {
		s.buf = append(s.buf, g...)
	}
	last := 0.0
	if s.input != nil && s.input.Ended() {
		last = 1
	}
	s.buf = append(s.buf, last)
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	mean, err := s.cfg.Client.AllReduce(rctx, s.name("dense"), step, s.cfg.Index, s.cfg.Count, s.buf)
	cancel()
	if s.cfg.ObserveAllreduce != nil {
		s.cfg.ObserveAllreduce(time.Since(start))
	}
	if err != nil {
		return err
	}
	off := 0
	for _, g := range grads {
		off += copy(g, mean[off:off+len(g)])
	}
	if mean[off] > 0 {
		s.stop.Store(true)
	}
	return nil
}

// gate waits until every worker is about to start step: the chief's previous step is over. A
// wait that outlasts the timeout while the job's barrier is placed (StopTraining, an unhealthy
// PS) goes on once the barrier is removed.
func (s *Sync) gate(ctx context.Context, step int64) error {
	for {
		gctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
		_, err := s.cfg.Client.Arrive(gctx, s.name("gate"), s.cfg.Index, s.cfg.Count)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || grpcstatus.Code(err) != codes.DeadlineExceeded {
			return fmt.Errorf("waiting for the other workers before step %d: %w", step, err)
		}
		st, serr := s.cfg.Barrier.Status(ctx)
		if serr != nil || !st.Placed {
			return fmt.Errorf("waiting for the other workers before step %d: %w (a worker stopped? see its log)", step, err)
		}
		s.cfg.Log.Info("the job's barrier is placed: waiting for its removal", "step", step)
		if err := s.awaitRemoval(ctx); err != nil {
			return err
		}
	}
}

// awaitRemoval waits until the job's barrier is removed: a worker at its slot, the chief (which
// has none) by polling.
func (s *Sync) awaitRemoval(ctx context.Context) error {
	if s.cfg.Index > 0 {
		return s.cfg.Barrier.WaitUntilRemoved(ctx, s.cfg.Index)
	}
	for {
		st, err := s.cfg.Barrier.Status(ctx)
		if err != nil {
			return err
		}
		if !st.Placed {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(barrierPoll):
		}
	}
}

// abort fails the allreduce round the others may wait at, telling them why this worker stopped.
func (s *Sync) abort(ctx context.Context, step int64, cause error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
	defer cancel()
	reason := strings.ReplaceAll(cause.Error(), "\n", "; ")
	if err := s.cfg.Client.AbortAllReduce(ctx, s.name("dense"), step, s.cfg.Index, s.cfg.Count, reason); err != nil {
		s.cfg.Log.Warn("could not tell the other workers of the failure", "err", err)
	}
}
