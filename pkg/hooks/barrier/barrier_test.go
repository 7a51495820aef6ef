package barrier

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/internal/syncbuf"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/hooks/runhook"
)

func mustNew(t *testing.T, capacity int, cbs ...Callback) *Barrier {
	t.Helper()
	b, err := New(capacity, cbs...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The reference's BarrierOpsTest.test_basic.
func TestBasic(t *testing.T) {
	ctx := context.Background()
	b := mustNew(t, 2)
	if err := b.Place(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if !b.IsPlaced() {
		t.Fatal("not placed after Place")
	}
	if err := b.Place(ctx, ""); !errors.Is(err, ErrAlreadyPlaced) || errkind.Of(err) != errkind.Runtime {
		t.Fatalf("second Place = %v, want ErrAlreadyPlaced", err)
	}
	b.Remove()
	if !b.IsRemoved() {
		t.Fatal("placed after Remove")
	}
	b.Remove() // removing twice is allowed
	if !b.IsRemoved() || !b.IsNoneBlocked() {
		t.Fatal("state changed by a second Remove")
	}
}

func TestNewRejectsBadCapacity(t *testing.T) {
	for _, c := range []int{0, -1} {
		if _, err := New(c); errkind.Of(err) != errkind.Value {
			t.Errorf("New(%d) = %v, want a Value error", c, err)
		}
	}
}

func TestIndices(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name          string
		capacity      int
		place         bool
		waiting       []int
		blocked, free []int
		all, none     bool
	}{
		{name: "fresh", capacity: 3, blocked: []int{}, free: []int{0, 1, 2}, none: true},
		{name: "placed", capacity: 3, place: true, blocked: []int{0}, free: []int{1, 2}},
		{name: "one waits", capacity: 3, place: true, waiting: []int{2}, blocked: []int{0, 2}, free: []int{1}},
		{name: "all wait", capacity: 3, place: true, waiting: []int{1, 2}, blocked: []int{0, 1, 2}, free: []int{}, all: true},
		{name: "chief only placed", capacity: 1, place: true, blocked: []int{0}, free: []int{}, all: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			reached := make(chan struct{}, len(tc.waiting)+1)
			b := mustNew(t, tc.capacity, func(context.Context, string) error {
				reached <- struct{}{}
				return nil
			})
			if tc.place {
				if err := b.Place(ctx, "x"); err != nil {
					t.Fatal(err)
				}
				<-reached
			}
			var wg sync.WaitGroup
			for _, i := range tc.waiting {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := b.WaitUntilRemoved(ctx, i); err != nil {
						t.Error(err)
					}
				}()
				<-reached
			}
			if got := b.BlockedIndices(); !reflect.DeepEqual(got, tc.blocked) {
				t.Errorf("BlockedIndices = %v, want %v", got, tc.blocked)
			}
			if got := b.UnblockedIndices(); !reflect.DeepEqual(got, tc.free) {
				t.Errorf("UnblockedIndices = %v, want %v", got, tc.free)
			}
			if b.IsAllBlocked() != tc.all || b.IsNoneBlocked() != tc.none {
				t.Errorf("IsAllBlocked=%v IsNoneBlocked=%v, want %v %v", b.IsAllBlocked(), b.IsNoneBlocked(), tc.all, tc.none)
			}
			b.Remove()
			wg.Wait()
			if !b.IsNoneBlocked() {
				t.Errorf("blocked after remove: %v", b.BlockedIndices())
			}
		})
	}
}

