package ps

import (
	"context"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pspb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/ps"
	"github.com/monolith-go/monolith/internal/leakcheck"
)

// reduceAll has worker i of len(values) bring values[i] to round step, the workers starting in
// order (each next one once the previous is waiting at the server), and returns their answers.
func reduceAll(t *testing.T, srv *Running, clients []*Client, name string, step int64, order []int, values [][]float64) [][]float64 {
	t.Helper()
	out := make([][]float64, len(values))
	errs := make([]error, len(values))
	var wg sync.WaitGroup
	for k, i := range order {
		if k > 0 {
			waitForArrivals(t, srv, name, k)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			out[i], errs[i] = clients[i].AllReduce(ctx, name, step, i, len(values), values[i])
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("worker %d: %v", i, err)
		}
	}
	return out
}

// waitForArrivals waits until n workers' values are in name's current round.
func waitForArrivals(t *testing.T, srv *Running, name string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rs := srv.Server.reds
		rs.mu.Lock()
		got := 0
		if red := rs.byName[name]; red != nil && red.cur != nil {
			got = len(red.cur.values)
		}
		rs.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("allreduce %q: %d workers arrived after 10 s, want %d", name, got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// The workers get the mean of their values, summed in worker order whatever the order they
// arrive in (values whose float sum depends on the order show it), the same bits for every
// worker, round after round.
func TestAllReduceMean(t *testing.T) {
	leakcheck.Check(t)
	srv := startServers(t, 1, Config{})[0]
	clients := make([]*Client, 3)
	for i := range clients {
		clients[i] = dial(t, srv.Addr(), ClientConfig{})
	}
	values := [][]float64{{1, 3, -0.5}, {1e16, 1.5, 0.25}, {-1e16, -2, 7}}
	// Worker order: ((1 + 1e16) + -1e16) / 3 = 0, where ((-1e16 + 1e16) + 1) / 3 would be 1/3.
	want := make([]float64, 3)
	for j := range want {
		want[j] = (values[0][j] + values[1][j] + values[2][j]) / 3
	}
	if want[0] != 0 {
		t.Fatalf("test values: worker-order sum %v, want 0", want[0])
	}
	tests := []struct {
		name  string
		order []int
	}{
		{"in order", []int{0, 1, 2}},
		{"reversed", []int{2, 1, 0}},
		{"last is first", []int{1, 2, 0}},
	}
	for step, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := reduceAll(t, srv, clients, "grads", int64(step+1), tc.order, values)
			for i, g := range got {
				for j := range want {
					if math.Float64bits(g[j]) != math.Float64bits(want[j]) {
						t.Errorf("worker %d: %v, want %v", i, g, want)
						break
					}
				}
			}
		})
	}
}

// A worker whose answer was lost asks again and gets the same mean; once answered, the same step
// again is a new round (a job that restarted from a checkpoint).
func TestAllReduceRetry(t *testing.T) {
	leakcheck.Check(t)
	srv := startServers(t, 1, Config{})[0]
	rpc := dial(t, srv.Addr(), ClientConfig{}).RPC()
	ctx := context.Background()
	call := func(worker int32, v float64, waitMs int64) *pspb.AllReduceResponse {
		t.Helper()
		resp, err := rpc.AllReduce(ctx, &pspb.AllReduceRequest{Name: "g", Step: 5, Worker: worker, Count: 2,
			Values: float64Bytes([]float64{v}), WaitMs: waitMs})
		if err != nil {
			t.Fatalf("worker %d: %v", worker, err)
		}
		return resp
	}
	if resp := call(0, 1, 1); resp.GetReleased() || len(resp.GetMissing()) != 1 || resp.GetMissing()[0] != 1 {
		t.Fatalf("worker 0 alone: %v, want not released, worker 1 missing", resp)
	}
	// Worker 0's values stayed: worker 1 releases the round.
	if resp := call(1, 3, 0); !resp.GetReleased() {
		t.Fatalf("worker 1: %v, want released", resp)
	}
	for _, tc := range []struct {
		what     string
		released bool
	}{{"the retry", true}, {"the same step once answered", false}} {
		resp := call(0, 1, 1)
		if resp.GetReleased() != tc.released {
			t.Fatalf("%s: %v, want released %v", tc.what, resp, tc.released)
		}
		if tc.released {
			if got, _ := decodeFloat64s(resp.GetValues()); len(got) != 1 || got[0] != 2 {
				t.Fatalf("%s: mean %v, want [2]", tc.what, got)
			}
		}
	}
}

