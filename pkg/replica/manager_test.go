package replica

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	utilsspec "github.com/monolith-go/monolith/gen/spec/agent_service/utils"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkfake"
)

// referenceConf is replica_manager_test.py's setUpClass config: shard 1 of 5, replica 2, 20 PS,
// mixed, dc aware in lf:default; its TF Serving roles all on tfsPort.
func referenceConf(t testing.TB, tfsPort int) *agentconf.AgentConfig {
	env := tfsEnv(tfsPort, map[string]string{
		"MY_HOST_IP": "10.9.9.9", "MONOLITH_HOST_SHARD_N": "5", "SHARD_ID": "1", "REPLICA_ID": "2",
		"TCE_INTERNAL_IDC": "lf", "TCE_LOGICAL_CLUSTER": "default",
	})
	return newConf(t, env, func(f *utilsspec.AgentConfig) {
		f.BaseName, f.BasePath = ptr("test_model"), ptr("/model/test_model/saved_models")
		f.DeployType, f.AgentVersion, f.NumPS, f.NumShard, f.DCAware = ptr("mixed"), 2, 20, ptr(5), true
	})
}

// registerOthers is replica_manager_test.py's register(zk): every other (replica, shard) of 3
// replicas registers its PS tasks and entry:0, AVAILABLE.
func registerOthers(t testing.TB, c zk.Client, conf *agentconf.AgentConfig) {
	t.Helper()
	prefix, err := conf.PathPrefix()
	if err != nil {
		t.Fatal(err)
	}
	shard, _ := conf.ShardID()
	idx := 2
	for replica := 0; replica < 3; replica++ {
		for s := 0; s < *conf.NumShard; s++ {
			if s == shard && replica == *conf.ReplicaID {
				continue
			}
			for task := 0; task < conf.NumPS; task++ {
				if task%*conf.NumShard == s {
					put(t, c, fmt.Sprintf("%s/ps:%d/%d", prefix, task, replica), meta(fmt.Sprintf("192.168.1.%d:%d", idx, 5000+idx), avail))
					idx++
				}
			}
			put(t, c, fmt.Sprintf("%s/entry:0/%d", prefix, replica), meta(fmt.Sprintf("192.168.1.%d:%d", idx, 5000+idx), avail))
			idx++
		}
	}
}