func TestWaitUntilRemovedErrors(t *testing.T) {
	ctx := context.Background()
	t.Run("bad index", func(t *testing.T) {
		b := mustNew(t, 2)
		for _, i := range []int{0, -1, 2} {
			err := b.WaitUntilRemoved(ctx, i)
			if errkind.Of(err) != errkind.Value || !strings.Contains(err.Error(), "must be non-negative and less than capacity [2]") {
				t.Errorf("WaitUntilRemoved(%d) = %v", i, err)
			}
		}
	})
	t.Run("not placed returns at once", func(t *testing.T) {
		b := mustNew(t, 2)
		if err := b.WaitUntilRemoved(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if !b.IsNoneBlocked() {
			t.Fatalf("blocked: %v", b.BlockedIndices())
		}
	})
	t.Run("context done unmarks the worker", func(t *testing.T) {
		leakcheck.Check(t)
		b := mustNew(t, 2)
		if err := b.Place(ctx, ""); err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := b.WaitUntilRemoved(cctx, 1); !errors.Is(err, context.Canceled) {
			t.Fatalf("WaitUntilRemoved = %v, want context.Canceled", err)
		}
		if got := b.BlockedIndices(); !reflect.DeepEqual(got, []int{0}) {
			t.Fatalf("BlockedIndices = %v, want [0]", got)
		}
	})
	t.Run("callback error", func(t *testing.T) {
		boom := errors.New("boom")
		b := mustNew(t, 2, func(_ context.Context, action string) error {
			if action == "bad" {
				return boom
			}
			return nil
		})
		if err := b.Place(ctx, "bad"); !errors.Is(err, boom) {
			t.Fatalf("Place = %v, want boom", err)
		}
		if !b.IsPlaced() {
			t.Fatal("a failing callback unplaced the barrier")
		}
		if err := b.WaitUntilRemoved(ctx, 1); !errors.Is(err, boom) {
			t.Fatalf("WaitUntilRemoved = %v, want boom", err)
		}
		if got := b.BlockedIndices(); !reflect.DeepEqual(got, []int{0}) {
			t.Fatalf("BlockedIndices = %v, want [0]", got)
		}
	})
}

func TestWaitLogsWhileBlocked(t *testing.T) {
	leakcheck.Check(t)
	var buf syncbuf.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	defer slog.SetDefault(old)
	oldInterval := waitLogInterval
	waitLogInterval = time.Millisecond
	defer func() { waitLogInterval = oldInterval }()

	b := mustNew(t, 2)
	if err := b.Place(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- b.WaitUntilRemoved(context.Background(), 1) }()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(buf.String(), "The worker 1 waits until barrier removed.") {
		if time.Now().After(deadline) {
			t.Fatalf("no wait log; got %q", buf.String())
		}
		time.Sleep(time.Millisecond)
	}
	b.Remove()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// counter counts steps like the reference test's assign_add(global_step, 1).
type counter struct {
	mu sync.Mutex
	n  int
}

func (c *counter) step(limit int) runhook.Step {
	return func(_ context.Context, rc *runhook.RunContext) error {
		c.mu.Lock()
		c.n++
		n := c.n
		c.mu.Unlock()
		if n >= limit {
			rc.RequestStop()
		}
		return nil
	}
}

func (c *counter) get() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// The reference's test_barrier_hook_not_blocked.
func TestHookNotBlocked(t *testing.T) {
	leakcheck.Check(t)
	b := mustNew(t, 2)
	var c counter
	if err := runhook.Run(context.Background(), []runhook.Hook{NewHook(1, b)}, c.step(5)); err != nil {
		t.Fatal(err)
	}
	if c.get() != 5 {
		t.Errorf("steps = %d, want 5", c.get())
	}
}

// The reference's test_barrier_hook_blocked: the worker stops after its first step until the
// chief removes the barrier, and the callbacks see the barrier's action.
func TestHookBlocked(t *testing.T) {
	leakcheck.Check(t)
	const action = "test_action"
	var mu sync.Mutex
	calls := 0
	workerReached := make(chan struct{})
	b := mustNew(t, 2, func(_ context.Context, a string) error {
		if a != action {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 2 { // 1: Place, 2: the worker reached the barrier
			close(workerReached)
		}
		return nil
	})
	if err := b.Place(context.Background(), action); err != nil {
		t.Fatal(err)
	}
	var c counter
	done := make(chan error)
	go func() { done <- runhook.Run(context.Background(), []runhook.Hook{NewHook(1, b)}, c.step(5)) }()
	<-workerReached
	if !b.IsAllBlocked() {
		t.Fatalf("BlockedIndices = %v, want all", b.BlockedIndices())
	}
	if c.get() != 1 {
		t.Errorf("steps while blocked = %d, want 1", c.get())
	}
	b.Remove()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !b.IsNoneBlocked() {
		t.Errorf("BlockedIndices = %v after the run, want none", b.BlockedIndices())
	}
	if c.get() != 5 {
		t.Errorf("steps = %d, want 5", c.get())
	}
}

func TestChiefHookNeverWaits(t *testing.T) {
	b := mustNew(t, 2)
	if err := b.Place(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	var c counter
	if err := runhook.Run(context.Background(), []runhook.Hook{NewHook(0, b)}, c.step(3)); err != nil {
		t.Fatal(err)
	}
	if c.get() != 3 {
		t.Errorf("steps = %d, want 3", c.get())
	}
}

// TestStatus reads the in-process barrier's state through Op's calls.
func TestStatus(t *testing.T) {
	ctx := context.Background()
	var b Op = mustNew(t, 3)
	tests := []struct {
		name string
		do   func() error
		want Status
	}{
		{name: "fresh", do: func() error { return nil }, want: Status{Blocked: []int{}, Capacity: 3}},
		{name: "placed", do: func() error { return b.Place(ctx, "stop") }, want: Status{Placed: true, Action: "stop", Blocked: []int{0}, Capacity: 3}},
		{name: "removed", do: func() error { return b.RemoveContext(ctx) }, want: Status{Action: "stop", Blocked: []int{}, Capacity: 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.do(); err != nil {
				t.Fatal(err)
			}
			got, err := b.Status(ctx)
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Status = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}
