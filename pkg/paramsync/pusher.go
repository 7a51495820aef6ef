package paramsync

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	paramsyncpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/parameter_sync"
	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/eventtime"
	"github.com/monolith-go/monolith/pkg/modelserver/psshard"
)

// Defaults of Config.
const (
	// DefaultInterval is the time from the start of one push to the next (the reference: 10 s).
	DefaultInterval = 5 * time.Second
	// DefaultMaxIDsPerRequest bounds the ids of one request.
	DefaultMaxIDsPerRequest = 1 << 16
	// DefaultMaxRequestBytes bounds a request's size (the reference splits at 4 MiB).
	DefaultMaxRequestBytes = 4 << 20
	// DefaultTimeout bounds one try of one request (the reference's timeout_in_ms: 3000).
	DefaultTimeout = 3 * time.Second
	// DefaultRetries is how many times a failed request is tried again.
	DefaultRetries = 2
	// DefaultBackoff is the wait before the first retry, doubled before each next one up to
	// DefaultMaxBackoff.
	DefaultBackoff    = 100 * time.Millisecond
	DefaultMaxBackoff = 2 * time.Second
)

// requestOverhead is what a request takes besides its ids and floats (names, tensor headers).
const requestOverhead = 1 << 10

// Config configures a Pusher.
type Config struct {
	// Source holds the tables whose updates are pushed.
	Source Source
	// Targets lists the serving replicas of the shard.
	Targets Targets
	// Model is the served model's name: pushes go to the sub-graph "<Model>:ps_<Shard>".
	Model string
	// Shard is the index of the PS whose tables Source holds.
	Shard int
	// Interval is the period of the pushes (default DefaultInterval).
	Interval time.Duration
	// MaxIDsPerRequest and MaxRequestBytes bound each request (defaults DefaultMaxIDsPerRequest
	// and DefaultMaxRequestBytes).
	MaxIDsPerRequest, MaxRequestBytes int
	// Timeout bounds one try (default DefaultTimeout).
	Timeout time.Duration
	// Retries is how many times a request that failed transiently is tried again on the same
	// target (0: DefaultRetries; negative: none).
	Retries int
	// Backoff and MaxBackoff: the wait before the first retry and its bound (defaults
	// DefaultBackoff and DefaultMaxBackoff).
	Backoff, MaxBackoff time.Duration
	// Metrics, when set, count the pushes.
	Metrics *Metrics
	Logger  *slog.Logger
	// Credentials secure the connections to the targets (pkg/tlsconfig); nil: plaintext.
	Credentials credentials.TransportCredentials
}

// Pusher pushes a PS shard's updates to its serving replicas. Run pushes every interval;
// PushOnce pushes once. Its methods must not run concurrently with each other.
type Pusher struct {
	cfg     Config
	sub     string // "<model>:ps_<shard>"
	log     *slog.Logger
	conns   *conns
	lastErr map[string]string // by target: the last failure logged, "" once it succeeded
	targets map[string]*target
}

// target is what the pusher knows of a target between pushes (catch-up pushes need a Source that
// is a Snapshotter).
type target struct {
	// synced: the target has every update up to the last push (it took a catch-up push, and
	// every push since).
	synced bool
	// servable is the load of the shard the target last answered from (psshard's
	// ServableIDHeader; "" unknown): another one means it was reloaded or restarted.
	servable string
}

