package paramsync

import (
	"context"
	"maps"
	"net"
	"slices"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/modelserver/psshard"
)

// snapSource is a tableSource that can hand every entry (a Snapshotter, as pkg/ps.Server is).
type snapSource struct{ *tableSource }

func (s snapSource) EachEntry(table string, max int, fn func([]int64, []float32) error) (int, error) {
	return s.tables[table].EachEntry(max, fn)
}

// loadTarget is a fake target that names its load in the answer's header, as psshard does;
// restart forgets what it was pushed and takes a new load id.
type loadTarget struct {
	*fakeTarget
	load string
}

func (l *loadTarget) Predict(ctx context.Context, req *servingapis.PredictRequest) (*servingapis.PredictResponse, error) {
	l.mu.Lock()
	load := l.load
	l.mu.Unlock()
	grpc.SetHeader(ctx, metadata.Pairs(psshard.ServableIDHeader, load))
	return l.fakeTarget.Predict(ctx, req)
}

func startLoadTarget(t *testing.T, load string) *loadTarget {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeTarget{addr: lis.Addr().String(), gs: grpc.NewServer(), got: map[string]map[int64][]float32{}, models: map[string]bool{}, arrived: make(chan struct{}, 1)}
	l := &loadTarget{fakeTarget: f, load: load}
	servingapis.RegisterPredictionServiceServer(f.gs, l)
	go f.gs.Serve(lis)
	t.Cleanup(f.gs.Stop)
	return l
}

func (l *loadTarget) restart(load string) {
	l.set(func(f *fakeTarget) { f.got = map[string]map[int64][]float32{} })
	l.mu.Lock()
	l.load = load
	l.mu.Unlock()
}

// TestCatchUp: a target the pusher has not pushed to yet, one that missed a push, and one that
// answers from another load (restarted or reloaded: what it was pushed is gone) get every entry,
// not just the updates since the last push; so each holds what the trainer has after one push.
func TestCatchUp(t *testing.T) {
	leakcheck.Check(t)
	ctx := tctx(t)
	src := snapSource{newSource(t, map[string]int{"a": 2, "b": 1})}
	a := startLoadTarget(t, "a-1")
	targets := &switchTargets{addrs: []string{a.addr}}
	p := newPusher(t, Config{Source: src, Targets: targets, Retries: -1, MaxIDsPerRequest: 7})
	want := func() map[string]map[int64][]float32 {
		out := map[string]map[int64][]float32{}
		for name, tb := range src.tables {
			out[name] = map[int64][]float32{}
			tb.EachEntry(100, func(ids []int64, embs []float32) error {
				for k, id := range ids {
					out[name][id] = slices.Clone(embs[k*tb.Dim() : (k+1)*tb.Dim()])
				}
				return nil
			})
		}
		return out
	}
	holds := func(what string, f *loadTarget) {
		t.Helper()
		for name, entries := range want() {
			if got := f.table(name); !maps.EqualFunc(got, entries, slices.Equal) {
				t.Errorf("%s: target holds %d entries of table %s, the trainer %d (or other values)", what, len(got), name, len(entries))
			}
		}
	}
	push := func(what string, wantCatchUp map[string]bool) {
		t.Helper()
		res, err := p.PushOnce(ctx)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		for _, tr := range res.Targets {
			if (tr.CatchUp > 0) != wantCatchUp[tr.Addr] {
				t.Errorf("%s: target %s caught up with %d ids, want a catch-up %v", what, tr.Addr, tr.CatchUp, wantCatchUp[tr.Addr])
			}
		}
	}

	src.add(t, "a", ids(0, 20), 1)
	src.add(t, "b", ids(0, 5), 2)
	push("first push", map[string]bool{a.addr: true})
	holds("first push", a)
	src.add(t, "a", ids(3, 6), 1)
	push("an update", nil)
	holds("an update", a)
	if sizes := a.requestSizes(); sizes[len(sizes)-1] != 3 {
		t.Errorf("the update went as %v ids, want 3 (only what changed)", sizes[len(sizes)-1:])
	}

	// A second target appears: it gets everything, the first only the new update.
	b := startLoadTarget(t, "b-1")
	targets.set([]string{a.addr, b.addr})
	src.add(t, "b", ids(1, 2), 1)
	push("a new target", map[string]bool{b.addr: true})
	holds("a new target: the old one", a)
	holds("a new target: the new one", b)

	// The first restarts (a kill and a reload of its export): the next push finds its new load
	// and catches it up, with updates or without.
	a.restart("a-2")
	src.add(t, "a", ids(19, 21), 1)
	push("a restarted target, with updates", map[string]bool{a.addr: true})
	holds("a restarted target, with updates", a)
	b.restart("b-2")
	push("a restarted target, no updates", map[string]bool{b.addr: true})
	holds("a restarted target, no updates", b)

	// A target that fails a push is caught up at the next.
	a.set(func(f *fakeTarget) { f.fail = []codes.Code{codes.Internal} })
	src.add(t, "a", ids(0, 2), 1)
	push("a failed push", nil)
	src.add(t, "b", ids(4, 5), 1)
	push("after a failed push", map[string]bool{a.addr: true})
	holds("after a failed push", a)
	holds("after a failed push: the other", b)
}

// switchTargets are fixed addresses the test changes.
type switchTargets struct {
	mu    sync.Mutex
	addrs []string
}

func (s *switchTargets) Addrs(context.Context, string, int) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.addrs), nil
}

func (s *switchTargets) Failed(string) {}

func (s *switchTargets) set(addrs []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addrs = addrs
}
