package ps

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pspb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/ps"
)

// The AllReduce RPC: synchronous data-parallel training averages the workers' dense gradients at
// every step through one server (by convention PS 0). A round is a step: each of count workers
// brings its values, and once all have, every one gets their mean back. The mean is summed in
// worker order, so every worker gets the same bits whatever the order of arrival. A worker's
// values stay counted while it polls (unlike ARRIVE, whose arrival is withdrawn when its call
// ends): the values are the same on every retry, and a worker that went away makes the others
// fail at their deadline, the reply naming who is missing, or at once when it aborts the round.

// reductions are a server's allreduce rendezvous, by name.
type reductions struct {
	mu     sync.Mutex
	byName map[string]*reduction
}

func newReductions() *reductions { return &reductions{byName: map[string]*reduction{}} }

// reduction is one name's state: the round collecting values, the last one released (kept for
// workers whose answer was lost and who ask again) and the last one aborted (so that workers
// arriving after the abort learn of it).
type reduction struct {
	cur, done, aborted *reduceRound
}

// reduceRound is one step of a reduction.
type reduceRound struct {
	step  int64
	count int
	n     int // values per worker
	// values are each arrived worker's values.
	values map[int32][]float64
	// waiting counts the calls waiting for the release.
	waiting int
	// released is closed when the round is released (mean set) or aborted (abort set).
	released chan struct{}
	mean     []float64
	answered map[int32]bool
	abort    string
	abortBy  int32
}

func newRound(step int64, count, n int) *reduceRound {
	return &reduceRound{step: step, count: count, n: n, values: map[int32][]float64{}, released: make(chan struct{}), answered: map[int32]bool{}}
}

// missing are the workers that have not arrived, ascending.
func (r *reduceRound) missing() []int32 {
	var out []int32
	for w := int32(0); int(w) < r.count; w++ {
		if _, ok := r.values[w]; !ok {
			out = append(out, w)
		}
	}
	return out
}

// release computes the mean, worker by worker in index order.
func (r *reduceRound) release() {
	r.mean = make([]float64, r.n)
	for w := int32(0); int(w) < r.count; w++ {
		for j, v := range r.values[w] {
			r.mean[j] += v
		}
	}
	for j := range r.mean {
		r.mean[j] /= float64(r.count)
	}
	close(r.released)
}

// AllReduce serves the AllReduce RPC.
func (s *Server) AllReduce(ctx context.Context, req *pspb.AllReduceRequest) (*pspb.AllReduceResponse, error) {
	if err := ctxError(ctx); err != nil {
		return nil, err
	}
	name, step, worker, count := req.GetName(), req.GetStep(), req.GetWorker(), int(req.GetCount())
	switch {
	case name == "":
		return nil, status.Errorf(codes.InvalidArgument, "ps %d: allreduce: no name", s.cfg.Index)
	case count < 1 || count > MaxWorkers:
		return nil, status.Errorf(codes.InvalidArgument, "ps %d: allreduce %q: count %d, want 1 to %d (MaxWorkers)", s.cfg.Index, name, count, MaxWorkers)
	case worker < 0 || int(worker) >= count:
		return nil, status.Errorf(codes.InvalidArgument, "ps %d: allreduce %q: worker %d, want 0..%d", s.cfg.Index, name, worker, count-1)
	case req.GetWaitMs() < 0:
		return nil, status.Errorf(codes.InvalidArgument, "ps %d: allreduce %q: wait_ms %d", s.cfg.Index, name, req.GetWaitMs())
	}
	values, err := decodeFloat64s(req.GetValues())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "ps %d: allreduce %q: %v", s.cfg.Index, name, err)
	}
	ctx, done := s.untilStop(ctx)
	defer done()
	rs := s.reds
	rs.mu.Lock()
	red, ok := rs.byName[name]
	if !ok {
		red = &reduction{}
		rs.byName[name] = red
	}
	if reason := req.GetAbort(); reason != "" {
		r := red.cur
		if r == nil || r.step != step {
			r = newRound(step, count, len(values))
		}
		r.abort, r.abortBy = reason, worker
		close(r.released)
		red.cur, red.aborted = nil, r
		rs.mu.Unlock()
		s.log.Warn("ps: allreduce aborted", "name", name, "step", step, "worker", worker, "reason", reason)
		return &pspb.AllReduceResponse{}, nil
	}
	if a := red.aborted; a != nil && a.step == step {
		rs.mu.Unlock()
		return nil, s.abortedError(name, a)
	}
	if d := red.done; d != nil && d.step == step && !d.answered[worker] {
		if _, ok := d.values[worker]; ok {
			// A retry whose answer was lost.
			d.answered[worker] = true
			rs.mu.Unlock()
			return &pspb.AllReduceResponse{Released: true, Values: float64Bytes(d.mean)}, nil
		}
	}
	r := red.cur
	if r != nil && (r.step != step || r.count != count) {
		if r.waiting > 0 {
			rs.mu.Unlock()
			return nil, status.Errorf(codes.FailedPrecondition, "ps %d: allreduce %q: worker %d of %d is at step %d, the round in progress is step %d of %d workers (workers %v have not arrived)",
				s.cfg.Index, name, worker, count, step, r.step, r.count, r.missing())
		}
		// Nobody waits at it: the round of a job that went away.
		s.log.Warn("ps: allreduce round abandoned", "name", name, "step", r.step, "arrived", len(r.values), "count", r.count)
		r = nil
	}
	if r == nil {
		r = newRound(step, count, len(values))
		red.cur = r
	}
	if len(values) != r.n {
		rs.mu.Unlock()
		return nil, status.Errorf(codes.InvalidArgument, "ps %d: allreduce %q step %d: worker %d brings %d values, the round has %d",
			s.cfg.Index, name, step, worker, len(values), r.n)
	}
	r.values[worker] = values
	if len(r.values) == r.count {
		r.release()
		r.answered[worker] = true
		red.cur, red.done = nil, r
		rs.mu.Unlock()
		return &pspb.AllReduceResponse{Released: true, Values: float64Bytes(r.mean)}, nil
	}
	r.waiting++
	rs.mu.Unlock()

	wctx, cancel := waitContext(ctx, req.GetWaitMs())
	defer cancel()
	select {
	case <-r.released:
	case <-wctx.Done():
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r.waiting--
	select {
	case <-r.released:
		if r.abort != "" {
			return nil, s.abortedError(name, r)
		}
		r.answered[worker] = true
		return &pspb.AllReduceResponse{Released: true, Values: float64Bytes(r.mean)}, nil
	default:
	}
	if ctx.Err() != nil {
		return nil, s.ctxStatus(ctx, "allreduce "+name)
	}
	return &pspb.AllReduceResponse{Missing: r.missing()}, nil
}