// New returns a pusher of cfg; Close releases its connections.
func New(cfg Config) (*Pusher, error) {
	switch {
	case cfg.Source == nil:
		return nil, errkind.New(errkind.Value, "parameter sync: no source")
	case cfg.Targets == nil:
		return nil, errkind.New(errkind.Value, "parameter sync: no targets")
	case cfg.Model == "":
		return nil, errkind.New(errkind.Value, "parameter sync: no model name")
	case cfg.Shard < 0:
		return nil, errkind.New(errkind.Value, "parameter sync: shard %d", cfg.Shard)
	case cfg.Interval < 0 || cfg.MaxIDsPerRequest < 0 || cfg.MaxRequestBytes < 0 || cfg.Timeout < 0 || cfg.Backoff < 0 || cfg.MaxBackoff < 0:
		return nil, errkind.New(errkind.Value, "parameter sync: negative interval, bound, timeout or backoff")
	case cfg.MaxRequestBytes > 0 && cfg.MaxRequestBytes <= requestOverhead:
		return nil, errkind.New(errkind.Value, "parameter sync: max request bytes %d, want more than %d", cfg.MaxRequestBytes, requestOverhead)
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.MaxIDsPerRequest == 0 {
		cfg.MaxIDsPerRequest = DefaultMaxIDsPerRequest
	}
	if cfg.MaxRequestBytes == 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Retries == 0 {
		cfg.Retries = DefaultRetries
	}
	cfg.Retries = max(cfg.Retries, 0)
	if cfg.Backoff == 0 {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sub := cfg.Model + ":ps_" + strconv.Itoa(cfg.Shard)
	return &Pusher{cfg: cfg, sub: sub, log: log.With("sub_graph", sub), conns: newConns(cfg.Credentials), lastErr: map[string]string{}, targets: map[string]*target{}}, nil
}

// Close closes the connections to the targets.
func (p *Pusher) Close() error {
	p.conns.close()
	return nil
}

// Run pushes every interval until ctx ends, then pushes once more (bounded by the interval) so
// that the updates of the last moments before a stop are not lost.
func (p *Pusher) Run(ctx context.Context) {
	next := time.Now().Add(p.cfg.Interval)
	t := time.NewTimer(p.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.Interval)
			p.cycle(fctx)
			cancel()
			return
		case <-t.C:
		}
		p.cycle(ctx)
		// The reference's period: the next push starts an interval after this one started (at
		// once when this one took longer).
		next = next.Add(p.cfg.Interval)
		if now := time.Now(); next.Before(now) {
			next = now
		}
		t.Reset(time.Until(next))
	}
}

// cycle pushes once and logs what went wrong.
func (p *Pusher) cycle(ctx context.Context) {
	res, err := p.PushOnce(ctx)
	if err != nil {
		if p.lastErr[""] != err.Error() {
			p.log.Warn("parameter sync: nothing pushed", "err", err)
			p.lastErr[""] = err.Error()
		}
		return
	}
	delete(p.lastErr, "")
	for _, tr := range res.Targets {
		switch {
		case tr.Err != nil && p.lastErr[tr.Addr] != tr.Err.Error():
			p.log.Warn("parameter sync: target failed", "target", tr.Addr, "failed_requests", tr.Failed, "requests", len(tr.Responses), "err", tr.Err)
			p.lastErr[tr.Addr] = tr.Err.Error()
		case tr.Err == nil && p.lastErr[tr.Addr] != "":
			p.log.Info("parameter sync: target recovered", "target", tr.Addr)
			p.lastErr[tr.Addr] = ""
		}
	}
	if res.Taken > 0 {
		p.log.Debug("parameter sync: pushed", "ids", res.Taken, "requests", res.Requests, "targets", len(res.Targets), "retouched", res.Retouched, "took", res.Duration)
	}
}

// Result is what one push did.
type Result struct {
	// Taken is the ids taken from the source, in Requests requests.
	Taken, Requests int
	// Retouched is the ids no target took, marked touched again for the next push.
	Retouched int
	// NewestEventTime is the source's newest event time (Unix milliseconds, 0: unknown) when the
	// ids were taken: the updates pushed include every event up to it.
	NewestEventTime int64
	// Targets are the targets' results, in the order Targets listed them.
	Targets  []TargetResult
	Duration time.Duration
}

