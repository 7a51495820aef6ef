package paramsync

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	paramsyncpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/parameter_sync"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/modelserver/psshard"
)

// TestPushOnce: a push sends the ids updated since the last one, each once, with the embeddings
// the source holds, to the sub-graph's hashtable_assign, in requests within the bounds.
func TestPushOnce(t *testing.T) {
	tests := []struct {
		name     string
		maxIDs   int
		maxBytes int
		// updates (per table: id ranges) before the first and the second push.
		first, second map[string][]int64
		// wantMax is the largest request expected.
		wantMax int
	}{
		{name: "one table", first: map[string][]int64{"a": ids(0, 50)}, second: map[string][]int64{"a": ids(40, 60)}, wantMax: 50},
		{name: "two tables", first: map[string][]int64{"a": ids(0, 10), "b": ids(-5, 5)}, second: map[string][]int64{"b": {7}}, wantMax: 10},
		{name: "bounded by ids", maxIDs: 7, first: map[string][]int64{"a": ids(0, 100), "b": ids(0, 3)}, second: map[string][]int64{"a": ids(0, 15)}, wantMax: 7},
		// dim 4: 24 bytes per id; 1024 overhead + 5 ids.
		{name: "bounded by bytes", maxBytes: requestOverhead + 5*24 + 3, first: map[string][]int64{"a": ids(0, 23)}, second: map[string][]int64{"a": ids(0, 1)}, wantMax: 5},
		{name: "nothing updated", first: map[string][]int64{}, second: map[string][]int64{"a": {1}}, wantMax: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			ctx := tctx(t)
			src := newSource(t, map[string]int{"a": 4, "b": 2})
			tgt := startTarget(t)
			p := newPusher(t, Config{Source: src, Targets: StaticTargets{tgt.addr}, Shard: 3, MaxIDsPerRequest: tc.maxIDs, MaxRequestBytes: tc.maxBytes})
			want := map[string]map[int64][]float32{}
			for round, updates := range []map[string][]int64{tc.first, tc.second} {
				sent := 0
				for table, ids := range updates {
					src.add(t, table, ids, float32(round+1))
					src.add(t, table, ids[:len(ids)/2], 0.5) // twice: still pushed once
					for id, emb := range src.embeddings(t, table, ids) {
						if want[table] == nil {
							want[table] = map[int64][]float32{}
						}
						want[table][id] = emb
					}
					sent += len(ids)
				}
				before := len(tgt.requestSizes())
				res, err := p.PushOnce(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if res.Taken != sent || len(res.Targets) != 1 || res.Targets[0].IDs != sent || res.Targets[0].Err != nil || res.Retouched != 0 {
					t.Fatalf("round %d: result %+v, want %d ids taken and pushed", round, res, sent)
				}
				sizes := tgt.requestSizes()[before:]
				if len(sizes) != res.Requests || len(res.PushResult().GetResponses()) != res.Requests {
					t.Errorf("round %d: target got %d requests, result says %d (%d responses)", round, len(sizes), res.Requests, len(res.PushResult().GetResponses()))
				}
				for _, n := range sizes {
					if n > tc.wantMax || n == 0 {
						t.Errorf("round %d: a request of %d ids, want 1..%d (requests %v)", round, n, tc.wantMax, sizes)
					}
				}
				for _, r := range res.PushResult().GetResponses() {
					if r.GetStatusCode() != 0 || r.GetTarget() != tgt.addr || r.GetUpdateNum() == 0 {
						t.Errorf("response %v", r)
					}
				}
			}
			for table, w := range want {
				sameEmbeddings(t, "target table "+table, tgt.table(table), w)
			}
			if len(want) > 0 && !tgt.models["demo:ps_3/"+psshard.AssignSignature] {
				t.Errorf("requests went to %v, want demo:ps_3/%s", tgt.models, psshard.AssignSignature)
			}
			// Nothing new: nothing sent.
			before := len(tgt.requestSizes())
			if res, err := p.PushOnce(ctx); err != nil || res.Taken != 0 || len(tgt.requestSizes()) != before {
				t.Errorf("push without updates: %+v, %v; %d requests sent", res, err, len(tgt.requestSizes())-before)
			}
		})
	}
}