// A worker that does not come makes the others fail at their deadline, naming it; the one that
// gave up aborts the round, so that the late worker learns why instead of waiting in turn. An
// abort fails the workers waiting at the round at once, with its reason.
func TestAllReduceMissingAndAbort(t *testing.T) {
	leakcheck.Check(t)
	srv := startServers(t, 1, Config{})[0]
	w0 := dial(t, srv.Addr(), ClientConfig{})
	w1 := dial(t, srv.Addr(), ClientConfig{})
	ctx := context.Background()

	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err := w0.AllReduce(cctx, "g", 1, 0, 2, []float64{1})
	cancel()
	if status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "workers [1] did not arrive") ||
		!strings.Contains(err.Error(), `allreduce "g" step 1: worker 0 of 2`) {
		t.Fatalf("worker 0 alone: %v, want DeadlineExceeded naming worker 1", err)
	}
	_, err = w1.AllReduce(ctx, "g", 1, 1, 2, []float64{1})
	if status.Code(err) != codes.Aborted || !strings.Contains(err.Error(), "aborted by worker 0") || !strings.Contains(err.Error(), "did not arrive") {
		t.Fatalf("worker 1 late: %v, want Aborted by worker 0", err)
	}

	// Worker 0 waits at step 2; worker 1 fails and aborts it.
	done := make(chan error, 1)
	go func() {
		_, err := w0.AllReduce(ctx, "g", 2, 0, 2, []float64{1})
		done <- err
	}()
	waitForArrivals(t, srv, "g", 1)
	if err := w1.AbortAllReduce(ctx, "g", 2, 1, 2, "ps 1 (127.0.0.1:1): lookup: connection refused"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if status.Code(err) != codes.Aborted || !strings.Contains(err.Error(), "aborted by worker 1: ps 1 (127.0.0.1:1): lookup: connection refused") {
			t.Fatalf("worker 0 at an aborted round: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("worker 0 still waits 10 s after the abort")
	}

	// The next step is a round like any other.
	got := reduceAll(t, srv, []*Client{w0, w1}, "g", 3, []int{0, 1}, [][]float64{{2}, {4}})
	if got[0][0] != 3 || got[1][0] != 3 {
		t.Fatalf("after the abort: %v, want 3 and 3", got)
	}
}

// Bad requests are refused, naming what is wrong; a worker at another step than the round others
// wait at is FAILED_PRECONDITION.
func TestAllReduceErrors(t *testing.T) {
	leakcheck.Check(t)
	srv := startServers(t, 1, Config{})[0]
	rpc := dial(t, srv.Addr(), ClientConfig{}).RPC()
	ctx := context.Background()
	// Worker 0 waits at round 7 of "busy", with one value.
	waiting := make(chan error, 1)
	wctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		<-waiting
	}()
	go func() {
		_, err := rpc.AllReduce(wctx, &pspb.AllReduceRequest{Name: "busy", Step: 7, Worker: 0, Count: 2, Values: float64Bytes([]float64{1})})
		waiting <- err
	}()
	waitForArrivals(t, srv, "busy", 1)
	tests := []struct {
		name string
		req  *pspb.AllReduceRequest
		code codes.Code
		msg  string
	}{
		{"no name", &pspb.AllReduceRequest{Count: 1}, codes.InvalidArgument, "allreduce: no name"},
		{"no count", &pspb.AllReduceRequest{Name: "x"}, codes.InvalidArgument, "count 0"},
		{"worker out of range", &pspb.AllReduceRequest{Name: "x", Worker: 2, Count: 2}, codes.InvalidArgument, "worker 2, want 0..1"},
		{"negative wait", &pspb.AllReduceRequest{Name: "x", Count: 1, WaitMs: -1}, codes.InvalidArgument, "wait_ms -1"},
		{"partial value", &pspb.AllReduceRequest{Name: "x", Count: 1, Values: []byte{1, 2, 3}}, codes.InvalidArgument, "3 bytes of values"},
		{"another length", &pspb.AllReduceRequest{Name: "busy", Step: 7, Worker: 1, Count: 2, Values: float64Bytes([]float64{1, 2})},
			codes.InvalidArgument, "worker 1 brings 2 values, the round has 1"},
		{"another step", &pspb.AllReduceRequest{Name: "busy", Step: 8, Worker: 1, Count: 2, Values: float64Bytes([]float64{1})},
			codes.FailedPrecondition, "worker 1 of 2 is at step 8, the round in progress is step 7 of 2 workers (workers [1] have not arrived)"},
		{"another count", &pspb.AllReduceRequest{Name: "busy", Step: 7, Worker: 1, Count: 3, Values: float64Bytes([]float64{1})},
			codes.FailedPrecondition, "the round in progress is step 7 of 2 workers"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := rpc.AllReduce(ctx, tc.req)
			if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v, want %v containing %q", err, tc.code, tc.msg)
			}
		})
	}
}