// TargetResult is one target's part of a push.
type TargetResult struct {
	Addr string
	// IDs is how many ids the target assigned.
	IDs int
	// Failed is how many requests failed (after their retries, or skipped once the target was
	// found down); Tries counts every try.
	Failed, Tries int
	// CatchUp is how many ids a catch-up push sent the target (every entry: it was new, had
	// missed a push, or was reloaded), 0 when it had none.
	CatchUp int
	// Err is the last failure, nil when every request succeeded.
	Err error
	// Responses are the reference's PushResponse of each request, in order.
	Responses []*paramsyncpb.PushResponse
}

// PushResult is the reference's PushResult: every target's response to every request.
func (r *Result) PushResult() *paramsyncpb.PushResult {
	out := &paramsyncpb.PushResult{}
	for _, tr := range r.Targets {
		out.Responses = append(out.Responses, tr.Responses...)
	}
	return out
}

// PushOnce takes the ids updated since the last push and pushes them to every target. An error
// means nothing was pushed: no target is known (the ids stay pending) or the source failed;
// failures of targets are in the result.
func (p *Pusher) PushOnce(ctx context.Context) (*Result, error) {
	start := time.Now()
	res := &Result{}
	defer func() {
		res.Duration = time.Since(start)
		p.cfg.Metrics.cycle(res)
	}()
	addrs, err := p.cfg.Targets.Addrs(ctx, p.cfg.Model, p.cfg.Shard)
	if err == nil && len(addrs) == 0 {
		err = status.Errorf(codes.Unavailable, "no replica of %s", p.sub)
	}
	if err != nil {
		p.cfg.Metrics.noTarget()
		return res, fmt.Errorf("parameter sync of %s: %w", p.sub, err)
	}
	addrs = unique(addrs)
	p.conns.keep(addrs)
	// Read before the take: every apply it covers has marked its entries touched by then.
	if et, ok := p.cfg.Source.(EventTimes); ok {
		res.NewestEventTime = et.NewestEventTime()
	}
	reqs, err := p.take()
	for _, r := range reqs {
		res.Taken += len(r.GetDeltaHashTables()[0].GetFids())
	}
	res.Requests = len(reqs)
	if err != nil {
		p.giveBack(reqs)
		return res, fmt.Errorf("parameter sync of %s: %w", p.sub, err)
	}
	preds := make([]*servingapis.PredictRequest, len(reqs))
	for i, r := range reqs {
		if preds[i], _, err = Convert(r); err != nil {
			p.giveBack(reqs)
			return res, fmt.Errorf("parameter sync of %s: %w", p.sub, err)
		}
	}
	res.Targets = make([]TargetResult, len(addrs))
	delivered := make([][]bool, len(addrs))
	_, catchUps := p.cfg.Source.(Snapshotter)
	states := make([]*target, len(addrs))
	for i, addr := range addrs {
		if states[i] = p.targets[addr]; states[i] == nil {
			states[i] = &target{}
		}
	}
	// A target that leaves the list and comes back is caught up again.
	p.targets = make(map[string]*target, len(addrs))
	for i, addr := range addrs {
		p.targets[addr] = states[i]
	}
	if len(reqs) > 0 || catchUps {
		snap := &snapshot{}
		var wg sync.WaitGroup
		for i, addr := range addrs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res.Targets[i], delivered[i] = p.pushTarget(ctx, addr, states[i], reqs, preds, res.NewestEventTime, snap)
			}()
		}
		wg.Wait()
	} else {
		for i, addr := range addrs {
			res.Targets[i] = TargetResult{Addr: addr}
		}
	}
	// A request no target took goes again next time, to all of them.
	var lost []*paramsyncpb.PushRequest
	for k, r := range reqs {
		if !slices.ContainsFunc(delivered, func(d []bool) bool { return d[k] }) {
			lost = append(lost, r)
			res.Retouched += len(r.GetDeltaHashTables()[0].GetFids())
		}
	}
	p.giveBack(lost)
	return res, nil
}