func (s *Server) abortedError(name string, r *reduceRound) error {
	return status.Errorf(codes.Aborted, "ps %d: allreduce %q step %d: aborted by worker %d: %s", s.cfg.Index, name, r.step, r.abortBy, r.abort)
}

// AllReduce brings values to the reduction name's round step as worker of count, and returns the
// mean of all count workers' values once they have all arrived. It waits until ctx ends (polling,
// the server holding each call up to a few seconds); then the error names the workers that did
// not arrive, and the round is aborted, so that a worker arriving late fails at once, told why,
// instead of waiting in turn.
func (c *Client) AllReduce(ctx context.Context, name string, step int64, worker, count int, values []float64) ([]float64, error) {
	fail := func(err error) error {
		return fmt.Errorf("ps %s: allreduce %q step %d: worker %d of %d: %w", c.addr, name, step, worker, count, err)
	}
	gaveUp := func(missing []int32, err error) error {
		err = fail(err)
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(c.callTimeout, abortTimeout))
		defer cancel()
		// Best effort: the round fails at the others' deadlines anyway.
		_ = c.AbortAllReduce(actx, name, step, worker, count, fmt.Sprintf("worker %d gave up waiting: workers %v did not arrive", worker, missing))
		return err
	}
	req := &pspb.AllReduceRequest{Name: name, Step: step, Worker: int32(worker), Count: int32(count),
		Values: float64Bytes(values), WaitMs: arrivePoll.Milliseconds()}
	var missing []int32
	for {
		if d, ok := ctx.Deadline(); ok && time.Until(d) < minArriveTime {
			return nil, gaveUp(missing, missingError(missing, codes.DeadlineExceeded))
		}
		cctx, cancel := context.WithTimeout(ctx, c.callTimeout+arrivePoll)
		resp, err := c.rpc.AllReduce(cctx, req)
		cancel()
		if err != nil {
			if ctx.Err() != nil && len(missing) > 0 {
				return nil, gaveUp(missing, fmt.Errorf("%w (workers %v had not arrived)", err, missing))
			}
			return nil, fail(err)
		}
		if resp.GetReleased() {
			mean, err := decodeFloat64s(resp.GetValues())
			if err != nil {
				return nil, fail(err)
			}
			if len(mean) != len(values) {
				return nil, fail(fmt.Errorf("the answer has %d values, want %d", len(mean), len(values)))
			}
			return mean, nil
		}
		missing = resp.GetMissing()
		if err := ctx.Err(); err != nil {
			return nil, gaveUp(missing, missingError(missing, status.FromContextError(err).Code()))
		}
	}
}

// abortTimeout bounds the abort a worker sends when it gives up waiting.
const abortTimeout = 2 * time.Second

// missingError is the error of a wait that ended with workers missing.
func missingError(missing []int32, code codes.Code) error {
	if len(missing) == 0 {
		return status.Error(code, "too little time left to wait for the other workers")
	}
	return status.Errorf(code, "workers %v did not arrive", missing)
}

// AbortAllReduce gives up round step of the reduction name for every worker: those waiting at it,
// and those arriving later, get ABORTED with reason (which names what failed).
func (c *Client) AbortAllReduce(ctx context.Context, name string, step int64, worker, count int, reason string) error {
	if reason == "" {
		reason = "aborted"
	}
	ctx, cancel := c.callCtx(ctx)
	defer cancel()
	_, err := c.rpc.AllReduce(ctx, &pspb.AllReduceRequest{Name: name, Step: step, Worker: int32(worker), Count: int32(count), Abort: reason})
	if err != nil {
		return fmt.Errorf("ps %s: abort allreduce %q step %d: %w", c.addr, name, step, err)
	}
	return nil
}

// float64Bytes is v as little-endian float64 values.
func float64Bytes(v []float64) []byte {
	b := make([]byte, 8*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(f))
	}
	return b
}

// decodeFloat64s reads little-endian float64 values (a copy: the request's buffer is not kept).
func decodeFloat64s(b []byte) ([]float64, error) {
	if len(b)%8 != 0 {
		return nil, fmt.Errorf("%d bytes of values is not a whole number of float64 values", len(b))
	}
	out := make([]float64, len(b)/8)
	for i := range out {
		out[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return out, nil
}
