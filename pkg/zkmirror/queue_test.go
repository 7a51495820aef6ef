package zkmirror

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/datadef"
)

func ev(i int) datadef.Event {
	p := "/e/" + strconv.Itoa(i)
	return datadef.Event{Path: &p, Data: []byte(strconv.Itoa(i)), EType: datadef.EventPublish}
}

func evIndex(t *testing.T, e datadef.Event) int {
	t.Helper()
	n, err := strconv.Atoi(string(e.Data))
	if err != nil {
		t.Fatalf("bad event %q", e.Data)
	}
	return n
}

func TestQueueFIFO(t *testing.T) {
	leakcheck.Check(t)
	q := NewQueue()
	// Interleave puts and gets without ever emptying the queue, past the compaction threshold.
	next, want := 0, 0
	for round := 0; round < 3*compactAfter; round++ {
		q.Put(ev(next))
		next++
		if round%3 == 0 {
			q.Put(ev(next))
			next++
		}
		got, ok := q.TryGet()
		if !ok {
			t.Fatalf("round %d: queue empty, %d queued", round, q.Len())
		}
		if n := evIndex(t, got); n != want {
			t.Fatalf("round %d: got event %d, want %d", round, n, want)
		}
		want++
	}
	if q.Len() != next-want {
		t.Fatalf("Len %d, want %d", q.Len(), next-want)
	}
	if len(q.items) > 2*(next-want)+compactAfter {
		t.Errorf("the consumed prefix was not dropped: %d slots for %d events", len(q.items), q.Len())
	}
	for ; want < next; want++ {
		got, err := q.Get(context.Background())
		if err != nil || evIndex(t, got) != want {
			t.Fatalf("Get = %v, %v; want event %d", got, err, want)
		}
	}
	if _, ok := q.TryGet(); ok {
		t.Fatal("TryGet on an empty queue succeeded")
	}
}

func TestQueueGetWaits(t *testing.T) {
	leakcheck.Check(t)
	tests := []struct {
		name    string
		act     func(q *Queue, cancel context.CancelFunc)
		wantErr error // nil: an event
	}{
		{"put", func(q *Queue, _ context.CancelFunc) { q.Put(ev(7)) }, nil},
		{"close", func(q *Queue, _ context.CancelFunc) { q.Close() }, ErrStopped},
		{"ctx", func(_ *Queue, cancel context.CancelFunc) { cancel() }, context.Canceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := NewQueue()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			const consumers = 3
			type res struct {
				ev  datadef.Event
				err error
			}
			out := make(chan res, consumers)
			for range consumers {
				go func() {
					e, err := q.Get(ctx)
					out <- res{e, err}
				}()
			}
			time.Sleep(10 * time.Millisecond) // let them block (the outcome does not depend on it)
			tc.act(q, cancel)
			if tc.wantErr == nil {
				r := <-out
				if r.err != nil || evIndex(t, r.ev) != 7 {
					t.Fatalf("Get = %v, %v", r.ev, r.err)
				}
				q.Close() // release the other consumers
				for range consumers - 1 {
					if r := <-out; !errors.Is(r.err, ErrStopped) {
						t.Fatalf("after Close: %v", r.err)
					}
				}
				return
			}
			for range consumers {
				if r := <-out; !errors.Is(r.err, tc.wantErr) {
					t.Fatalf("Get error %v, want %v", r.err, tc.wantErr)
				}
			}
		})
	}
}

func TestQueueClosed(t *testing.T) {
	q := NewQueue()
	q.Put(ev(1))
	q.Close()
	q.Close()
	if q.Put(ev(2)) {
		t.Error("Put after Close succeeded")
	}
	if _, err := q.Get(context.Background()); !errors.Is(err, ErrStopped) {
		t.Errorf("Get after Close: %v", err)
	}
	if q.Len() != 0 {
		t.Errorf("Len after Close = %d", q.Len())
	}
	select {
	case <-q.Closed():
	default:
		t.Error("Closed() not closed")
	}
}

func TestQueueClear(t *testing.T) {
	q := NewQueue()
	for i := range 5 {
		q.Put(ev(i))
	}
	if n := q.Clear(); n != 5 || q.Len() != 0 {
		t.Fatalf("Clear = %d, Len %d", n, q.Len())
	}
	q.Put(ev(9))
	if e, ok := q.TryGet(); !ok || evIndex(t, e) != 9 {
		t.Fatalf("after Clear: %v %v", e, ok)
	}
}

// TestQueueConcurrent: every event put by several producers reaches exactly one of several
// consumers, and each producer's events come out in its order.
func TestQueueConcurrent(t *testing.T) {
	leakcheck.Check(t)
	q := NewQueue()
	const producers, perProducer, consumers = 4, 2000, 3
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perProducer {
				q.Put(ev(p*perProducer + i))
			}
		}()
	}
	var mu sync.Mutex
	got := map[int]int{}
	last := map[int]int{} // per consumer and producer: the last index seen
	var cwg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var total sync.WaitGroup
	total.Add(producers * perProducer)
	for c := range consumers {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			for {
				e, err := q.Get(ctx)
				if err != nil {
					return
				}
				n := evIndex(t, e)
				mu.Lock()
				got[n]++
				key := c*producers + n/perProducer
				if prev, ok := last[key]; ok && prev >= n {
					t.Errorf("consumer %d got %d after %d", c, n, prev)
				}
				last[key] = n
				mu.Unlock()
				total.Done()
			}
		}()
	}
	wg.Wait()
	total.Wait()
	q.Close()
	cwg.Wait()
	for i := range producers * perProducer {
		if got[i] != 1 {
			t.Fatalf("event %d delivered %d times", i, got[i])
		}
	}
}