// take takes the touched ids of every table into requests of one table each, bounded.
func (p *Pusher) take() ([]*paramsyncpb.PushRequest, error) {
	dims := p.cfg.Source.SyncTables()
	var reqs []*paramsyncpb.PushRequest
	for _, table := range slices.Sorted(maps.Keys(dims)) {
		dim := dims[table]
		n, err := p.cfg.Source.TakeTouched(table, p.idsPerRequest(dim), func(ids []int64, embs []float32) error {
			reqs = append(reqs, p.request(table, dim, ids, embs))
			return nil
		})
		p.cfg.Metrics.taken(table, n)
		if err != nil {
			if errkind.Of(err) == errkind.NotFound {
				continue // the table went away since it was listed
			}
			return reqs, fmt.Errorf("take the updates of table %q: %w", table, err)
		}
	}
	return reqs, nil
}

// Snapshotter is a Source that can hand every entry of a table (pkg/ps.Server): a target that is
// new, missed a push or was reloaded (another servable id) gets a catch-up push of every entry,
// so that it serves what the trainer has again, not its export plus the pushes since.
type Snapshotter interface {
	EachEntry(table string, max int, fn func(ids []int64, embs []float32) error) (int, error)
}

// snapshot is a push's catch-up requests, taken once for all the targets that need them (after
// the push's take: they hold every value its requests hold, or newer).
type snapshot struct {
	once  sync.Once
	reqs  []*paramsyncpb.PushRequest
	preds []*servingapis.PredictRequest
	ids   int
	err   error
}

func (p *Pusher) snapshot(s *snapshot) *snapshot {
	s.once.Do(func() {
		src := p.cfg.Source.(Snapshotter)
		dims := p.cfg.Source.SyncTables()
		for _, table := range slices.Sorted(maps.Keys(dims)) {
			dim := dims[table]
			per := p.idsPerRequest(dim)
			// The table hands its entries a stripe at a time: requests fill up across stripes.
			var ids []int64
			var embs []float32
			n, err := src.EachEntry(table, per, func(bids []int64, bembs []float32) error {
				for len(bids) > 0 {
					k := min(per-len(ids), len(bids))
					ids, embs = append(ids, bids[:k]...), append(embs, bembs[:k*dim]...)
					bids, bembs = bids[k:], bembs[k*dim:]
					if len(ids) == per {
						s.reqs = append(s.reqs, p.request(table, dim, ids, embs))
						ids, embs = ids[:0], embs[:0]
					}
				}
				return nil
			})
			if len(ids) > 0 {
				s.reqs = append(s.reqs, p.request(table, dim, ids, embs))
			}
			s.ids += n
			if err != nil && errkind.Of(err) != errkind.NotFound {
				s.err = fmt.Errorf("catch-up: the entries of table %q: %w", table, err)
				return
			}
		}
		for _, r := range s.reqs {
			pr, _, err := Convert(r)
			if err != nil {
				s.err = err
				return
			}
			s.preds = append(s.preds, pr)
		}
	})
	return s
}

// request is a push request of one table's ids and embeddings (copied).
func (p *Pusher) request(table string, dim int, ids []int64, embs []float32) *paramsyncpb.PushRequest {
	return &paramsyncpb.PushRequest{
		ModelName:     proto.String(p.sub),
		SignatureName: proto.String(psshard.AssignSignature),
		TimeoutInMs:   proto.Int64(p.cfg.Timeout.Milliseconds()),
		DeltaHashTables: []*paramsyncpb.PushRequest_DeltaEmbeddingHashTable{{
			UniqueId: proto.String(table), DimSize: proto.Int32(int32(dim)),
			Fids: slices.Clone(ids), Embeddings: slices.Clone(embs),
		}},
	}
}

// idsPerRequest is how many ids of dimension dim a request holds at most.
func (p *Pusher) idsPerRequest(dim int) int {
	perID := 8 + 4*dim
	return max(1, min(p.cfg.MaxIDsPerRequest, (p.cfg.MaxRequestBytes-requestOverhead)/perID))
}

