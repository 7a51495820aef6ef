package prefetch

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/hooks/runhook"
)

// trace records what happens, in order, across the loop and the async function's goroutine.
type trace struct {
	mu     sync.Mutex
	events []string
}

func (tr *trace) add(format string, args ...any) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.events = append(tr.events, fmt.Sprintf(format, args...))
}

func (tr *trace) get() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]string(nil), tr.events...)
}

// stepHook records the step boundaries (it is driven after the async hooks).
type stepHook struct {
	runhook.Base
	tr *trace
}

func (h stepHook) AfterRun(_ context.Context, rc *runhook.RunContext) error {
	h.tr.add("after step %d", rc.Step)
	return nil
}

func (h stepHook) End(context.Context, *runhook.Session, error) error {
	h.tr.add("end")
	return nil
}

// TestAsyncFunction runs a loop whose step k queues the arguments k, except step 2: as the
// reference's AsyncPushHook, nothing runs until arguments were first queued, then each step runs
// one queued argument during the step (the previous step's while the queue holds it).
func TestAsyncFunction(t *testing.T) {
	leakcheck.Check(t)
	tr := &trace{}
	m := NewAsyncFunctionMgr(true)
	push := AddAsyncFunction(m, func(_ context.Context, args [2]int) error {
		tr.add("push %v", args)
		return nil
	}, DefaultMode)
	hooks := append(m.Hooks(), stepHook{tr: tr})
	err := runhook.Run(context.Background(), hooks, func(ctx context.Context, rc *runhook.RunContext) error {
		tr.add("step %d", rc.Step)
		if rc.Step != 2 {
			if err := push(ctx, [2]int{int(rc.Step), -int(rc.Step)}); err != nil {
				return err
			}
		}
		if rc.Step == 4 {
			rc.RequestStop()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The push of step k-1's arguments runs during step k: after "step k-1" ended and before
	// "after step k". Within a step, whether the push or the step's own work is recorded first is
	// up to the scheduler, so each step's events are compared as a set.
	got := tr.get()
	want := [][]string{
		{"step 0"}, {"after step 0"},
		{"step 1", "push [0 0]"}, {"after step 1"},
		{"step 2", "push [1 -1]"}, {"after step 2"},
		// Step 2 queued nothing, so step 3's run waits for the arguments step 3 queues and runs
		// them in the same step (the reference's dequeue blocks on the same run's enqueue); from
		// then on each step runs its own arguments, and nothing is left to drain.
		{"step 3", "push [3 -3]"}, {"after step 3"},
		{"step 4", "push [4 -4]"}, {"after step 4"},
		{"end"},
	}
	if err := sameSteps(got, want); err != nil {
		t.Fatalf("%v\nevents: %q", err, got)
	}
}

// sameSteps compares events with groups of events whose order within a group does not matter.
func sameSteps(got []string, want [][]string) error {
	i := 0
	for _, group := range want {
		if i+len(group) > len(got) {
			return fmt.Errorf("events end before %q", group)
		}
		seen := map[string]int{}
		for _, e := range got[i : i+len(group)] {
			seen[e]++
		}
		for _, e := range group {
			if seen[e]--; seen[e] < 0 {
				return fmt.Errorf("events %q at %d, want %q", got[i:i+len(group)], i, group)
			}
		}
		i += len(group)
	}
	if i != len(got) {
		return fmt.Errorf("extra events %q", got[i:])
	}
	return nil
}

// The queued function runs while the step runs: a step that waits for it completes.
func TestAsyncFunctionOverlapsTheStep(t *testing.T) {
	leakcheck.Check(t)
	m := NewAsyncFunctionMgr(true)
	ran := make(chan int, 10)
	push := AddAsyncFunction(m, func(_ context.Context, step int) error {
		ran <- step
		return nil
	}, Async)
	err := runhook.Run(context.Background(), m.Hooks(), func(ctx context.Context, rc *runhook.RunContext) error {
		if rc.Step == 1 {
			// Would block forever if the push of step 0's arguments did not run during this step.
			if got := <-ran; got != 0 {
				return fmt.Errorf("push ran with %d, want 0", got)
			}
			rc.RequestStop()
		}
		return push(ctx, int(rc.Step))
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := <-ran; got != 1 {
		t.Fatalf("drained %d, want 1", got)
	}
}

func TestSyncFunction(t *testing.T) {
	for _, tc := range []struct {
		name  string
		async bool
		mode  Mode
	}{
		{"manager default sync", false, DefaultMode},
		{"explicitly sync", true, Sync},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewAsyncFunctionMgr(tc.async)
			var got []int
			f := AddAsyncFunction(m, func(_ context.Context, v int) error { got = append(got, v); return nil }, tc.mode)
			if err := f(context.Background(), 7); err != nil || !reflect.DeepEqual(got, []int{7}) {
				t.Fatalf("sync call: %v, ran %v", err, got)
			}
			if len(m.Hooks()) != 0 {
				t.Fatalf("a sync function added %d hooks", len(m.Hooks()))
			}
		})
	}
	m := NewAsyncFunctionMgr(false)
	AddAsyncFunction(m, func(context.Context, int) error { return nil }, Async)
	if len(m.Hooks()) != 1 {
		t.Fatalf("Async on a sync manager added %d hooks, want 1", len(m.Hooks()))
	}
}

func TestAsyncFunctionErrors(t *testing.T) {
	boom := errors.New("push failed")
	t.Run("the target's error fails the step", func(t *testing.T) {
		leakcheck.Check(t)
		m := NewAsyncFunctionMgr(true)
		push := AddAsyncFunction(m, func(_ context.Context, v int) error {
			if v == 2 {
				return boom
			}
			return nil
		}, DefaultMode)
		steps := 0
		err := runhook.Run(context.Background(), m.Hooks(), func(ctx context.Context, rc *runhook.RunContext) error {
			steps++
			return push(ctx, int(rc.Step))
		})
		// Step 3 runs the push of step 2's arguments.
		if !errors.Is(err, boom) || steps != 4 {
			t.Fatalf("Run = %v after %d steps, want the push's error in step 3", err, steps)
		}
	})
	t.Run("no draining after a failed loop, and no queuing after the end", func(t *testing.T) {
		leakcheck.Check(t)
		m := NewAsyncFunctionMgr(true)
		var ran []int
		push := AddAsyncFunction(m, func(_ context.Context, v int) error { ran = append(ran, v); return nil }, DefaultMode)
		err := runhook.Run(context.Background(), m.Hooks(), func(ctx context.Context, rc *runhook.RunContext) error {
			if err := push(ctx, int(rc.Step)); err != nil {
				return err
			}
			if rc.Step == 1 {
				return boom
			}
			return nil
		})
		if !errors.Is(err, boom) {
			t.Fatalf("Run = %v, want the step's error", err)
		}
		// Step 1 ran step 0's arguments and failed; its own were not run at End.
		if !reflect.DeepEqual(ran, []int{0}) {
			t.Fatalf("ran %v, want [0]", ran)
		}
		if err := push(context.Background(), 9); !errors.Is(err, ErrEnded) {
			t.Fatalf("push after the end: %v, want ErrEnded", err)
		}
	})
	t.Run("queuing gives up with its context", func(t *testing.T) {
		m := NewAsyncFunctionMgr(true)
		push := AddAsyncFunction(m, func(context.Context, int) error { return nil }, DefaultMode)
		if err := push(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		// The queue (capacity 1) is full and no loop runs it.
		if err := push(ctx, 2); !errors.Is(err, context.Canceled) {
			t.Fatalf("push on a full queue: %v, want context.Canceled", err)
		}
	})
}
