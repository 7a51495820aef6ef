package ps

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pspb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/ps"
	"github.com/monolith-go/monolith/internal/leakcheck"
)

// TestRendezvous: two workers on connections of their own meet at a barrier, round after round;
// a worker that gives up is withdrawn, so it releases nobody later.
func TestRendezvous(t *testing.T) {
	leakcheck.Check(t)
	srv := startServers(t, 1, Config{})[0]
	w0 := dial(t, srv.Addr(), ClientConfig{})
	w1 := dial(t, srv.Addr(), ClientConfig{})
	ctx := context.Background()

	for round := int64(1); round <= 3; round++ {
		var wg sync.WaitGroup
		rounds := make([]int64, 2)
		errs := make([]error, 2)
		for i, c := range []*Client{w0, w1} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if i == 1 {
					time.Sleep(20 * time.Millisecond) // worker 1 comes late: worker 0 waits for it
				}
				rounds[i], errs[i] = c.Arrive(ctx, "start", i, 2)
			}()
		}
		wg.Wait()
		if errs[0] != nil || errs[1] != nil || rounds[0] != round || rounds[1] != round {
			t.Fatalf("round %d: rounds %v, errors %v", round, rounds, errs)
		}
	}

	// Worker 0 alone gives up; then worker 1 alone must not be released by its stale arrival.
	for i, c := range []*Client{w0, w1} {
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		_, err := c.Arrive(cctx, "start", i, 2)
		cancel()
		if status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), `barrier "start": worker `) {
			t.Fatalf("worker %d alone: %v, want DeadlineExceeded", i, err)
		}
	}

	// A server-side wait shorter than the call: the answer says not released, and the arrival is
	// withdrawn.
	resp, err := w0.RPC().Barrier(ctx, &pspb.BarrierRequest{Op: pspb.BarrierRequest_ARRIVE, Name: "start", Worker: 0, Count: 2, WaitMs: 10})
	if err != nil || resp.GetReleased() {
		t.Fatalf("short wait: %v, %v; want not released", resp, err)
	}
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = w1.Arrive(cctx, "start", 1, 2)
	cancel()
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("worker 1 after worker 0's withdrawn arrival: %v, want DeadlineExceeded", err)
	}

	// The name's worker count is fixed by its first use; a chief's barrier is another kind.
	if _, err := w0.Arrive(ctx, "start", 0, 3); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), `barrier "start" has 2 workers, the request says 3`) {
		t.Fatalf("another count: %v", err)
	}
	if _, err := w0.RPC().Barrier(ctx, &pspb.BarrierRequest{Op: pspb.BarrierRequest_PLACE, Name: "start", Count: 2}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("PLACE on a rendezvous: %v", err)
	}
}

// TestChiefBarrier drives the barrier_ops barrier through the RPC from two connections: the
// chief places it, a worker waits at it until the chief removes it.
func TestChiefBarrier(t *testing.T) {
	leakcheck.Check(t)
	srv := startServers(t, 1, Config{})[0]
	chief := dial(t, srv.Addr(), ClientConfig{}).RPC()
	worker := dial(t, srv.Addr(), ClientConfig{}).RPC()
	ctx := context.Background()
	req := func(op pspb.BarrierRequest_Op, w int32, wait int64) *pspb.BarrierRequest {
		return &pspb.BarrierRequest{Op: op, Name: "train", Worker: w, Count: 3, Action: "stop", WaitMs: wait}
	}
	resp, err := chief.Barrier(ctx, req(pspb.BarrierRequest_PLACE, 0, 0))
	if err != nil || !resp.GetPlaced() || resp.GetAction() != "stop" || resp.GetCapacity() != 3 {
		t.Fatalf("PLACE = %v, %v", resp, err)
	}
	if _, err := chief.Barrier(ctx, req(pspb.BarrierRequest_PLACE, 0, 0)); status.Code(err) != codes.AlreadyExists {
		t.Fatalf("second PLACE = %v, want AlreadyExists", err)
	}
	// A WAIT held for its wait_ms answers that the barrier is still placed.
	resp, err = worker.Barrier(ctx, req(pspb.BarrierRequest_WAIT, 2, 20))
	if err != nil || !resp.GetPlaced() {
		t.Fatalf("WAIT timing out = %v, %v; want placed", resp, err)
	}
	done := make(chan *pspb.BarrierResponse, 1)
	go func() {
		r, err := worker.Barrier(ctx, req(pspb.BarrierRequest_WAIT, 2, 0))
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := chief.Barrier(ctx, req(pspb.BarrierRequest_STATUS, 0, 0))
		if err != nil {
			t.Fatal(err)
		}
		if len(st.GetBlocked()) == 2 && st.GetBlocked()[1] == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker 2 never shows as blocked: %v", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case <-done:
		t.Fatal("the worker went on while the barrier is placed")
	case <-time.After(50 * time.Millisecond):
	}
	if _, err := chief.Barrier(ctx, req(pspb.BarrierRequest_REMOVE, 0, 0)); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.GetPlaced() {
		t.Fatalf("WAIT returned %v after the removal", r)
	}
	st, err := chief.Barrier(ctx, req(pspb.BarrierRequest_STATUS, 0, 0))
	if err != nil || st.GetPlaced() || len(st.GetBlocked()) != 0 {
		t.Fatalf("STATUS after removal = %v, %v", st, err)
	}
	if _, err := chief.Barrier(ctx, &pspb.BarrierRequest{Op: pspb.BarrierRequest_STATUS, Name: "train", Count: 4}); status.Code(err) != codes.FailedPrecondition ||
		!strings.Contains(err.Error(), `barrier "train" has capacity 3, the request says 4`) {
		t.Fatalf("another capacity: %v", err)
	}
	// A WAIT is answered (still placed) shortly before its call's deadline, and the worker's
	// slot is cleared.
	if _, err := chief.Barrier(ctx, req(pspb.BarrierRequest_PLACE, 0, 0)); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	resp, err = worker.Barrier(cctx, req(pspb.BarrierRequest_WAIT, 1, 0))
	cancel()
	if err != nil || !resp.GetPlaced() {
		t.Fatalf("WAIT near its deadline = %v, %v; want an answer that it is placed", resp, err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		st, err := chief.Barrier(ctx, req(pspb.BarrierRequest_STATUS, 0, 0))
		if err != nil {
			t.Fatal(err)
		}
		if len(st.GetBlocked()) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker 1's slot still set after its call ended: %v", st)
		}
	}
}
