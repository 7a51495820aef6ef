// Package prefetch is Monolith's prefetch queue (monolith/native_training/prefetch_queue.py)
// without TensorFlow: a bounded queue that a goroutine keeps filled with the next values of an
// input while the training step uses the current one, and the async function manager, which runs
// a function on the values a step queued during the next step and drains what is left at the end.
//
// The reference flattens nested structures of tensors into a list to queue them and rebuilds the
// structure after the dequeue (nested_tensors.NestedTensors); in Go the queue is generic, so a
// value of any type (structs, maps, slices nested as deep as needed) is queued as it is. A queued
// value is shared, not copied: the producer must not change it afterwards (copy record data that
// aliases a reader's buffer, dataset.Record.Clone).
package prefetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/hooks/runhook"
)

// Producer returns the next value of an input, or io.EOF at its end. It should return promptly
// when ctx ends.
type Producer[T any] func(ctx context.Context) (T, error)

// ErrNotStarted is returned by Next on a queue whose producing loop was never started.
var ErrNotStarted = errors.New("prefetch: the queue's producer was not started (Start, Run or Hook)")

// Queue prefetches the values of a Producer into a bounded buffer: the reference's
// enqueue_dicts_with_queue_return with its EnqueueHook. A Queue of capacity 0 is no queue at all:
// Next calls the producer itself (the reference returns the tensors unchanged). Next may be called
// from any goroutine.
type Queue[T any] struct {
	capacity int
	produce  Producer[T]

	ch      chan T
	started atomic.Bool
	// err says why the producing loop ended (io.EOF: the input ended); it is written before ch is
	// closed, and read only after.
	err error

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// New returns a Queue holding up to capacity values of produce. The producer runs once the queue
// is started (Start, Run, or the hook of Hook); a negative capacity is an error of kind Value.
func New[T any](capacity int, produce Producer[T]) (*Queue[T], error) {
	if capacity < 0 {
		return nil, errkind.New(errkind.Value, "prefetch: capacity %d is negative", capacity)
	}
	if produce == nil {
		return nil, errkind.New(errkind.Value, "prefetch: no producer")
	}
	q := &Queue[T]{capacity: capacity, produce: produce}
	if capacity > 0 {
		q.ch = make(chan T, capacity)
	}
	return q, nil
}

// Capacity is how many values the queue holds.
func (q *Queue[T]) Capacity() int { return q.capacity }

// Len is how many values are waiting (the reference's queue size).
func (q *Queue[T]) Len() int { return len(q.ch) }

// Run is the producing loop: it calls the producer and queues its values, blocking while the queue
// is full, until the input ends (Next then returns io.EOF once the queue is empty), the producer
// fails (Run returns its error; Next returns it after the values queued before it), or ctx ends
// (Next then reports the stop); only the producer's failure is an error of Run. Run is for callers that run it in a goroutine of their own (Hook runs it
// on the loop's Coordinator); it may be called once, and returns at once for capacity 0.
func (q *Queue[T]) Run(ctx context.Context) error {
	if q.capacity == 0 {
		return nil
	}
	if !q.started.CompareAndSwap(false, true) {
		return errkind.New(errkind.Runtime, "prefetch: the queue's producer was already started")
	}
	return q.loop(ctx)
}

// loop runs the producing loop of a started queue; see Run.
func (q *Queue[T]) loop(ctx context.Context) error {
	err := q.run(ctx)
	// Only a failing producer is an error to the caller: the end of input, and a stop by ctx (the
	// loop ending), are not.
	if errors.Is(err, io.EOF) || ctx.Err() != nil {
		return nil
	}
	return err
}

func (q *Queue[T]) run(ctx context.Context) error {
	defer close(q.ch)
	for {
		v, err := q.produce(ctx)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				err = fmt.Errorf("prefetch: producer: %w", err)
			}
			q.err = err
			return err
		}
		select {
		case q.ch <- v:
		case <-ctx.Done():
			q.err = fmt.Errorf("prefetch: producer stopped: %w", ctx.Err())
			return q.err
		}
	}
}

// Start runs the producing loop in a goroutine of the queue's own, until the input ends, the
// producer fails, ctx ends or Close is called. It does nothing for capacity 0 or when the queue
// was started already.
func (q *Queue[T]) Start(ctx context.Context) {
	if q.capacity == 0 || !q.started.CompareAndSwap(false, true) {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	q.mu.Lock()
	q.cancel, q.done = cancel, done
	q.mu.Unlock()
	go func() {
		defer close(done)
		defer cancel()
		q.run(ctx)
	}()
}

// Close stops a loop that Start started and waits for it to return. Values queued before stay
// readable; then Next reports that the producer was stopped.
func (q *Queue[T]) Close() error {
	q.mu.Lock()
	cancel, done := q.cancel, q.done
	q.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	return nil
}

// Next returns the next value: from the queue, waiting for the producer when it is empty, or
// straight from the producer for capacity 0. After the input ends it returns io.EOF; after the
// producer failed, its error.
func (q *Queue[T]) Next(ctx context.Context) (T, error) {
	var zero T
	if q.capacity == 0 {
		return q.produce(ctx)
	}
	if !q.started.Load() {
		return zero, ErrNotStarted
	}
	select {
	case v, ok := <-q.ch:
		if !ok {
			return zero, q.err
		}
		return v, nil
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// Hook is the reference's EnqueueHook: when the loop's session exists it runs the producing loop
// on the loop's Coordinator, which stops it when the loop ends (and stops the loop when the
// producer fails). For capacity 0 the hook does nothing.
func (q *Queue[T]) Hook() runhook.Hook { return enqueueHook[T]{q: q} }

type enqueueHook[T any] struct {
	runhook.Base
	q *Queue[T]
}

func (h enqueueHook[T]) AfterCreateSession(_ context.Context, s *runhook.Session) error {
	if h.q.capacity == 0 {
		return nil
	}
	// Marked started here, not in the goroutine, so that the first step's Next finds it so.
	if !h.q.started.CompareAndSwap(false, true) {
		return errkind.New(errkind.Runtime, "prefetch: the queue's producer was already started")
	}
	s.Coord.Go(h.q.loop)
	return nil
}
