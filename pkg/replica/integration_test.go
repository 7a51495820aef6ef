package replica

import (
	"context"
	"reflect"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkreal"
	"github.com/monolith-go/monolith/pkg/zk/zktest"
)

// realSessionTimeout is the session timeout of the real clients (the server's tick is 200 ms, so
// it is granted as asked).
const realSessionTimeout = 2 * time.Second

// startAvailable starts a manager of referenceConf(1) on its own real session under chroot, its
// TF Serving stub reporting every model AVAILABLE and updates every 20 ms; it returns the
// manager (stopped at cleanup), its client, an observer's client and its config. There is no
// periodic reconciliation: Stop cancelling one in flight trips a data race in zkreal's call (its
// abandoned library call writes the caller's result variables).
func startAvailable(t *testing.T, srv *zktest.Server, chroot string) (m *Manager, client, observer *zkreal.Client, conf *agentconf.AgentConfig) {
	t.Helper()
	client, observer = connectReal(t, srv, chroot), connectReal(t, srv, chroot)
	conf = referenceConf(t, 1)
	stub := &statusStub{}
	for _, n := range []string{"ps_1", "ps_6", "ps_11", "ps_16", "entry"} {
		stub.set(n, vs(1, sAvail))
	}
	m = newManager(t, client, conf, ManagerOptions{
		Watcher: WatcherOptions{PollInterval: time.Hour},
		Updater: UpdaterOptions{Status: stub, UpdateInterval: 20 * time.Millisecond}})
	if err := m.Start(tctx(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	return m, client, observer, conf
}

func connectReal(t testing.TB, srv *zktest.Server, chroot string) *zkreal.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := zkreal.Connect(ctx, zkreal.Options{Servers: []string{srv.Addr()}, SessionTimeout: realSessionTimeout,
		Chroot: chroot, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestRealZooKeeper runs the watcher and the manager against a real ZooKeeper server (one for
// every subtest, each in its own chroot).
func TestRealZooKeeper(t *testing.T) {
	srv := zktest.Start(t, zktest.WithTickTime(200*time.Millisecond))

	// The manager's session is killed; its replicas are back on the new session within twice the
	// session timeout, and its watches deliver what changed meanwhile and what changes afterwards.
	t.Run("session expiry", func(t *testing.T) {
		leakcheck.Check(t)
		m, client, observer, conf := startAvailable(t, srv, "/expiry")
		ctx := tctx(t)
		const other = "/bz/service/test_model/lf:default/ps:0/0"
		put(t, observer, other, meta("192.168.0.1:1", avail))
		own := m.Updater().Paths()
		here := ConfDC(conf)
		eventually(t, 5*time.Second, "started", func() bool {
			return allAre(ownStats(t, observer, own), "AVAILABLE") && len(m.GetReplicas(psType, 0, here)) == 1
		})

		var connectedAt atomic.Int64
		lost := false
		remove := client.AddListener(func(s zk.State) {
			switch {
			case s == zk.StateLost:
				lost = true
			case s == zk.StateConnected && lost:
				connectedAt.Store(time.Now().UnixNano())
			}
		})
		defer remove()
		oldID, passwd := client.SessionID()
		if err := srv.ExpireSession(oldID, passwd); err != nil {
			t.Fatal(err)
		}
		expired := time.Now()
		// Meanwhile another replica changes and a new one comes.
		put(t, observer, other, meta("192.168.0.1:1", loading))
		put(t, observer, "/bz/service/test_model/lf:default/ps:0/1", meta("192.168.0.2:1", avail))
		eventually(t, 2*realSessionTimeout, "registrations back and watches current", func() bool {
			id, _ := client.SessionID()
			if id == oldID || !allAre(ownStats(t, observer, own), "AVAILABLE") {
				return false
			}
			for _, p := range own {
				if st, err := observer.Exists(ctx, p); err != nil || st == nil || st.EphemeralOwner != id {
					return false
				}
			}
			return reflect.DeepEqual(m.GetReplicas(psType, 0, here), []string{"192.168.0.2:1"}) &&
				len(m.GetReplica(psType, 6, 2, here)) == 1
		})
		t.Logf("recovered %v after the expiry, %v after the new session was announced", time.Since(expired).Round(time.Millisecond),
			time.Since(time.Unix(0, connectedAt.Load())).Round(time.Millisecond))
		put(t, observer, other, meta("192.168.0.1:1", avail))
		eventually(t, 5*time.Second, "a change after recovery", func() bool {
			return reflect.DeepEqual(m.GetReplicas(psType, 0, here), []string{"192.168.0.1:1", "192.168.0.2:1"})
		})
	})

	// The watch chain on a real server: new locations, tasks and replicas, changes, deletions,
	// quick re-creations; and a reconciliation that agrees with it.
	t.Run("watches", func(t *testing.T) {
		leakcheck.Check(t)
		client, writer := connectReal(t, srv, "/watches"), connectReal(t, srv, "/watches")
		const p = "/bz/service/mdl"
		put(t, writer, p+"/lf:c1/ps:0/1", meta("a:1", avail))
		put(t, writer, p+"/lf:c1/ps:0/00000000002", meta("b:1", loading))
		w := startWatcher(t, client, watcherConf(t, true), WatcherOptions{})
		want := map[string][]string{p + "/lf:c1/ps:0": {"1=AVAILABLE@a:1", "2=LOADING@b:1"}}
		if got := summary(w); !reflect.DeepEqual(got, want) {
			t.Fatalf("initial cache %v, want %v", got, want)
		}
		steps := []struct {
			name   string
			change func()
			want   map[string][]string
		}{
			{"stat change", func() { put(t, writer, p+"/lf:c1/ps:0/00000000002", meta("b:1", avail)) },
				map[string][]string{p + "/lf:c1/ps:0": {"1=AVAILABLE@a:1", "2=AVAILABLE@b:1"}}},
			{"new location", func() { put(t, writer, p+"/hl:c2/dense:0/0", meta("d:1", avail)) },
				map[string][]string{p + "/lf:c1/ps:0": {"1=AVAILABLE@a:1", "2=AVAILABLE@b:1"}, p + "/hl:c2/dense:0": {"0=AVAILABLE@d:1"}}},
			{"deletion", func() { del(t, writer, p+"/lf:c1/ps:0/1") },
				map[string][]string{p + "/lf:c1/ps:0": {"2=AVAILABLE@b:1"}, p + "/hl:c2/dense:0": {"0=AVAILABLE@d:1"}}},
			{"quick re-creation", func() {
				del(t, writer, p+"/hl:c2/dense:0/0")
				put(t, writer, p+"/hl:c2/dense:0/0", meta("d:2", avail))
			}, map[string][]string{p + "/lf:c1/ps:0": {"2=AVAILABLE@b:1"}, p + "/hl:c2/dense:0": {"0=AVAILABLE@d:2"}}},
		}
		for _, s := range steps {
			s.change()
			eventually(t, 5*time.Second, s.name, func() bool { return reflect.DeepEqual(summary(w), s.want) })
		}
		if err := w.Reconcile(tctx(t)); err != nil {
			t.Fatal(err)
		}
		if got := summary(w); !reflect.DeepEqual(got, steps[len(steps)-1].want) {
			t.Errorf("after reconciling: %v", got)
		}
		// Every node is watched once: one slot per location, task and replica, plus the root.
		w.mu.Lock()
		var slots []string
		for path := range w.slots {
			slots = append(slots, path)
		}
		w.mu.Unlock()
		sort.Strings(slots)
		wantSlots := []string{p, p + "/hl:c2", p + "/hl:c2/dense:0", p + "/hl:c2/dense:0/0", p + "/lf:c1", p + "/lf:c1/ps:0", p + "/lf:c1/ps:0/00000000002"}
		if !reflect.DeepEqual(slots, wantSlots) {
			t.Errorf("watched %v, want %v", slots, wantSlots)
		}
	})
}