// TestTargetFailures: a target that is down, hangs, or refuses does not keep the others from
// their updates; transient failures are retried; the ids no target took come again next time.
func TestTargetFailures(t *testing.T) {
	tests := []struct {
		name    string
		retries int
		// setup makes the failing target (nil: a closed port) and returns it.
		setup func(f *fakeTarget)
		// alone: the failing target is the only one.
		alone bool
		// wantTries of the failing target over the push's 3 requests; wantCode its last failure
		// (OK: it took everything).
		wantTries int
		wantCode  codes.Code
		// wantSkipped: the requests after the first were not sent (it is down).
		wantSkipped bool
		// wantRetouched: the ids no target took.
		wantRetouched int
	}{
		{name: "down", retries: 2, wantTries: 3, wantCode: codes.Unavailable, wantSkipped: true},
		{name: "down, alone", retries: 1, alone: true, wantTries: 2, wantCode: codes.Unavailable, wantSkipped: true, wantRetouched: 30},
		{name: "hung", retries: -1, setup: func(f *fakeTarget) { f.hang = make(chan struct{}) }, wantTries: 1, wantCode: codes.DeadlineExceeded, wantSkipped: true},
		{name: "transient failures retried", retries: 2, setup: func(f *fakeTarget) { f.fail = []codes.Code{codes.Unavailable, codes.ResourceExhausted} }, wantTries: 3 + 1 + 1, wantCode: codes.OK},
		// The first request fails for good; the target is not down: the others go.
		{name: "retries spent", retries: 1, alone: true, setup: func(f *fakeTarget) { f.fail = []codes.Code{codes.Unavailable, codes.Aborted} }, wantTries: 2 + 1 + 1, wantCode: codes.Aborted, wantRetouched: 10},
		{name: "refused, not retried, next requests sent", retries: 3, setup: func(f *fakeTarget) { f.fail = []codes.Code{codes.InvalidArgument} }, wantTries: 1 + 1 + 1, wantCode: codes.InvalidArgument},
		{name: "model not loaded", retries: 3, alone: true, setup: func(f *fakeTarget) { f.failAll = codes.NotFound }, wantTries: 1 + 1 + 1, wantCode: codes.NotFound, wantRetouched: 30},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			ctx := tctx(t)
			src := newSource(t, map[string]int{"a": 3})
			good := startTarget(t)
			var bad *fakeTarget
			badAddr := downAddr(t)
			if tc.setup != nil {
				bad = startTarget(t)
				bad.set(tc.setup)
				badAddr = bad.addr
				if bad.hang != nil {
					t.Cleanup(func() { close(bad.hang) })
				}
			}
			targets := StaticTargets{good.addr, badAddr}
			if tc.alone {
				targets = StaticTargets{badAddr}
			}
			// A try is bounded (the hung target's end) but long enough for a loaded machine.
			timeout := 10 * time.Second
			if bad != nil && bad.hang != nil {
				timeout = 2 * time.Second
			}
			p := newPusher(t, Config{Source: src, Targets: targets, MaxIDsPerRequest: 10, Retries: tc.retries,
				Timeout: timeout, Backoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond})
			src.add(t, "a", ids(0, 30), 1) // 3 requests
			want := src.embeddings(t, "a", ids(0, 30))
			res, err := p.PushOnce(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.alone {
				sameEmbeddings(t, "good target", good.table("a"), want)
				if g := res.Targets[0]; g.Addr != good.addr || g.Err != nil || g.IDs != 30 || g.Tries != 3 {
					t.Errorf("good target's result %+v", g)
				}
			}
			br := res.Targets[len(res.Targets)-1]
			if br.Addr != badAddr || status.Code(br.Err) != tc.wantCode {
				t.Fatalf("failing target's result %+v, want its last error %v", br, tc.wantCode)
			}
			first := br.Responses[0]
			if tc.wantCode != codes.OK && codes.Code(first.GetStatusCode()) != tc.wantCode {
				t.Errorf("first response %v, want %v", first, tc.wantCode)
			}
			if br.Tries != tc.wantTries {
				t.Errorf("failing target tried %d times, want %d", br.Tries, tc.wantTries)
			}
			if tc.wantSkipped {
				for _, r := range br.Responses[1:] {
					if !strings.Contains(r.GetErrorMessage(), "not sent") {
						t.Errorf("request after the target was down: %v, want not sent", r)
					}
				}
			}
			// The ids no target took are pushed again, once a target takes them.
			retouched := tc.wantRetouched
			if res.Retouched != retouched || src.pending("a") != retouched {
				t.Errorf("retouched %d ids (%d pending), want %d", res.Retouched, src.pending("a"), retouched)
			}
			if tc.alone {
				healed := startTarget(t)
				p2 := newPusher(t, Config{Source: src, Targets: StaticTargets{healed.addr}})
				if res, err := p2.PushOnce(ctx); err != nil || res.Targets[0].IDs != retouched {
					t.Fatalf("next push %+v, %v; want the %d retouched ids", res, err, retouched)
				}
				got := healed.table("a")
				for id, emb := range got {
					if !slices.Equal(emb, want[id]) {
						t.Errorf("id %d pushed again as %v, want %v", id, emb, want[id])
					}
				}
			}
		})
	}
}

