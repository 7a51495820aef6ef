package main

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
	"github.com/monolith-go/monolith/pkg/hooks/runhook"
	"github.com/monolith-go/monolith/pkg/ps"
	"github.com/monolith-go/monolith/pkg/trainer/dnn"
)

// The workers of a job meet on PS 0 (ps.Client's Arrive and AllReduce):
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

// startName is the start rendezvous' name on PS 0.
const startName = "train_start"

// denseSync is a worker's part in its job's synchronization.
type denseSync struct {
	client       *ps.Client // PS 0
	index, count int
	// timeout bounds each wait for the others; startTimeout the wait at the start.
	timeout, startTimeout time.Duration
	barrier               *barrier.Remote
	st                    *status
	log                   *slog.Logger

	round int64      // the start rendezvous' round: names this run's meeting points
	input *peekInput // the training input, which knows its last batch
	buf   []float64
	// stop is set when a worker's input ended with the step just reduced.
	stop atomic.Bool
}

func (s *denseSync) name(what string) string { return fmt.Sprintf("%s/%d", what, s.round) }

// start waits at the start rendezvous until every worker has arrived.
func (s *denseSync) start(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.startTimeout)
	defer cancel()
	round, err := s.client.Arrive(ctx, startName, s.index, s.count)
	if err != nil {
		return fmt.Errorf("the job's start: not all %d workers arrived within --discovery_timeout %v (the chief arrives once it has restored): %w",
			s.count, s.startTimeout, err)
	}
	s.round = round
	s.log.Info("the job's workers met", "round", round, "worker", s.index, "workers", s.count)
	return nil
}

// checkStart checks that every worker starts at step; it reports whether one's input is empty.
func (s *denseSync) checkStart(ctx context.Context, step int64) (empty bool, err error) {
	e := 0.0
	if s.input != nil && s.input.empty() {
		e = 1
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	mean, err := s.client.AllReduce(ctx, s.name("start"), 0, s.index, s.count, []float64{float64(step), e})
	if err != nil {
		return false, fmt.Errorf("the job's start: %w", err)
	}
	if mean[0] != float64(step) {
		return false, fmt.Errorf("the job's start: this worker restored global step %d, the %d workers' mean is %v: do all read the same --model_dir?", step, s.count, mean[0])
	}
	return mean[1] > 0, nil
}

// reduce is dnn's SyncGradients: the gradients become their mean over the workers.
func (s *denseSync) reduce(ctx context.Context, step int64, grads [][]float64) error {
	s.buf = s.buf[:0]
	for _, g := range grads {
		s.buf = append(s.buf, g...)
	}
	last := 0.0
	if s.input != nil && s.input.ended() {
		last = 1
	}
	s.buf = append(s.buf, last)
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	mean, err := s.client.AllReduce(rctx, s.name("dense"), step, s.index, s.count, s.buf)
	cancel()
	s.st.allreduce.Observe(time.Since(start).Seconds())
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
func (s *denseSync) gate(ctx context.Context, step int64) error {
	for {
		gctx, cancel := context.WithTimeout(ctx, s.timeout)
		_, err := s.client.Arrive(gctx, s.name("gate"), s.index, s.count)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || grpcstatus.Code(err) != codes.DeadlineExceeded {
			return fmt.Errorf("waiting for the other workers before step %d: %w", step, err)
		}
		st, serr := s.barrier.Status(ctx)
		if serr != nil || !st.Placed {
			return fmt.Errorf("waiting for the other workers before step %d: %w (a worker stopped? see its log)", step, err)
		}
		s.log.Info("the job's barrier is placed: waiting for its removal", "step", step)
		if err := s.awaitRemoval(ctx); err != nil {
			return err
		}
	}
}

// awaitRemoval waits until the job's barrier is removed: a worker at its slot, the chief (which
// has none) by polling.
func (s *denseSync) awaitRemoval(ctx context.Context) error {
	if s.index > 0 {
		return s.barrier.WaitUntilRemoved(ctx, s.index)
	}
	for {
		st, err := s.barrier.Status(ctx)
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

// barrierPoll is how often the chief looks whether the barrier is still placed.
const barrierPoll = 200 * time.Millisecond

// abort fails the allreduce round the others may wait at, telling them why this worker stopped.
func (s *denseSync) abort(ctx context.Context, step int64, cause error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
	defer cancel()
	reason := strings.ReplaceAll(cause.Error(), "\n", "; ")
	if err := s.client.AbortAllReduce(ctx, s.name("dense"), step, s.index, s.count, reason); err != nil {
		s.log.Warn("could not tell the other workers of the failure", "err", err)
	}
}

// abortTimeout bounds the abort of a failed worker.
const abortTimeout = 2 * time.Second

// syncHook drives denseSync in the training loop.
type syncHook struct {
	runhook.Base
	s     *denseSync
	model *dnn.Model
	chief bool
}

// AfterCreateSession: the chief, restored, meets the others; then all check their step. A job
// whose worker has no input stops before its first step.
func (h *syncHook) AfterCreateSession(ctx context.Context, sess *runhook.Session) error {
	if h.chief {
		if err := h.s.start(ctx); err != nil {
			return err
		}
	}
	empty, err := h.s.checkStart(ctx, h.model.GlobalStep())
	if err != nil {
		return err
	}
	if empty {
		h.s.log.Info("a worker's training input is over: the job stops", "global_step", h.model.GlobalStep())
		sess.Coord.RequestStop(nil)
	}
	return nil
}

func (h *syncHook) BeforeRun(ctx context.Context, rc *runhook.RunContext) error {
	if rc.Step == 0 {
		return nil
	}
	return h.s.gate(ctx, h.model.GlobalStep()+1)
}

func (h *syncHook) AfterRun(_ context.Context, rc *runhook.RunContext) error {
	if h.s.stop.Load() {
		rc.RequestStop()
	}
	return nil
}

// End tells the others why this worker's training failed.
func (h *syncHook) End(ctx context.Context, _ *runhook.Session, runErr error) error {
	if runErr != nil && h.s.round > 0 {
		h.s.abort(ctx, h.model.GlobalStep()+1, runErr)
	}
	return nil
}