func newManager(t testing.TB, c zk.Client, conf *agentconf.AgentConfig, opts ManagerOptions) *Manager {
	t.Helper()
	opts.Logger = quiet
	if opts.Watcher.PollInterval == 0 {
		opts.Watcher.PollInterval = -1
	}
	if opts.Updater.Resolver == nil {
		opts.Updater.Resolver = fixedResolver{}
	}
	m, err := NewManager(c, conf, opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// ownStats reads this host's registered nodes: path -> stat, "" for a missing node.
func ownStats(t testing.TB, c zk.Client, paths []string) map[string]string {
	out := map[string]string{}
	for _, p := range paths {
		data, _, err := c.Get(tctx(t), p)
		if err != nil {
			out[p] = ""
			continue
		}
		m, err := datadef.DeserializeReplicaMeta(data)
		if err != nil {
			t.Fatal(err)
		}
		out[p] = m.Stat.String()
	}
	return out
}

func allAre(stats map[string]string, want string) bool {
	for _, s := range stats {
		if s != want {
			return false
		}
	}
	return len(stats) > 0
}

// TestManagerReferenceScenario: the reference test's fixture, with the assertions it lacked: the
// manager registers its shard's replicas, reports them AVAILABLE once TF Serving has loaded them,
// and sees the whole PS set.
func TestManagerReferenceScenario(t *testing.T) {
	leakcheck.Check(t)
	tfsSrv := startTFS(t, "ps_1", "ps_6", "ps_11", "ps_16", "entry")
	conf := referenceConf(t, tfsSrv.Port())
	srv := zkfake.NewServer()
	others, client := srv.Client(), srv.Client()
	defer others.Close()
	defer client.Close()
	m := newManager(t, client, conf, ManagerOptions{Updater: UpdaterOptions{Status: monitor(t, conf), UpdateInterval: 5 * time.Millisecond}})
	if err := m.Start(tctx(t)); err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	if err := m.Start(tctx(t)); errkind.Of(err) != errkind.Runtime {
		t.Errorf("second Start: %v", err)
	}
	registerOthers(t, others, conf)
	own := m.Updater().Paths()
	wantOwn := []string{
		"/bz/service/test_model/lf:default/entry:0/00000000002",
		"/bz/service/test_model/lf:default/ps:1/2", "/bz/service/test_model/lf:default/ps:11/2",
		"/bz/service/test_model/lf:default/ps:16/2", "/bz/service/test_model/lf:default/ps:6/2",
	}
	if !reflect.DeepEqual(own, wantOwn) {
		t.Fatalf("own nodes %v, want %v", own, wantOwn)
	}
	if !m.IsPSSetStarted() {
		t.Error("the other replicas make up a PS set")
	}
	if m.IsDenseSetStarted() {
		t.Error("no dense replica runs")
	}
	here := ConfDC(conf)
	if got := m.GetReplica(psType, 6, 2, here); len(got) != 0 {
		t.Errorf("own replica listed before TF Serving loaded it: %v", got)
	}
	tfsSrv.Drain()
	eventually(t, 5*time.Second, "own replicas AVAILABLE", func() bool { return allAre(ownStats(t, others, own), "AVAILABLE") })
	addr := fmt.Sprintf("10.9.9.9:%d", tfsSrv.Port())
	if got := m.GetReplica(psType, 6, 2, here); !reflect.DeepEqual(got, []string{addr}) {
		t.Errorf("GetReplica(PS, 6, 2) = %v, want [%s]", got, addr)
	}
	all := m.GetAllReplicas(psType, here)
	if len(all) != 20 {
		t.Errorf("GetAllReplicas(PS) has %d tasks, want 20", len(all))
	}
	for task, addrs := range all {
		if len(addrs) != 3 {
			t.Errorf("task %s has %d replicas, want 3: %v", task, len(addrs), addrs)
		}
	}
	if got := m.GetReplicas(psType, 16, nil); len(got) != 3 || got[0] != addr {
		t.Errorf("GetReplicas(PS, 16) = %v: want 3, own first (registered first)", got)
	}
}

// TestManagerSessionExpiry: after the session expires, the replicas are registered on the new
// session and their stat comes back.
func TestManagerSessionExpiry(t *testing.T) {
	leakcheck.Check(t)
	conf := referenceConf(t, 1)
	srv := zkfake.NewServer()
	observer, client := srv.Client(), srv.Client()
	defer observer.Close()
	defer client.Close()
	stub := &statusStub{}
	for _, n := range []string{"ps_1", "ps_6", "ps_11", "ps_16", "entry"} {
		stub.set(n, vs(1, sAvail))
	}
	m := newManager(t, client, conf, ManagerOptions{Updater: UpdaterOptions{Status: stub, UpdateInterval: 5 * time.Millisecond}})
	if err := m.Start(tctx(t)); err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	own := m.Updater().Paths()
	eventually(t, 5*time.Second, "own replicas AVAILABLE", func() bool { return allAre(ownStats(t, observer, own), "AVAILABLE") })
	oldSession := client.SessionID()

	if err := client.ExpireSession(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "own replicas back AVAILABLE on the new session", func() bool {
		if !allAre(ownStats(t, observer, own), "AVAILABLE") {
			return false
		}
		for _, p := range own {
			if st, err := observer.Exists(tctx(t), p); err != nil || st == nil || st.EphemeralOwner != client.SessionID() {
				return false
			}
		}
		return true
	})
	if client.SessionID() == oldSession {
		t.Fatal("the session did not change")
	}
	eventually(t, 5*time.Second, "the watcher sees them", func() bool {
		return len(m.GetReplica(psType, 1, 2, ConfDC(conf))) == 1
	})
	if m.Updater().paused.Load() {
		t.Error("status updates still paused")
	}
	m.Watcher().mu.Lock()
	paused := m.Watcher().pollPaused
	m.Watcher().mu.Unlock()
	if paused {
		t.Error("reconciliation still paused")
	}
}

// TestManagerListenerDoesNotBlock: the connection listener returns while the re-registration is
// still under way (here held up), updates stay paused until it is done, then resume.
func TestManagerListenerDoesNotBlock(t *testing.T) {
	leakcheck.Check(t)
	conf := referenceConf(t, 1)
	srv := zkfake.NewServer()
	observer := srv.Client()
	defer observer.Close()
	fake := srv.Client()
	h := newHookClient(fake)
	defer h.Close()
	stub := &statusStub{}
	for _, n := range []string{"ps_1", "ps_6", "ps_11", "ps_16", "entry"} {
		stub.set(n, vs(1, sAvail))
	}
	m := newManager(t, h, conf, ManagerOptions{Updater: UpdaterOptions{Status: stub, UpdateInterval: 5 * time.Millisecond}})
	if err := m.Start(tctx(t)); err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	own := m.Updater().Paths()
	eventually(t, 5*time.Second, "own replicas AVAILABLE", func() bool { return allAre(ownStats(t, observer, own), "AVAILABLE") })

	gate := make(chan struct{})
	h.mu.Lock()
	h.creates = gate
	h.mu.Unlock()
	// zkfake calls the listeners inside ExpireSession: it returns only once they have.
	if err := fake.ExpireSession(); err != nil {
		t.Fatal(err)
	}
	if !m.Updater().paused.Load() {
		t.Error("status updates not paused after LOST")
	}
	if got := ownStats(t, observer, own); !allAre(got, "") {
		t.Errorf("own nodes %v: re-created while creates are held", got)
	}
	close(gate)
	// The nodes come back AVAILABLE at once (a re-registration keeps the last stat); the updates
	// resume once all are back.
	eventually(t, 5*time.Second, "own replicas back and status updates resumed", func() bool {
		return allAre(ownStats(t, observer, own), "AVAILABLE") && !m.Updater().paused.Load()
	})
}

// TestManagerRestoresMissingNode: an own node deleted behind the manager's back is re-created by
// the reconciliation with its last stat (no UNKNOWN flap), and others are left alone.
func TestManagerRestoresMissingNode(t *testing.T) {
	leakcheck.Check(t)
	conf := referenceConf(t, 1)
	srv := zkfake.NewServer()
	observer, client := srv.Client(), srv.Client()
	defer observer.Close()
	defer client.Close()
	stub := &statusStub{}
	for _, n := range []string{"ps_1", "ps_6", "ps_11", "ps_16", "entry"} {
		stub.set(n, vs(1, sAvail))
	}
	m := newManager(t, client, conf, ManagerOptions{Updater: UpdaterOptions{Status: stub, UpdateInterval: time.Hour}})
	if err := m.Start(tctx(t)); err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	if err := m.Updater().UpdateOnce(tctx(t)); err != nil {
		t.Fatal(err)
	}
	own := m.Updater().Paths()
	victim := "/bz/service/test_model/lf:default/ps:6/2"
	_, before, err := observer.Get(tctx(t), own[0])
	if err != nil {
		t.Fatal(err)
	}
	del(t, observer, victim)
	if err := m.Watcher().Reconcile(tctx(t)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the missing node re-created", func() bool { return allAre(ownStats(t, observer, own), "AVAILABLE") })
	if _, after, _ := observer.Get(tctx(t), own[0]); after.Version != before.Version {
		t.Errorf("a node that was there got rewritten (version %d -> %d)", before.Version, after.Version)
	}
}

// TestManagerStartFails: a failed start leaves nothing running.
func TestManagerStartFails(t *testing.T) {
	leakcheck.Check(t)
	client := zkfake.New()
	conf := referenceConf(t, 1)
	m := newManager(t, client, conf, ManagerOptions{Updater: UpdaterOptions{Status: &statusStub{}}})
	client.Close()
	if err := m.Start(tctx(t)); err == nil {
		t.Fatal("Start on a closed client succeeded")
	}
	m.Stop() // a no-op
}
