package zkmirror

import (
	"context"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/zk/zkfake"
)

// TestElectionEntry: an entry deployment never runs for leader (no contender node).
func TestElectionEntry(t *testing.T) {
	leakcheck.Check(t)
	c := zkfakeClient(t)
	cfg := testConfig(c)
	cfg.DeployType = agentconf.ServerEntry
	m := newMirror(t, cfg)
	called := make(chan struct{}, 1)
	if err := m.Election("pod", func(context.Context) { called <- struct{}{} }); err != nil {
		t.Fatal(err)
	}
	m.Stop()
	select {
	case <-called:
		t.Fatal("an entry ran as leader")
	default:
	}
	if st, err := c.Exists(tctx(t), m.ElectionPath()); err != nil || st != nil {
		t.Fatalf("election node for an entry: %v %v", st, err)
	}
}

// TestElection: the first contender leads (IsLeader while its function runs), the second waits;
// when the leader's session expires the second takes over and the first runs again; Stop ends
// the leader function and the waiting contender.
func TestElection(t *testing.T) {
	leakcheck.Check(t)
	c1 := zkfakeClient(t)
	c2 := c1.Server().Client()
	t.Cleanup(func() { c2.Close() })
	mirror := func(c *zkfake.Fake) *Mirror {
		cfg := testConfig(c)
		cfg.ElectionRetryDelay = time.Millisecond
		return newMirror(t, cfg)
	}
	m1, m2 := mirror(c1), mirror(c2)

	type lead struct {
		who string
		ctx context.Context
	}
	leads := make(chan lead, 8)
	run := func(m *Mirror, who string) {
		t.Helper()
		err := m.Election(who, func(ctx context.Context) {
			leads <- lead{who, ctx}
			<-ctx.Done()
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	next := func() lead {
		t.Helper()
		select {
		case l := <-leads:
			return l
		case <-time.After(10 * time.Second):
			t.Fatal("no leader")
		}
		return lead{}
	}
	run(m1, "one")
	first := next()
	if first.who != "one" || !m1.IsLeader() {
		t.Fatalf("first leader %s, m1 leads %v", first.who, m1.IsLeader())
	}
	run(m2, "two")
	select {
	case l := <-leads:
		t.Fatalf("%s leads while one does", l.who)
	case <-time.After(20 * time.Millisecond):
	}
	if m2.IsLeader() {
		t.Fatal("m2 leads while waiting")
	}

	// The leader's session expires: its function's context ends, two takes over, and one runs again.
	if err := c1.ExpireSession(); err != nil {
		t.Fatal(err)
	}
	if second := next(); second.who != "two" {
		t.Fatalf("after expiry %s leads", second.who)
	}
	select {
	case <-first.ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the old leader's context did not end")
	}
	eventually(t, 10*time.Second, "m1 not leader", func() bool { return !m1.IsLeader() })

	m2.Stop() // one (queued again after its expiry) takes over
	if again := next(); again.who != "one" {
		t.Fatalf("after two stopped %s leads", again.who)
	}
	m1.Stop()
	if m1.IsLeader() {
		t.Fatal("m1 leads after Stop")
	}
}