// giveBack marks the ids of reqs touched again.
func (p *Pusher) giveBack(reqs []*paramsyncpb.PushRequest) {
	for _, r := range reqs {
		for _, d := range r.GetDeltaHashTables() {
			p.cfg.Source.Retouch(d.GetUniqueId(), d.GetFids())
			p.cfg.Metrics.retouched(len(d.GetFids()))
		}
	}
}

// pushTarget sends the requests to addr in order, each with its retries; once the target is
// found down the rest are skipped. The last request carries the newest event time (ms > 0): the
// target has every update of the cycle once it has taken that one. A target that needs a catch-up
// (st: new, it missed a push, or it answers from another load than before) gets the snapshot's
// requests instead, which hold every entry; a target that has nothing to get is asked with an empty
// request, which tells its load. It reports which of reqs the target took (all of them once it
// took a catch-up).
func (p *Pusher) pushTarget(ctx context.Context, addr string, st *target, reqs []*paramsyncpb.PushRequest, preds []*servingapis.PredictRequest, ms int64, snap *snapshot) (TargetResult, []bool) {
	tr := TargetResult{Addr: addr}
	delivered := make([]bool, len(reqs))
	_, catchUps := p.cfg.Source.(Snapshotter)
	var down error
	// send sends one request; it reports whether the target took it.
	send := func(r *paramsyncpb.PushRequest, pred *servingapis.PredictRequest, last bool) bool {
		if down == nil && ctx.Err() != nil {
			down = status.FromContextError(ctx.Err()).Err()
		}
		ids := len(r.GetDeltaHashTables()) > 0
		n := 0
		if ids {
			n = len(r.GetDeltaHashTables()[0].GetFids())
		}
		if down != nil {
			ds := status.Convert(down)
			tr.Responses = append(tr.Responses, &paramsyncpb.PushResponse{Target: proto.String(addr), StatusCode: proto.Int32(int32(ds.Code())),
				ErrorMessage: proto.String("not sent, the target failed: " + ds.Message()), UpdateNum: proto.Int32(0)})
			tr.Failed++
			p.cfg.Metrics.failed(addr, ds.Code(), n)
			return false
		}
		rctx := ctx
		if last {
			rctx = eventtime.Outgoing(ctx, ms)
		}
		var servable string
		resp, tries := p.pushRetrying(rctx, addr, r, pred, &servable)
		tr.Tries += tries
		if ids {
			tr.Responses = append(tr.Responses, resp)
		}
		code := codes.Code(resp.GetStatusCode())
		if code == codes.OK {
			if servable != "" {
				if st.servable != "" && servable != st.servable {
					st.synced = false // reloaded or restarted: what it had pushed is gone
				}
				st.servable = servable
			}
			tr.IDs += int(resp.GetUpdateNum())
			p.cfg.Metrics.pushed(addr, int(resp.GetUpdateNum()))
			if last && ms > 0 && tr.Failed == 0 {
				p.cfg.Metrics.fresh(time.Since(time.UnixMilli(ms)))
			}
			return true
		}
		st.synced = false
		tr.Failed++
		what := "an empty request"
		if ids {
			what = fmt.Sprintf("%d ids of table %q", n, r.GetDeltaHashTables()[0].GetUniqueId())
		}
		tr.Err = fmt.Errorf("push %s to %s: %w", what, addr, status.Error(code, resp.GetErrorMessage()))
		p.cfg.Metrics.failed(addr, code, n)
		p.cfg.Targets.Failed(addr)
		if code == codes.Unavailable || code == codes.DeadlineExceeded || code == codes.Canceled {
			down = status.Error(code, resp.GetErrorMessage())
			if code != codes.Canceled {
				p.conns.drop(addr)
			}
		}
		return false
	}
	// sendEmpty sends the push of no ids, which tells the target's load.
	sendEmpty := func(last bool) bool {
		r, pred := p.emptyRequest()
		return send(r, pred, last)
	}
	// catchUp sends the snapshot; true when the target took all of it.
	catchUp := func() bool {
		s := p.snapshot(snap)
		if s.err != nil {
			tr.Err = fmt.Errorf("catch-up push to %s: %w", addr, s.err)
			return false
		}
		for i, r := range s.reqs {
			if !send(r, s.preds[i], i == len(s.reqs)-1) {
				st.synced = false
				return false
			}
		}
		if len(s.reqs) == 0 && !sendEmpty(true) {
			return false
		}
		st.synced = true
		tr.CatchUp = s.ids
		p.cfg.Metrics.caughtUp(addr, s.ids)
		for i := range delivered {
			delivered[i] = true
		}
		return true
	}
	if catchUps && !st.synced {
		if catchUp() {
			p.log.Info("parameter sync: caught a target up", "target", addr, "ids", tr.CatchUp)
		}
		if down != nil && tr.Err == nil {
			tr.Err = fmt.Errorf("push to %s: %w", addr, down)
		}
		return tr, delivered
	}
	if len(reqs) == 0 && catchUps {
		// Nothing to push: ask with an empty request, which tells the target's load.
		sendEmpty(false)
	}
	for i, r := range reqs {
		if send(r, preds[i], i == len(reqs)-1) {
			delivered[i] = true
		}
		if catchUps && !st.synced && down == nil {
			break // reloaded: the catch-up below holds every entry
		}
	}
	if catchUps && !st.synced && down == nil && tr.Failed == 0 {
		if catchUp() {
			p.log.Info("parameter sync: caught up a reloaded target", "target", addr, "ids", tr.CatchUp)
		}
	}
	if down != nil && tr.Err == nil {
		tr.Err = fmt.Errorf("push to %s: %w", addr, down)
	}
	return tr, delivered
}

