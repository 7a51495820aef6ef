package discovery_test

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/discovery"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkfake"
	"github.com/monolith-go/monolith/pkg/zk/zkreal"
	"github.com/monolith-go/monolith/pkg/zk/zktest"
)

// realSessionTimeout is the session timeout of the tests' real clients (the server's tick is
// 200 ms, so it allows 400 ms to 4 s).
const realSessionTimeout = 2 * time.Second

func startZK(t *testing.T) *zktest.Server {
	return zktest.Start(t, zktest.WithTickTime(200*time.Millisecond))
}

func connectReal(t *testing.T, srv *zktest.Server) *zkreal.Client {
	t.Helper()
	c, err := zkreal.Connect(tctx(t), zkreal.Options{Servers: []string{srv.Addr()}, SessionTimeout: realSessionTimeout, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func newZK(t *testing.T, opts discovery.ZKOptions) *discovery.ZKDiscovery {
	t.Helper()
	if opts.JobName == "" {
		opts.JobName = jobName(t)
	}
	if opts.Retry == (zk.RetryPolicy{}) {
		opts.Retry = fastZKRetry
	}
	opts.Logger = quietLog
	if opts.SessionTimeout == 0 {
		opts.SessionTimeout = realSessionTimeout
	}
	d, err := discovery.NewZK(tctx(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// eventually polls cond every 10 ms until it holds or within fails the test.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func queryIs(t *testing.T, d discovery.ServiceDiscovery, name string, want map[int]string) func() bool {
	return func() bool {
		got, err := d.Query(context.Background(), name)
		return err == nil && maps.Equal(got, want)
	}
}

// ownedBy reports whether path exists with data and is an ephemeral node of session.
func ownedBy(c zk.Client, path, data string, session int64) func() bool {
	return func() bool {
		got, st, err := c.Get(context.Background(), path)
		return err == nil && string(got) == data && st.EphemeralOwner == session
	}
}

func TestZKLayout(t *testing.T) {
	leakcheck.Check(t)
	srv := startZK(t)
	other := connectReal(t, srv)
	client := connectReal(t, srv)
	d := newZK(t, discovery.ZKOptions{JobName: "job1", Client: client})
	ctx := tctx(t)
	st, err := other.Exists(ctx, "/monolith/job1")
	if err != nil || st == nil || st.EphemeralOwner != 0 {
		t.Fatalf("the job directory is not a persistent node: %+v, %v", st, err)
	}
	if err := d.Register(ctx, "ps", 0, "127.0.0.1:1000"); err != nil {
		t.Fatal(err)
	}
	session, _ := client.SessionID()
	if !ownedBy(other, "/monolith/job1/ps.0", "127.0.0.1:1000", session)() {
		t.Fatal("ps.0 is not an ephemeral node of the discovery's session holding its address")
	}
	if err := d.Deregister(ctx, "ps", 0, "127.0.0.1:1000"); err != nil {
		t.Fatal(err)
	}
	if st, err := other.Exists(ctx, "/monolith/job1/ps.0"); err != nil || st != nil {
		t.Fatalf("ps.0 after Deregister: %+v, %v", st, err)
	}
}

// TestZKSessionExpiry: after the discovery's session expires, its nodes come back owned by the new
// session, and the cluster map follows what changed meanwhile.
func TestZKSessionExpiry(t *testing.T) {
	leakcheck.Check(t)
	srv := startZK(t)
	other := connectReal(t, srv)
	client := connectReal(t, srv)
	d := newZK(t, discovery.ZKOptions{JobName: "expiry", Client: client})
	peer := newZK(t, discovery.ZKOptions{JobName: "expiry", Servers: srv.Addr()})
	ctx := tctx(t)
	for _, r := range []struct {
		name string
		idx  int
		addr string
	}{{"ps", 0, "127.0.0.1:1000"}, {"worker", 0, "127.0.0.1:2000"}} {
		if err := d.Register(ctx, r.name, r.idx, r.addr); err != nil {
			t.Fatal(err)
		}
	}
	if err := peer.Register(ctx, "ps", 1, "127.0.0.1:1001"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "ps registered", queryIs(t, d, "ps", map[int]string{0: "127.0.0.1:1000", 1: "127.0.0.1:1001"}))

	oldID, passwd := client.SessionID()
	if err := srv.ExpireSession(oldID, passwd); err != nil {
		t.Fatal(err)
	}
	// While the discovery has no session, another server comes up.
	if _, err := other.Create(ctx, "/monolith/expiry/worker.1", []byte("127.0.0.1:2001"), zk.CreateOptions{Ephemeral: true}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 4*realSessionTimeout, "nodes back on the new session", func() bool {
		id, _ := client.SessionID()
		return id != oldID && ownedBy(other, "/monolith/expiry/ps.0", "127.0.0.1:1000", id)() &&
			ownedBy(other, "/monolith/expiry/worker.0", "127.0.0.1:2000", id)()
	})
	eventually(t, 4*realSessionTimeout, "cluster map current after the expiry", func() bool {
		return queryIs(t, d, "worker", map[int]string{0: "127.0.0.1:2000", 1: "127.0.0.1:2001"})() &&
			queryIs(t, d, "ps", map[int]string{0: "127.0.0.1:1000", 1: "127.0.0.1:1001"})()
	})
	// The peer saw the nodes go and come back.
	eventually(t, 4*realSessionTimeout, "peer's map", queryIs(t, peer, "worker", map[int]string{0: "127.0.0.1:2000", 1: "127.0.0.1:2001"}))
}

// TestZKServerRestart: a restart within the session timeout keeps the session and its nodes; the
// watches keep working.
func TestZKServerRestart(t *testing.T) {
	leakcheck.Check(t)
	srv := startZK(t)
	d := newZK(t, discovery.ZKOptions{JobName: "restart", Servers: srv.Addr()})
	peer := newZK(t, discovery.ZKOptions{JobName: "restart", Servers: srv.Addr()})
	ctx := tctx(t)
	if err := d.Register(ctx, "ps", 0, "127.0.0.1:1000"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "peer sees ps.0", queryIs(t, peer, "ps", map[int]string{0: "127.0.0.1:1000"}))
	srv.Restart()
	if err := peer.Register(ctx, "ps", 1, "127.0.0.1:1001"); err != nil {
		t.Fatal(err)
	}
	want := map[int]string{0: "127.0.0.1:1000", 1: "127.0.0.1:1001"}
	eventually(t, 10*time.Second, "both see ps after the restart", func() bool {
		return queryIs(t, d, "ps", want)() && queryIs(t, peer, "ps", want)()
	})
	if err := d.Deregister(ctx, "ps", 0, "127.0.0.1:1000"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "peer sees the deregistration", queryIs(t, peer, "ps", map[int]string{1: "127.0.0.1:1001"}))
}

// TestZKStaleNodeReplaced: a node left by another session (a previous run whose session has not
// expired yet) is replaced by one the discovery's session owns, so it does not vanish with the old
// session. The reference set the data and kept the other session's node.
func TestZKStaleNodeReplaced(t *testing.T) {
	leakcheck.Check(t)
	srv := startZK(t)
	client := connectReal(t, srv)
	observer := connectReal(t, srv)
	stale, err := zkreal.Connect(tctx(t), zkreal.Options{Servers: []string{srv.Addr()}, SessionTimeout: realSessionTimeout, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	defer stale.Close()
	ctx := tctx(t)
	if _, err := stale.Create(ctx, "/monolith/stale/ps.0", []byte("127.0.0.1:9"), zk.CreateOptions{Ephemeral: true, MakePath: true}); err != nil {
		t.Fatal(err)
	}
	d := newZK(t, discovery.ZKOptions{JobName: "stale", Client: client})
	if err := d.Register(ctx, "ps", 0, "127.0.0.1:1000"); err != nil {
		t.Fatal(err)
	}
	stale.Close()
	id, _ := client.SessionID()
	if !ownedBy(observer, "/monolith/stale/ps.0", "127.0.0.1:1000", id)() {
		t.Fatal("ps.0 is not the discovery's own node after the stale session closed")
	}
	eventually(t, 10*time.Second, "map", queryIs(t, d, "ps", map[int]string{0: "127.0.0.1:1000"}))
}

// TestZKReregisterAfterLostSession: on a client without ownership of ephemeral nodes (the fake),
// the discovery itself registers again once a new session follows an expired one.
func TestZKReregisterAfterLostSession(t *testing.T) {
	leakcheck.Check(t)
	srv := zkfake.NewServer()
	client := srv.Client()
	defer client.Close()
	observer := srv.Client()
	defer observer.Close()
	d := newZK(t, discovery.ZKOptions{Client: client, RegistrationPeriod: time.Hour})
	ctx := tctx(t)
	if err := d.Register(ctx, "ps", 0, "127.0.0.1:1000"); err != nil {
		t.Fatal(err)
	}
	path := "/monolith/" + jobName(t) + "/ps.0"
	if err := client.ExpireSession(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "ps.0 registered again on the new session", ownedBy(observer, path, "127.0.0.1:1000", client.SessionID()))
	eventually(t, 5*time.Second, "map", queryIs(t, d, "ps", map[int]string{0: "127.0.0.1:1000"}))
}

// TestZKPeriodicReregistration: a registered node deleted behind the discovery's back is written
// again within a registration period.
func TestZKPeriodicReregistration(t *testing.T) {
	leakcheck.Check(t)
	srv := startZK(t)
	tests := []struct {
		name   string
		client func(t *testing.T) (zk.Client, zk.Client) // the discovery's, another
	}{
		{"real", func(t *testing.T) (zk.Client, zk.Client) { return connectReal(t, srv), connectReal(t, srv) }},
		{"fake", func(t *testing.T) (zk.Client, zk.Client) {
			s := zkfake.NewServer()
			a, b := s.Client(), s.Client()
			t.Cleanup(func() { a.Close(); b.Close() })
			return a, b
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			client, other := tc.client(t)
			d := newZK(t, discovery.ZKOptions{Client: client, RegistrationPeriod: 100 * time.Millisecond})
			ctx := tctx(t)
			if err := d.Register(ctx, "worker", 3, "127.0.0.1:2003"); err != nil {
				t.Fatal(err)
			}
			path := "/monolith/" + jobName(t) + "/worker.3"
			if err := other.Delete(ctx, path, zk.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			eventually(t, 10*time.Second, "worker.3 written again", func() bool {
				data, _, err := other.Get(ctx, path)
				return err == nil && string(data) == "127.0.0.1:2003"
			})
			eventually(t, 10*time.Second, "map", queryIs(t, d, "worker", map[int]string{3: "127.0.0.1:2003"}))
			// A deregistered node is not written again.
			if err := d.Deregister(ctx, "worker", 3, "127.0.0.1:2003"); err != nil {
				t.Fatal(err)
			}
			time.Sleep(300 * time.Millisecond)
			if st, err := other.Exists(ctx, path); err != nil || st != nil {
				t.Fatalf("worker.3 after Deregister and 3 periods: %+v, %v", st, err)
			}
		})
	}
}

func TestZKDeregisterNotRegistered(t *testing.T) {
	leakcheck.Check(t)
	srv := zkfake.NewServer()
	client, other := srv.Client(), srv.Client()
	defer client.Close()
	defer other.Close()
	d := newZK(t, discovery.ZKOptions{Client: client})
	ctx := tctx(t)
	path := "/monolith/" + jobName(t) + "/worker.5"
	if _, err := other.Create(ctx, path, []byte("127.0.0.1:2005"), zk.CreateOptions{Ephemeral: true}); err != nil {
		t.Fatal(err)
	}
	err := d.Deregister(ctx, "worker", 5, "127.0.0.1:2005")
	var nr *discovery.NotRegisteredError
	if !errors.As(err, &nr) || errkind.Of(err) != errkind.NotFound || nr.Name != "worker" || nr.Index != 5 {
		t.Fatalf("Deregister of a node this instance did not register: %v, want a NotRegisteredError of kind NotFound", err)
	}
	if st, _ := other.Exists(ctx, path); st != nil {
		t.Fatal("the node was not deleted (the reference deletes it before raising)")
	}
	// Nothing at all: the same error, and no ZooKeeper error.
	if err := d.Deregister(ctx, "worker", 6, "127.0.0.1:2006"); !errors.As(err, &nr) {
		t.Fatalf("Deregister of a missing node: %v", err)
	}
}

// TestZKClusterMap: the map follows the job directory's nodes: data changes, empty data (no
// address), names that are not <type>.<index> (ignored), server types with dots.
func TestZKClusterMap(t *testing.T) {
	leakcheck.Check(t)
	srv := zkfake.NewServer()
	client, other := srv.Client(), srv.Client()
	defer client.Close()
	defer other.Close()
	d := newZK(t, discovery.ZKOptions{Client: client})
	ctx := tctx(t)
	dir := "/monolith/" + jobName(t)
	create := func(name, data string) {
		t.Helper()
		if _, err := other.Create(ctx, dir+"/"+name, []byte(data), zk.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	set := func(name, data string) {
		t.Helper()
		if _, err := other.Set(ctx, dir+"/"+name, []byte(data), zk.AnyVersion); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		name   string
		do     func()
		query  string
		want   map[int]string
		wantAt map[string]map[int]string
	}{
		{"node created", func() { create("ps.0", "127.0.0.1:1000") }, "", nil, map[string]map[int]string{"ps": {0: "127.0.0.1:1000"}}},
		{"data changed", func() { set("ps.0", "127.0.0.1:1100") }, "", nil, map[string]map[int]string{"ps": {0: "127.0.0.1:1100"}}},
		{"empty data leaves the map", func() { set("ps.0", "") }, "", nil, map[string]map[int]string{"ps": {}}},
		{"data back", func() { set("ps.0", "127.0.0.1:1200") }, "", nil, map[string]map[int]string{"ps": {0: "127.0.0.1:1200"}}},
		{"bad names ignored", func() { create("garbage", "x:1"); create("ps.x", "x:2"); create("ps.-1", "x:3") }, "", nil,
			map[string]map[int]string{"ps": {0: "127.0.0.1:1200"}}},
		{"dotted server type", func() { create("a.b.3", "127.0.0.1:3003") }, "", nil,
			map[string]map[int]string{"ps": {0: "127.0.0.1:1200"}, "a.b": {3: "127.0.0.1:3003"}}},
		{"node deleted", func() {
			if err := other.Delete(ctx, dir+"/ps.0", zk.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}, "", nil, map[string]map[int]string{"ps": {}, "a.b": {3: "127.0.0.1:3003"}}},
		{"job directory deleted", func() {
			if err := other.Delete(ctx, dir, zk.DeleteOptions{Recursive: true}); err != nil {
				t.Fatal(err)
			}
		}, "", nil, map[string]map[int]string{"ps": {}, "a.b": {}}},
		{"job directory back", func() {
			if _, err := other.Create(ctx, dir+"/worker.1", []byte("127.0.0.1:2001"), zk.CreateOptions{MakePath: true}); err != nil {
				t.Fatal(err)
			}
		}, "", nil, map[string]map[int]string{"ps": {}, "a.b": {}, "worker": {1: "127.0.0.1:2001"}}},
	}
	for _, st := range steps {
		st.do()
		for name, want := range st.wantAt {
			if !queryIs(t, d, name, want)() {
				got, _ := d.Query(ctx, name)
				t.Fatalf("%s: Query(%s) = %v, want %v", st.name, name, got, want)
			}
		}
	}
}

func TestZKBadArguments(t *testing.T) {
	leakcheck.Check(t)
	ctx := tctx(t)
	for _, opts := range []discovery.ZKOptions{
		{JobName: "", Servers: "127.0.0.1:1"},
		{JobName: "a/b", Servers: "127.0.0.1:1"},
		{JobName: "job", Servers: ""},
		{JobName: "job", Servers: " , "},
	} {
		if d, err := discovery.NewZK(ctx, opts); err == nil || errkind.Of(err) != errkind.Value {
			if d != nil {
				d.Close()
			}
			t.Errorf("NewZK(%+v) = %v; want an error of kind Value", opts, err)
		}
	}
	client := zkfake.New()
	defer client.Close()
	d := newZK(t, discovery.ZKOptions{Client: client})
	for _, c := range []struct {
		name string
		idx  int
	}{{"", 0}, {"a/b", 0}, {"ps", -1}} {
		if err := d.Register(ctx, c.name, c.idx, "127.0.0.1:1"); errkind.Of(err) != errkind.Value {
			t.Errorf("Register(%q, %d) = %v; want an error of kind Value", c.name, c.idx, err)
		}
	}
}
