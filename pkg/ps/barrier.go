package ps

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pspb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/ps"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/hooks/barrier"
)

// barriers are the barriers a server holds, by name: rendezvous (ARRIVE) and the chief's
// barriers (barrier.Barrier, for PLACE, REMOVE, WAIT, STATUS). A name is one or the other.
type barriers struct {
	mu   sync.Mutex
	rdv  map[string]*rendezvous
	bars map[string]*barrier.Barrier
}

func newBarriers() *barriers {
	return &barriers{rdv: map[string]*rendezvous{}, bars: map[string]*barrier.Barrier{}}
}

// rendezvous releases its workers together once count of them have arrived, then starts its
// next round.
type rendezvous struct {
	count int
	round int64 // rounds released so far
	// arrived counts the waiting calls of each worker of the current round (a worker's retry
	// may overlap its call that is timing out).
	arrived  map[int32]int
	released chan struct{} // closed when the current round is released
}

// Barrier serves the Barrier RPC.
func (s *Server) Barrier(ctx context.Context, req *pspb.BarrierRequest) (*pspb.BarrierResponse, error) {
	if err := ctxError(ctx); err != nil {
		return nil, err
	}
	if _, ok := pspb.BarrierRequest_Op_name[int32(req.GetOp())]; !ok {
		return nil, status.Errorf(codes.InvalidArgument, "ps %d: barrier %q: unknown op %d (valid: %s)", s.cfg.Index, req.GetName(), req.GetOp(), barrierOps)
	}
	if req.GetName() == "" {
		return nil, status.Errorf(codes.InvalidArgument, "ps %d: barrier: no name", s.cfg.Index)
	}
	if req.GetCount() < 1 || req.GetCount() > MaxWorkers {
		return nil, status.Errorf(codes.InvalidArgument, "ps %d: barrier %q: count %d, want 1 to %d (MaxWorkers)", s.cfg.Index, req.GetName(), req.GetCount(), MaxWorkers)
	}
	ctx, done := s.untilStop(ctx)
	defer done()
	if req.GetWaitMs() < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "ps %d: barrier %q: wait_ms %d", s.cfg.Index, req.GetName(), req.GetWaitMs())
	}
	if req.GetOp() == pspb.BarrierRequest_ARRIVE {
		return s.arrive(ctx, req)
	}
	b, err := s.bars.barrier(req.GetName(), int(req.GetCount()))
	if err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "ps %d: %v", s.cfg.Index, err)
	}
	switch req.GetOp() {
	case pspb.BarrierRequest_PLACE:
		if err := b.Place(ctx, req.GetAction()); err != nil {
			if errors.Is(err, barrier.ErrAlreadyPlaced) {
				return nil, status.Errorf(codes.AlreadyExists, "ps %d: barrier %q is placed already", s.cfg.Index, req.GetName())
			}
			return nil, s.rpcError("place barrier "+req.GetName(), err)
		}
	case pspb.BarrierRequest_REMOVE:
		b.Remove()
	case pspb.BarrierRequest_WAIT:
		wctx, cancel := waitContext(ctx, req.GetWaitMs())
		err := b.WaitUntilRemoved(wctx, int(req.GetWorker()))
		cancel()
		// A wait cut short by wait_ms is answered (the barrier is still placed); one cut short by
		// the call's own end is the call's error.
		if err != nil && (ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded)) {
			if ctx.Err() != nil {
				return nil, s.ctxStatus(ctx, "wait at barrier "+req.GetName())
			}
			return nil, s.rpcError("wait at barrier "+req.GetName(), err)
		}
	case pspb.BarrierRequest_STATUS:
	default:
		return nil, status.Errorf(codes.InvalidArgument, "ps %d: barrier %q: unknown op %d", s.cfg.Index, req.GetName(), req.GetOp())
	}
	st, _ := b.Status(ctx)
	resp := &pspb.BarrierResponse{Placed: st.Placed, Action: st.Action, Capacity: int32(st.Capacity)}
	for _, i := range st.Blocked {
		resp.Blocked = append(resp.Blocked, int32(i))
	}
	return resp, nil
}