// TestTrainingNotHeldBack: while a push waits on a hung target, the source's tables take updates.
func TestTrainingNotHeldBack(t *testing.T) {
	leakcheck.Check(t)
	ctx := tctx(t)
	src := newSource(t, map[string]int{"a": 3})
	hung := startTarget(t)
	hung.set(func(f *fakeTarget) { f.hang = make(chan struct{}) })
	p := newPusher(t, Config{Source: src, Targets: StaticTargets{hung.addr}, Timeout: time.Hour, Retries: -1})
	src.add(t, "a", ids(0, 100), 1)
	done := make(chan *Result)
	go func() {
		res, _ := p.PushOnce(ctx)
		done <- res
	}()
	<-hung.arrived
	// The push is in flight: updates of the same and other ids go on.
	for range 20 {
		src.add(t, "a", ids(50, 150), 1)
	}
	close(hung.hang)
	res := <-done
	if res.Targets[0].IDs != 100 {
		t.Errorf("hung target's push %+v", res.Targets[0])
	}
	if res2, err := p.PushOnce(ctx); err != nil || res2.Taken != 100 {
		t.Errorf("next push took %+v, %v; want ids 50..149", res2, err)
	}
}

// flakyTargets is Targets failing the first n calls.
type flakyTargets struct {
	StaticTargets
	mu     sync.Mutex
	n      int
	failed []string
}

func (f *flakyTargets) Addrs(ctx context.Context, model string, shard int) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n > 0 {
		f.n--
		return nil, status.Error(codes.Unavailable, "the agent is away")
	}
	return f.StaticTargets.Addrs(ctx, model, shard)
}

func (f *flakyTargets) Failed(addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failed = append(f.failed, addr)
}

// TestNoTargets: without a known target nothing is taken; the updates wait for one.
func TestNoTargets(t *testing.T) {
	leakcheck.Check(t)
	ctx := tctx(t)
	src := newSource(t, map[string]int{"a": 2})
	tgt := startTarget(t)
	targets := &flakyTargets{StaticTargets: StaticTargets{tgt.addr}, n: 2}
	p := newPusher(t, Config{Source: src, Targets: targets})
	src.add(t, "a", ids(0, 10), 1)
	for range 2 {
		res, err := p.PushOnce(ctx)
		if status.Code(errors.Unwrap(err)) != codes.Unavailable || !strings.Contains(err.Error(), "demo:ps_0") || res.Taken != 0 {
			t.Fatalf("push without targets: %+v, %v", res, err)
		}
		if src.pending("a") != 10 {
			t.Fatalf("%d ids pending, want 10", src.pending("a"))
		}
	}
	if res, err := p.PushOnce(ctx); err != nil || res.Targets[0].IDs != 10 {
		t.Fatalf("push once the target is known: %+v, %v", res, err)
	}
	if res, err := New(Config{Source: src, Targets: StaticTargets{}, Model: "m"}); err != nil {
		t.Fatal(err)
	} else if _, err := res.PushOnce(ctx); status.Code(errors.Unwrap(err)) != codes.Unavailable {
		t.Errorf("no static target: %v", err)
	}
}

