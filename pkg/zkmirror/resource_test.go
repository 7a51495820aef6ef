package zkmirror

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/zk"
)

// TestNumTCEReplica covers the fixed num_tce_replica: it waits until every replica has a
// resource node for each of the NumTCEShard shards, entries (replica -1) aside, then returns the
// number of replicas.
func TestNumTCEReplica(t *testing.T) {
	leakcheck.Check(t)
	c := zkfakeClient(t)
	cfg := testConfig(c)
	cfg.NumShard = 2
	m := newMirror(t, cfg)
	ctx := tctx(t)
	if err := m.WatchResource(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := m.NumTCEReplica(ctx); err != nil || n != 0 {
		t.Fatalf("no resources: %d, %v", n, err)
	}
	report := func(shard, replica int) {
		t.Helper()
		if err := m.ReportResource(ctx, resource(shard, replica)); err != nil {
			t.Fatal(err)
		}
	}
	report(0, 0)
	report(1, 0)
	report(0, -1) // an entry
	report(0, 1)  // replica 1 lacks shard 1

	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := m.NumTCEReplica(ctx)
		done <- result{n, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("returned %v before replica 1 was complete", r)
	case <-time.After(20 * time.Millisecond):
	}
	report(1, 1)
	select {
	case r := <-done:
		if r.err != nil || r.n != 2 {
			t.Fatalf("NumTCEReplica = %d, %v; want 2", r.n, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("NumTCEReplica still waiting once every replica was complete")
	}

	// While incomplete it ends with its context, or with the mirror.
	if err := c.Delete(ctx, "/bzid/resource/1:1", zk.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := m.NumTCEReplica(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("with an ended context: %v", err)
	}
	go func() {
		_, err := m.NumTCEReplica(ctx)
		done <- result{0, err}
	}()
	m.Stop()
	if r := <-done; !errors.Is(r.err, ErrStopped) {
		t.Fatalf("after Stop: %v", r.err)
	}
}
