package prefetch

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/monolith-go/monolith/pkg/hooks/runhook"
)

// Mode says whether a function added to an AsyncFunctionMgr runs asynchronously.
type Mode int

const (
	// DefaultMode uses the manager's default (the reference's is_async=None).
	DefaultMode Mode = iota
	// Async queues the arguments; the function runs on them during the next step.
	Async
	// Sync runs the function at once.
	Sync
)

// ErrEnded is returned when arguments are queued for an async function after its hook ended.
var ErrEnded = errors.New("prefetch: the async function's run loop has ended")

// AsyncFunctionMgr is the reference's AsyncFunctionMgr: it turns functions into ones that queue
// their arguments, to be run during the following step by a hook (AsyncPushHook), so that their
// work (a push to the parameter servers, say) overlaps with the next step's.
type AsyncFunctionMgr struct {
	async bool
	hooks []runhook.Hook
}

// NewAsyncFunctionMgr returns a manager whose functions run asynchronously by default when async.
func NewAsyncFunctionMgr(async bool) *AsyncFunctionMgr { return &AsyncFunctionMgr{async: async} }

// Hooks are the hooks of the async functions added so far; the run loop must drive them.
func (m *AsyncFunctionMgr) Hooks() []runhook.Hook { return append([]runhook.Hook(nil), m.hooks...) }

// AddAsyncFunction is AsyncFunctionMgr.add_async_function. With Sync (or the manager's default
// false) it returns target itself. Otherwise it returns a function that queues its arguments in a
// queue of capacity 1 (blocking while the previous arguments wait; it fails with ErrEnded after the
// hook's End, or with ctx's error), and adds a hook to the manager that, as the reference's
// AsyncPushHook, runs target on one queued argument during each step once arguments were first
// queued (started in BeforeRun, awaited in AfterRun, so it overlaps the step), and at End, after a
// clean finish, drains the queue. target's error fails the step.
func AddAsyncFunction[A any](m *AsyncFunctionMgr, target func(ctx context.Context, args A) error, mode Mode) func(ctx context.Context, args A) error {
	async := m.async
	switch mode {
	case Async:
		async = true
	case Sync:
		async = false
	}
	if !async {
		return target
	}
	h := &asyncPushHook[A]{target: target, q: make(chan A, 1), ended: make(chan struct{})}
	m.hooks = append(m.hooks, h)
	return h.enqueue
}

// asyncPushHook runs an async function's target on the queued arguments.
type asyncPushHook[A any] struct {
	runhook.Base
	target func(context.Context, A) error
	q      chan A

	endOnce sync.Once
	ended   chan struct{}

	// Set once arguments were first seen queued after a step: from then on every step runs one.
	init bool
	// The run started by BeforeRun: stepDone is closed when the step is over, result gets the
	// target's error (nil when the step queued nothing to run).
	stepDone chan struct{}
	result   chan error
}

func (h *asyncPushHook[A]) enqueue(ctx context.Context, args A) error {
	select {
	case <-h.ended:
		return ErrEnded
	default:
	}
	select {
	case h.q <- args:
		return nil
	case <-h.ended:
		return ErrEnded
	case <-ctx.Done():
		return fmt.Errorf("prefetch: queue async function arguments: %w", ctx.Err())
	}
}

func (h *asyncPushHook[A]) BeforeRun(ctx context.Context, _ *runhook.RunContext) error {
	if !h.init {
		return nil
	}
	h.stepDone, h.result = make(chan struct{}), make(chan error, 1)
	stepDone, result := h.stepDone, h.result
	go func() {
		var args A
		select {
		case args = <-h.q:
		case <-stepDone:
			// The step is over: run what it queued last, if anything; never wait past it.
			select {
			case args = <-h.q:
			default:
				result <- nil
				return
			}
		case <-ctx.Done():
			result <- ctx.Err()
			return
		}
		result <- h.target(ctx, args)
	}()
	return nil
}

// wait ends the run BeforeRun started, if any, and returns its error.
func (h *asyncPushHook[A]) wait() error {
	if h.stepDone == nil {
		return nil
	}
	close(h.stepDone)
	err := <-h.result
	h.stepDone, h.result = nil, nil
	if err != nil {
		return fmt.Errorf("prefetch: async function: %w", err)
	}
	return nil
}

func (h *asyncPushHook[A]) AfterRun(context.Context, *runhook.RunContext) error {
	if err := h.wait(); err != nil {
		return err
	}
	if !h.init {
		h.init = len(h.q) > 0
	}
	return nil
}

// End waits for a run still going (the loop failed during a step), then, when the loop ended
// cleanly, runs the target on every argument still queued.
func (h *asyncPushHook[A]) End(ctx context.Context, _ *runhook.Session, runErr error) error {
	defer h.endOnce.Do(func() { close(h.ended) })
	if err := h.wait(); err != nil {
		return err
	}
	if runErr != nil {
		return nil
	}
	for len(h.q) > 0 {
		if err := h.target(ctx, <-h.q); err != nil {
			return fmt.Errorf("prefetch: async function (draining): %w", err)
		}
	}
	return nil
}