// emptyRequest is the push of no ids, with its assign request (it answers with the target's
// load).
func (p *Pusher) emptyRequest() (*paramsyncpb.PushRequest, *servingapis.PredictRequest) {
	r := &paramsyncpb.PushRequest{ModelName: proto.String(p.sub), SignatureName: proto.String(psshard.AssignSignature),
		TimeoutInMs: proto.Int64(p.cfg.Timeout.Milliseconds())}
	pred, _, _ := Convert(r) // no tables: nothing to refuse
	return r, pred
}

// retryable are the codes a try of a request may pass on the next try.
func retryable(c codes.Code) bool {
	switch c {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted:
		return true
	}
	return false
}

// pushRetrying tries a request on addr until it succeeds, fails for good, or its retries are
// spent; it returns the last response and the number of tries.
func (p *Pusher) pushRetrying(ctx context.Context, addr string, r *paramsyncpb.PushRequest, pred *servingapis.PredictRequest, servable *string) (*paramsyncpb.PushResponse, int) {
	for try := 0; ; try++ {
		start := time.Now()
		resp := p.conns.push(ctx, addr, r, pred, servable)
		code := codes.Code(resp.GetStatusCode())
		p.cfg.Metrics.request(addr, code, time.Since(start))
		if code == codes.OK || !retryable(code) || try >= p.cfg.Retries || ctx.Err() != nil {
			return resp, try + 1
		}
		if err := sleep(ctx, p.backoff(try)); err != nil {
			return resp, try + 1
		}
	}
}

// backoff is the wait before retry number try+1: Backoff doubled try times, at most MaxBackoff,
// less up to a fifth at random (so that the pushes of several PS do not retry in step).
func (p *Pusher) backoff(try int) time.Duration {
	d := p.cfg.Backoff
	for range try {
		if d >= p.cfg.MaxBackoff/2 {
			d = p.cfg.MaxBackoff
			break
		}
		d *= 2
	}
	d = min(d, p.cfg.MaxBackoff)
	return d - time.Duration(rand.Int64N(int64(d)/5+1))
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// unique drops repeated addresses, keeping the first.
func unique(addrs []string) []string {
	seen := make(map[string]bool, len(addrs))
	out := addrs[:0:0]
	for _, a := range addrs {
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	return out
}
