package barrier_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/hooks/barrier"
	"github.com/monolith-go/monolith/pkg/hooks/controller"
	"github.com/monolith-go/monolith/pkg/hooks/pscheck"
	"github.com/monolith-go/monolith/pkg/hooks/runhook"
	"github.com/monolith-go/monolith/pkg/ps"
)

// A Remote barrier serves where the in-process one does: the controller's service and the PS
// health check place it.
var (
	_ controller.Barrier = (*barrier.Remote)(nil)
	_ pscheck.Placer     = (*barrier.Remote)(nil)
)

// startPS serves a parameter server on loopback until the test ends.
func startPS(t *testing.T) *ps.Running {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r, err := ps.Start(lis, ps.Config{NumPS: 1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r.Stop(ctx)
	})
	return r
}

// remote returns a Remote barrier reached through a connection of its own (another process's,
// as far as the server can tell).
func remote(t *testing.T, addr string, capacity int, cbs ...barrier.Callback) *barrier.Remote {
	t.Helper()
	c, err := ps.Dial(addr, ps.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	b, err := barrier.NewRemote(barrier.RemoteConfig{Client: c.RPC(), Name: "train", Capacity: capacity, Callbacks: cbs, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestNewRemoteErrors(t *testing.T) {
	c, err := ps.Dial("127.0.0.1:1", ps.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tests := []struct {
		name string
		cfg  barrier.RemoteConfig
		want string
	}{
		{name: "no client", cfg: barrier.RemoteConfig{Name: "b", Capacity: 1}, want: "a client is required"},
		{name: "no name", cfg: barrier.RemoteConfig{Client: c.RPC(), Capacity: 1}, want: "a name is required"},
		{name: "no capacity", cfg: barrier.RemoteConfig{Client: c.RPC(), Name: "b"}, want: "capacity 0 must be at least 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := barrier.NewRemote(tc.cfg); errkind.Of(err) != errkind.Value || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewRemote = %v, want a Value error with %q", err, tc.want)
			}
		})
	}
}

// TestRemoteAcrossClients: the chief's and a worker's Remote barriers, on connections of their
// own, share the barrier the server holds; the worker's hook blocks after its step until the chief
// removes the barrier, and the callbacks run in the process that placed or reached it.
func TestRemoteAcrossClients(t *testing.T) {
	leakcheck.Check(t)
	srv := startPS(t)
	ctx := context.Background()
	var chiefActions, workerActions []string
	var mu sync.Mutex
	record := func(to *[]string) barrier.Callback {
		return func(_ context.Context, action string) error {
			mu.Lock()
			defer mu.Unlock()
			*to = append(*to, action)
			return nil
		}
	}
	chief := remote(t, srv.Addr(), 2, record(&chiefActions))
	worker := remote(t, srv.Addr(), 2, record(&workerActions))

	if err := chief.Place(ctx, "save"); err != nil {
		t.Fatal(err)
	}
	if err := chief.Place(ctx, "save"); !errors.Is(err, barrier.ErrAlreadyPlaced) {
		t.Fatalf("second Place = %v, want ErrAlreadyPlaced", err)
	}
	if st, err := worker.Status(ctx); err != nil || !st.Placed || st.Action != "save" || st.Capacity != 2 {
		t.Fatalf("the worker sees %+v, %v", st, err)
	}
	var steps atomic.Int64
	done := make(chan error, 1)
	go func() {
		done <- runhook.Run(ctx, []runhook.Hook{barrier.NewHook(1, worker)}, func(_ context.Context, rc *runhook.RunContext) error {
			if steps.Add(1) == 3 {
				rc.RequestStop()
			}
			return nil
		})
	}()
	for deadline := time.Now().Add(10 * time.Second); !reflect.DeepEqual(chief.BlockedIndices(), []int{0, 1}); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the worker never shows as blocked: %v", chief.BlockedIndices())
		}
	}
	time.Sleep(100 * time.Millisecond) // two poll intervals: the worker keeps waiting
	if steps.Load() != 1 {
		t.Fatalf("steps while the barrier is placed = %d, want 1", steps.Load())
	}
	if !chief.IsPlaced() || !reflect.DeepEqual(chief.UnblockedIndices(), []int{}) {
		t.Fatalf("placed %v, unblocked %v", chief.IsPlaced(), chief.UnblockedIndices())
	}
	chief.Remove()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if steps.Load() != 3 {
		t.Errorf("steps = %d, want 3", steps.Load())
	}
	if got := chief.BlockedIndices(); len(got) != 0 {
		t.Errorf("blocked after the run: %v", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if !reflect.DeepEqual(chiefActions, []string{"save"}) || !reflect.DeepEqual(workerActions, []string{"save"}) {
		t.Errorf("callbacks: chief %v, worker %v; want [save] each", chiefActions, workerActions)
	}
}

func TestRemoteErrors(t *testing.T) {
	leakcheck.Check(t)
	srv := startPS(t)
	ctx := context.Background()
	b := remote(t, srv.Addr(), 3)
	for _, i := range []int{0, 3} {
		if err := b.WaitUntilRemoved(ctx, i); errkind.Of(err) != errkind.Value {
			t.Errorf("WaitUntilRemoved(%d) = %v, want a Value error", i, err)
		}
	}
	// Not placed: returns at once.
	if err := b.WaitUntilRemoved(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// Another capacity for the same name is refused by the server.
	other := remote(t, srv.Addr(), 4)
	if _, err := other.Status(ctx); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "capacity 3, the request says 4") {
		t.Fatalf("Status with another capacity = %v", err)
	}
	// A waiting worker stops with its context.
	if err := b.Place(ctx, ""); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := b.WaitUntilRemoved(cctx, 2); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitUntilRemoved past its deadline = %v", err)
	}
}

// TestRemoteServerGone: a barrier whose server is gone fails with the server's error, within the
// call timeout; the calls without a context read as not placed.
func TestRemoteServerGone(t *testing.T) {
	leakcheck.Check(t)
	srv := startPS(t)
	b := remote(t, srv.Addr(), 2)
	srv.Kill()
	start := time.Now()
	if _, err := b.Status(context.Background()); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), `barrier "train": STATUS`) {
		t.Fatalf("Status = %v, want Unavailable", err)
	}
	if b.IsPlaced() {
		t.Fatal("IsPlaced with the server gone")
	}
	if took := time.Since(start); took > barrier.DefaultCallTimeout {
		t.Fatalf("took %v", took)
	}
}
