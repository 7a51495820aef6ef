package prefetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/hooks/runhook"
)

// batch is a nested value, as the reference queues nested structures of tensors.
type batch struct {
	Step   int
	Dense  map[string][]float32
	Sparse [][]int64
	Meta   *struct{ Files []string }
}

func makeBatch(i int) batch {
	return batch{
		Step:   i,
		Dense:  map[string][]float32{"x": {float32(i), 1}, "y": nil},
		Sparse: [][]int64{{int64(i)}, {}, {1, 2, 3}},
		Meta:   &struct{ Files []string }{Files: []string{fmt.Sprint("f", i)}},
	}
}

// counter produces batches 0..n-1, then end (io.EOF) or fail; it counts its calls.
type counter struct {
	n     int
	fail  error
	calls atomic.Int64
	// called gets a value per call, when set.
	called chan int
}

func (c *counter) produce(ctx context.Context) (batch, error) {
	i := int(c.calls.Add(1)) - 1
	if c.called != nil {
		select {
		case c.called <- i:
		case <-ctx.Done():
			return batch{}, ctx.Err()
		}
	}
	if i >= c.n {
		if c.fail != nil {
			return batch{}, c.fail
		}
		return batch{}, io.EOF
	}
	return makeBatch(i), nil
}

func TestQueueYieldsEveryValueThenTheEnd(t *testing.T) {
	boom := errors.New("disk on fire")
	tests := []struct {
		name     string
		capacity int
		n        int
		fail     error
	}{
		{"pass-through", 0, 5, nil},
		{"pass-through, failing", 0, 3, boom},
		{"capacity 1", 1, 5, nil},
		{"capacity 4", 4, 10, nil},
		{"capacity larger than the input", 64, 3, nil},
		{"empty input", 2, 0, nil},
		{"failing producer", 2, 4, boom},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			c := &counter{n: tc.n, fail: tc.fail}
			q, err := New(tc.capacity, c.produce)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			q.Start(ctx)
			defer q.Close()
			for i := range tc.n {
				got, err := q.Next(ctx)
				if err != nil {
					t.Fatalf("value %d: %v", i, err)
				}
				if !reflect.DeepEqual(got, makeBatch(i)) {
					t.Fatalf("value %d = %+v, want %+v", i, got, makeBatch(i))
				}
			}
			for range 2 {
				_, err := q.Next(ctx)
				if tc.fail == nil && err != io.EOF {
					t.Fatalf("after the input: %v, want io.EOF", err)
				}
				if tc.fail != nil && !errors.Is(err, boom) {
					t.Fatalf("after the values: %v, want the producer's error", err)
				}
			}
		})
	}
}