// TestRun: Run pushes every interval, and once more when it stops.
func TestRun(t *testing.T) {
	leakcheck.Check(t)
	src := newSource(t, map[string]int{"a": 2})
	tgt := startTarget(t)
	p := newPusher(t, Config{Source: src, Targets: StaticTargets{tgt.addr}, Interval: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx)
	}()
	src.add(t, "a", []int64{1, 2}, 1)
	deadline := time.Now().Add(10 * time.Second)
	for len(tgt.table("a")) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("no push within 10 s of 20 ms intervals")
		}
		time.Sleep(5 * time.Millisecond)
	}
	src.add(t, "a", []int64{3}, 1)
	cancel()
	<-done
	if got := tgt.table("a"); len(got) != 3 {
		t.Errorf("after the stop the target has %d ids, want 3 (the last push at the stop)", len(got))
	}
}

// TestConfig: bad configs are errors of kind Value; the defaults fill the rest.
func TestConfig(t *testing.T) {
	src := newSource(t, map[string]int{"a": 2})
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"defaults", Config{Source: src, Targets: StaticTargets{"x"}, Model: "m"}, true},
		{"no source", Config{Targets: StaticTargets{"x"}, Model: "m"}, false},
		{"no targets", Config{Source: src, Model: "m"}, false},
		{"no model", Config{Source: src, Targets: StaticTargets{"x"}}, false},
		{"negative shard", Config{Source: src, Targets: StaticTargets{"x"}, Model: "m", Shard: -1}, false},
		{"negative interval", Config{Source: src, Targets: StaticTargets{"x"}, Model: "m", Interval: -time.Second}, false},
		{"tiny requests", Config{Source: src, Targets: StaticTargets{"x"}, Model: "m", MaxRequestBytes: 100}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(tc.cfg)
			if tc.ok != (err == nil) || (err != nil && errkind.Of(err) != errkind.Value) {
				t.Fatalf("New: %v, want ok %v", err, tc.ok)
			}
			if p != nil {
				defer p.Close()
				if p.cfg.Interval != DefaultInterval || p.cfg.Timeout != DefaultTimeout || p.cfg.Retries != DefaultRetries || p.idsPerRequest(16) != min(DefaultMaxIDsPerRequest, (DefaultMaxRequestBytes-requestOverhead)/72) {
					t.Errorf("defaults %+v", p.cfg)
				}
			}
		})
	}
}

// TestConvert: a PushRequest travels as the reference's Convert makes it.
func TestConvert(t *testing.T) {
	req := &paramsyncpb.PushRequest{ModelName: ptr("m:ps_1"), SignatureName: ptr(psshard.AssignSignature),
		DeltaHashTables: []*paramsyncpb.PushRequest_DeltaEmbeddingHashTable{
			{UniqueId: ptr("a"), DimSize: ptr[int32](2), Fids: []int64{1, 3}, Embeddings: []float32{1, 2, 3, 4}},
			{UniqueId: ptr("b"), DimSize: ptr[int32](1), Fids: []int64{5}, Embeddings: []float32{9}},
		}}
	pred, n, err := Convert(req)
	if err != nil || n != 3 {
		t.Fatalf("Convert: %d, %v", n, err)
	}
	if pred.GetModelSpec().GetName() != "m:ps_1" || pred.GetModelSpec().GetSignatureName() != psshard.AssignSignature || len(pred.GetInputs()) != 4 {
		t.Errorf("converted %v", pred)
	}
	if shape := pred.GetInputs()["a_value"].GetTensorShape().GetDim(); len(shape) != 2 || shape[0].GetSize() != 2 || shape[1].GetSize() != 2 {
		t.Errorf("a_value shape %v, want [2, 2]", shape)
	}
	for _, bad := range []*paramsyncpb.PushRequest{
		{DeltaHashTables: []*paramsyncpb.PushRequest_DeltaEmbeddingHashTable{{UniqueId: ptr("a"), DimSize: ptr[int32](2), Fids: []int64{1}, Embeddings: []float32{1}}}},
		{DeltaHashTables: []*paramsyncpb.PushRequest_DeltaEmbeddingHashTable{{UniqueId: ptr("a"), Fids: []int64{1}}}},
		{DeltaMultiHashTables: []*paramsyncpb.PushRequest_DeltaEmbeddingHashTable{{UniqueId: ptr("a")}}},
	} {
		if _, _, err := Convert(bad); err == nil {
			t.Errorf("Convert(%v) accepted", bad)
		}
	}
}

func ptr[T any](v T) *T { return &v }