// barrierOps lists the valid barrier ops, for the message of an unknown one.
var barrierOps = func() string {
	var b strings.Builder
	for i := range int32(len(pspb.BarrierRequest_Op_name)) {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%d", pspb.BarrierRequest_Op_name[i], i)
	}
	return b.String()
}()

// waitContext is how long a call waits: ctx, ending after waitMs milliseconds when that is
// positive, and ending a little before ctx's deadline, so that the server has answered (and
// withdrawn an arrival) by the time the caller's deadline makes it give up.
func waitContext(ctx context.Context, waitMs int64) (context.Context, context.CancelFunc) {
	wait := time.Duration(-1)
	if waitMs > 0 && waitMs <= math.MaxInt64/int64(time.Millisecond) {
		// (Longer is for ever: the call's deadline decides.)
		wait = time.Duration(waitMs) * time.Millisecond
	}
	if d, ok := ctx.Deadline(); ok {
		left := time.Until(d)
		early := max(0, left-min(left/4, maxEarly))
		if wait < 0 || early < wait {
			wait = early
		}
	}
	if wait < 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, wait)
}

// maxEarly is the most a wait ends before its call's deadline.
const maxEarly = 100 * time.Millisecond

// barrier returns the chief's barrier name, created with capacity on first use.
func (bs *barriers) barrier(name string, capacity int) (*barrier.Barrier, error) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if _, ok := bs.rdv[name]; ok {
		return nil, errkind.New(errkind.Precondition, "barrier %q is a rendezvous (ARRIVE), not a placed barrier", name)
	}
	if b, ok := bs.bars[name]; ok {
		if b.Capacity() != capacity {
			return nil, errkind.New(errkind.Precondition, "barrier %q has capacity %d, the request says %d", name, b.Capacity(), capacity)
		}
		return b, nil
	}
	b, err := barrier.New(capacity)
	if err != nil {
		return nil, err
	}
	bs.bars[name] = b
	return b, nil
}

// arrive serves ARRIVE: the worker waits until count workers have arrived, or until wait_ms or
// the call ends, when its arrival is withdrawn.
func (s *Server) arrive(ctx context.Context, req *pspb.BarrierRequest) (*pspb.BarrierResponse, error) {
	name, worker, count := req.GetName(), req.GetWorker(), int(req.GetCount())
	if worker < 0 || int(worker) >= count {
		return nil, status.Errorf(codes.InvalidArgument, "ps %d: barrier %q: worker %d, want 0..%d", s.cfg.Index, name, worker, count-1)
	}
	bs := s.bars
	bs.mu.Lock()
	if _, ok := bs.bars[name]; ok {
		bs.mu.Unlock()
		return nil, status.Errorf(codes.FailedPrecondition, "ps %d: barrier %q is a placed barrier, not a rendezvous (ARRIVE)", s.cfg.Index, name)
	}
	r, ok := bs.rdv[name]
	if !ok {
		r = &rendezvous{count: count, arrived: map[int32]int{}, released: make(chan struct{})}
		bs.rdv[name] = r
	}
	if r.count != count {
		bs.mu.Unlock()
		return nil, status.Errorf(codes.FailedPrecondition, "ps %d: barrier %q has %d workers, the request says %d", s.cfg.Index, name, r.count, count)
	}
	r.arrived[worker]++
	if len(r.arrived) == r.count {
		r.round++
		round := r.round
		close(r.released)
		r.arrived = map[int32]int{}
		r.released = make(chan struct{})
		bs.mu.Unlock()
		return &pspb.BarrierResponse{Released: true, Round: round}, nil
	}
	released, round := r.released, r.round+1
	bs.mu.Unlock()

	wctx, cancel := waitContext(ctx, req.GetWaitMs())
	defer cancel()
	select {
	case <-released:
		return &pspb.BarrierResponse{Released: true, Round: round}, nil
	case <-wctx.Done():
	}
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if r.round >= round {
		// Released while this call was giving up.
		return &pspb.BarrierResponse{Released: true, Round: round}, nil
	}
	if r.arrived[worker]--; r.arrived[worker] <= 0 {
		delete(r.arrived, worker)
	}
	if ctx.Err() != nil {
		return nil, s.ctxStatus(ctx, "arrive at barrier "+name)
	}
	return &pspb.BarrierResponse{Released: false}, nil
}