// With capacity c the producer runs ahead by c values (plus the one it holds while the queue is
// full) and no further; capacity 0 never runs it ahead.
func TestQueueIsBounded(t *testing.T) {
	for _, capacity := range []int{0, 1, 3} {
		t.Run(fmt.Sprint("capacity ", capacity), func(t *testing.T) {
			leakcheck.Check(t)
			c := &counter{n: 100, called: make(chan int)}
			q, err := New(capacity, c.produce)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			q.Start(ctx)
			defer q.Close()
			ahead := capacity
			if capacity > 0 {
				ahead++ // the value held while the queue is full
			}
			for i := range ahead {
				if got := <-c.called; got != i {
					t.Fatalf("call %d, want %d", got, i)
				}
			}
			select {
			case i := <-c.called:
				t.Fatalf("the producer was called for value %d with %d unread values (capacity %d)", i, ahead, capacity)
			case <-time.After(50 * time.Millisecond):
			}
			if capacity > 0 && q.Len() != capacity {
				t.Errorf("Len = %d, want %d", q.Len(), capacity)
			}
			// Reading one value lets the producer make exactly one more.
			got := make(chan error, 1)
			go func() {
				v, err := q.Next(ctx)
				if err == nil && v.Step != 0 {
					err = fmt.Errorf("read step %d, want 0", v.Step)
				}
				got <- err
			}()
			if i := <-c.called; i != ahead {
				t.Fatalf("after one read the producer made value %d, want %d", i, ahead)
			}
			if err := <-got; err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestQueueStops(t *testing.T) {
	t.Run("Close while the producer waits on a full queue", func(t *testing.T) {
		leakcheck.Check(t)
		c := &counter{n: 1000}
		q, _ := New(2, c.produce)
		q.Start(context.Background())
		for q.Len() < 2 {
			time.Sleep(time.Millisecond)
		}
		q.Close()
		// The queued values stay readable, then the stop is reported.
		for i := range 2 {
			if v, err := q.Next(context.Background()); err != nil || v.Step != i {
				t.Fatalf("value %d: %+v, %v", i, v, err)
			}
		}
		if _, err := q.Next(context.Background()); !errors.Is(err, context.Canceled) {
			t.Fatalf("after Close: %v, want the producer's stop (context.Canceled)", err)
		}
	})
	t.Run("the start context ends inside the producer", func(t *testing.T) {
		leakcheck.Check(t)
		c := &counter{n: 1000, called: make(chan int)}
		q, _ := New(1, c.produce)
		ctx, cancel := context.WithCancel(context.Background())
		q.Start(ctx)
		<-c.called
		<-c.called // the producer now holds a value and waits to queue it
		cancel()
		q.Close()
		if _, err := q.Next(context.Background()); err != nil {
			t.Fatalf("the value queued before the stop: %v", err)
		}
		if _, err := q.Next(context.Background()); !errors.Is(err, context.Canceled) {
			t.Fatalf("after the stop: %v, want context.Canceled", err)
		}
	})
	t.Run("Next ends with its context", func(t *testing.T) {
		leakcheck.Check(t)
		block := func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, ctx.Err() }
		q, _ := New(1, block)
		q.Start(context.Background())
		defer q.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		if _, err := q.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Next = %v, want context.DeadlineExceeded", err)
		}
	})
}

func TestQueueMisuse(t *testing.T) {
	if _, err := New(-1, (&counter{}).produce); errkind.Of(err) != errkind.Value {
		t.Errorf("negative capacity: %v, want a Value error", err)
	}
	if _, err := New[int](1, nil); errkind.Of(err) != errkind.Value {
		t.Errorf("no producer: %v, want a Value error", err)
	}
	q, _ := New(1, (&counter{n: 1}).produce)
	if _, err := q.Next(context.Background()); !errors.Is(err, ErrNotStarted) {
		t.Errorf("Next before Start: %v, want ErrNotStarted", err)
	}
	leakcheck.Check(t)
	q.Start(context.Background())
	defer q.Close()
	if err := q.Run(context.Background()); errkind.Of(err) != errkind.Runtime {
		t.Errorf("Run after Start: %v, want a Runtime error", err)
	}
}

// The queue's hook runs the producer on the loop's Coordinator: the steps read the prefetched
// values until the input ends, and a failing producer fails the loop.
func TestQueueHook(t *testing.T) {
	boom := errors.New("bad record")
	tests := []struct {
		name     string
		capacity int
		fail     error
	}{
		{"prefetching", 2, nil},
		{"pass-through", 0, nil},
		{"failing producer", 2, boom},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			c := &counter{n: 7, fail: tc.fail}
			q, _ := New(tc.capacity, c.produce)
			var steps []int
			err := runhook.Run(context.Background(), []runhook.Hook{q.Hook()}, func(ctx context.Context, rc *runhook.RunContext) error {
				v, err := q.Next(ctx)
				if err == io.EOF {
					rc.RequestStop()
					return nil
				}
				if err != nil {
					return err
				}
				steps = append(steps, v.Step)
				return nil
			})
			if tc.fail != nil {
				if !errors.Is(err, boom) {
					t.Fatalf("Run = %v, want the producer's error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(steps, []int{0, 1, 2, 3, 4, 5, 6}) {
				t.Fatalf("steps read %v", steps)
			}
		})
	}
}
