// Package feedhook is the TPU-runtime-independent part of
// monolith/core/auto_checkpoint_feed_hook.py: the queue contexts that drive the infeed and
// outfeed controller threads (iteration counts, the STOP signal, signal-once queues), the
// periodic logger, the controllers' end-of-stream handling (a stopping signal seen on the
// outfeed ends the run at the next BeforeRun) and the cross-replica stopping signal.
package feedhook

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"sync"
)

// Control signals sent through a queue; positive numbers are iteration counts.
const (
	// SignalNextBatch is reserved for "the next batch" (the reference defines but never sends it;
	// a reader sees it as an iteration count of -1, i.e. no iterations).
	SignalNextBatch = -1
	// SignalStop ends ReadIterationCounts.
	SignalStop = -2
)

// QueueContext is _OpQueueContext: a queue of iteration counts and the goroutine that consumes
// it.
type QueueContext struct {
	name string
	once bool
	log  *slog.Logger

	mu       sync.Mutex
	queue    []int
	signaled bool
	notify   chan struct{} // a token whenever the queue grows

	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// Start starts target in a goroutine with the new queue context (the thread of
// _OpQueueContext). The goroutine's context is derived from ctx and cancelled by Join. A nil
// logger means slog.Default().
func Start(ctx context.Context, name string, target func(context.Context, *QueueContext) error, log *slog.Logger) *QueueContext {
	return start(ctx, name, false, target, log)
}

// StartSignalOnce is _OpSignalOnceQueueContext: only the first SendNextBatchSignal is queued.
func StartSignalOnce(ctx context.Context, name string, target func(context.Context, *QueueContext) error, log *slog.Logger) *QueueContext {
	return start(ctx, name, true, target, log)
}

func start(ctx context.Context, name string, once bool, target func(context.Context, *QueueContext) error, log *slog.Logger) *QueueContext {
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(ctx)
	q := &QueueContext{name: name, once: once, log: log, notify: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(q.done)
		q.err = target(ctx, q)
	}()
	return q
}

// Name is the context's name.
func (q *QueueContext) Name() string { return q.name }

func (q *QueueContext) put(v int) {
	q.mu.Lock()
	q.queue = append(q.queue, v)
	q.mu.Unlock()
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

// Stop queues SignalStop (also on a signal-once queue).
func (q *QueueContext) Stop() { q.put(SignalStop) }

// SendNextBatchSignal queues an iteration count; a signal-once queue takes only the first.
func (q *QueueContext) SendNextBatchSignal(iterations int) {
	if q.once {
		q.mu.Lock()
		first := !q.signaled
		q.signaled = true
		q.mu.Unlock()
		if !first {
			return
		}
	}
	q.put(iterations)
}

// ReadIterationCounts yields the queued iteration counts until SignalStop is read or ctx ends.
func (q *QueueContext) ReadIterationCounts(ctx context.Context) iter.Seq[int] {
	return func(yield func(int) bool) {
		for {
			q.mu.Lock()
			if len(q.queue) == 0 {
				q.mu.Unlock()
				select {
				case <-q.notify:
					continue
				case <-ctx.Done():
					return
				}
			}
			v := q.queue[0]
			q.queue = q.queue[1:]
			q.mu.Unlock()
			q.log.Debug(fmt.Sprintf("%s read iterations %d", q.name, v))
			if v == SignalStop {
				q.log.Info(fmt.Sprintf("%s received shutdown signal, stopping.", q.name))
				return
			}
			if !yield(v) {
				return
			}
		}
	}
}

// Join sends SignalStop and waits for the goroutine, returning the target's error. When ctx ends
// first, the goroutine's context is cancelled and ctx's error returned.
func (q *QueueContext) Join(ctx context.Context) error {
	q.log.Info(fmt.Sprintf("Shutting down %s thread.", q.name))
	q.Stop()
	defer q.cancel()
	select {
	case <-q.done:
		return q.err
	case <-ctx.Done():
		return fmt.Errorf("join %s: %w", q.name, ctx.Err())
	}
}

// Done is closed when the goroutine has returned.
func (q *QueueContext) Done() <-chan struct{} { return q.done }
