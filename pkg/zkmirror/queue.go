package zkmirror

import (
	"context"
	"sync"

	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// ErrStopped is returned by Queue.Get once the queue is closed (the mirror stopped), and by the
// mirror's methods after Stop.
var ErrStopped = errkind.New(errkind.Runtime, "zkmirror: stopped")

// compactAfter is how many consumed slots a queue that never empties keeps before moving its
// queued events to the front.
const compactAfter = 1024

// Queue is the mirror's event queue (the reference's queue.Queue of Events): unbounded and FIFO,
// so a watch callback never blocks on a slow consumer (the fake ZooKeeper runs callbacks in the
// goroutine making the change, which may be the consumer itself). It starts no goroutine.
type Queue struct {
	mu     sync.Mutex
	items  []datadef.Event
	head   int           // items[head:] are queued
	ready  chan struct{} // holds a token while items are queued and no consumer was woken for them
	closed chan struct{}
	once   sync.Once
}

// NewQueue returns an empty, open queue.
func NewQueue() *Queue {
	return &Queue{ready: make(chan struct{}, 1), closed: make(chan struct{})}
}

// Put appends ev; it reports false (and drops ev) once the queue is closed.
func (q *Queue) Put(ev datadef.Event) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.isClosed() {
		return false
	}
	q.items = append(q.items, ev)
	q.signal()
	return true
}

// signal leaves a wake-up token for one consumer; called with mu held.
func (q *Queue) signal() {
	select {
	case q.ready <- struct{}{}:
	default: // a token is already there
	}
}

func (q *Queue) isClosed() bool {
	select {
	case <-q.closed:
		return true
	default:
		return false
	}
}

// TryGet pops the oldest event without waiting; ok is false when the queue is empty or closed.
func (q *Queue) TryGet() (ev datadef.Event, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.isClosed() || q.head == len(q.items) {
		return datadef.Event{}, false
	}
	ev = q.items[q.head]
	q.items[q.head] = datadef.Event{} // let the data be collected
	q.head++
	switch {
	case q.head == len(q.items):
		q.items, q.head = q.items[:0], 0
	case q.head >= compactAfter && 2*q.head >= len(q.items):
		// A queue that never empties would otherwise keep its consumed prefix forever.
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	if q.head < len(q.items) {
		q.signal() // more are queued: pass the token on to another waiting consumer
	}
	return ev, true
}

// Get pops the oldest event, waiting for one. It returns ErrStopped once the queue is closed
// (queued events are dropped: the mirror is going away), or ctx's error when ctx ends first.
func (q *Queue) Get(ctx context.Context) (datadef.Event, error) {
	for {
		if ev, ok := q.TryGet(); ok {
			return ev, nil
		}
		if q.isClosed() {
			return datadef.Event{}, ErrStopped
		}
		select {
		case <-q.ready:
		case <-q.closed:
			return datadef.Event{}, ErrStopped
		case <-ctx.Done():
			return datadef.Event{}, context.Cause(ctx)
		}
	}
}

// Len is the number of queued events.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items) - q.head
}

// Clear drops every queued event and returns how many there were.
func (q *Queue) Clear() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := len(q.items) - q.head
	clear(q.items)
	q.items, q.head = q.items[:0], 0
	return n
}

// Close closes the queue: waiting and later Gets return ErrStopped, Puts are dropped. It may be
// called more than once.
func (q *Queue) Close() {
	q.once.Do(func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		close(q.closed)
		clear(q.items)
		q.items, q.head = nil, 0
	})
}

// Closed is closed once the queue is.
func (q *Queue) Closed() <-chan struct{} { return q.closed }
