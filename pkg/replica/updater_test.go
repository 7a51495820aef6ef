package replica

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	utilsspec "github.com/monolith-go/monolith/gen/spec/agent_service/utils"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/modelconfig"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkfake"
)

const (
	sAvail   = servingapis.ModelVersionStatus_AVAILABLE
	sLoading = servingapis.ModelVersionStatus_LOADING
	sEnd     = servingapis.ModelVersionStatus_END
)

func newUpdater(t testing.TB, c zk.Client, conf *agentconf.AgentConfig, opts UpdaterOptions) *Updater {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	if opts.Resolver == nil {
		opts.Resolver = fixedResolver{}
	}
	u, err := NewUpdater(c, conf, opts)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// tree lists every node under root with its data, and whether it is ephemeral.
func tree(t testing.TB, c zk.Client, root string) map[string]string {
	t.Helper()
	ctx := tctx(t)
	out := map[string]string{}
	var walk func(string)
	walk = func(p string) {
		names, err := c.Children(ctx, p)
		if errors.Is(err, zk.ErrNoNode) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			child := zk.Join(p, n)
			data, st, err := c.Get(ctx, child)
			if err != nil {
				t.Fatal(err)
			}
			v := string(data)
			if st.EphemeralOwner != 0 {
				v = "eph:" + v
			}
			out[child] = v
			walk(child)
		}
	}
	walk(root)
	return out
}

func metaJSON(addr, addr6, archon, archon6 string, stat datadef.ModelState) string {
	m := datadef.NewReplicaMeta()
	m.Address, m.AddressIPv6, m.ArchonAddress, m.ArchonAddressIPv6, m.Stat = &addr, &addr6, &archon, &archon6, stat
	return string(m.Serialize())
}

// TestRegister: which nodes each deploy registers, where, with what (the reference's
// _do_register / register).
func TestRegister(t *testing.T) {
	leakcheck.Check(t)
	ports := map[string]string{"PORT": "9001", "PORT3": "9003", "PORT5": "9005", "PORT7": "9007", "PORT8": "9008", "PORT10": "9010"}
	env := func(extra map[string]string) map[string]string {
		e := map[string]string{"MY_HOST_IP": "10.1.2.3", "MY_HOST_IPV6": "fe80::abcd"}
		for k, v := range ports {
			e[k] = v
		}
		for k, v := range extra {
			e[k] = v
		}
		return e
	}
	node := func(grpc, archon string) string {
		return "eph:" + metaJSON("10.1.2.3:"+grpc, "[fe80::abcd]:"+grpc, "10.1.2.3:"+archon, "[fe80::abcd]:"+archon, unknown)
	}
	tests := []struct {
		name      string
		env       map[string]string
		set       func(f *utilsspec.AgentConfig)
		resolver  HostResolver
		names     []string
		paths     []string
		want      map[string]string // replica nodes (parents left out)
		replicaID int
	}{
		{
			name: "entry with a replica id", env: env(map[string]string{"REPLICA_ID": "5"}),
			set:   func(f *utilsspec.AgentConfig) { f.DeployType, f.AgentVersion = ptr("entry"), 2 },
			names: []string{"entry"}, paths: []string{"/bz/service/mdl/entry:0/00000000005"},
			want:      map[string]string{"/bz/service/mdl/entry:0/00000000005": node("9003", "9001")},
			replicaID: 5,
		},
		{
			name: "entry without one takes a sequence number", env: env(nil),
			set:   func(f *utilsspec.AgentConfig) { f.DeployType = ptr("entry") },
			names: []string{"entry"}, paths: []string{"/bz/service/mdl/entry:0/00000000000"},
			want:      map[string]string{"/bz/service/mdl/entry:0/00000000000": node("9003", "9001")},
			replicaID: 0,
		},
		{
			name: "ps shard 1 of 3", env: env(map[string]string{"REPLICA_ID": "2", "SHARD_ID": "1", "MONOLITH_HOST_SHARD_N": "3"}),
			set:   func(f *utilsspec.AgentConfig) { f.DeployType, f.AgentVersion, f.NumPS = ptr("ps"), 2, 7 },
			names: []string{"ps_1", "ps_4"}, paths: []string{"/bz/service/mdl/ps:1/2", "/bz/service/mdl/ps:4/2"},
			want: map[string]string{
				"/bz/service/mdl/ps:1/2": node("9003", "9001"),
				"/bz/service/mdl/ps:4/2": node("9003", "9001"),
			},
			replicaID: 2,
		},
		{
			name: "mixed, dense alone, dc aware", env: env(map[string]string{"REPLICA_ID": "1", "SHARD_ID": "0", "TCE_INTERNAL_IDC": "LF", "TCE_LOGICAL_CLUSTER": "C1"}),
			set: func(f *utilsspec.AgentConfig) {
				f.DeployType, f.AgentVersion, f.NumPS, f.DenseAlone, f.DCAware = ptr("mixed"), 2, 1, true, true
			},
			names: []string{"ps_0", "entry", "dense_0"},
			paths: []string{"/bz/service/mdl/lf:c1/dense:0/1", "/bz/service/mdl/lf:c1/entry:0/00000000001", "/bz/service/mdl/lf:c1/ps:0/1"},
			want: map[string]string{
				"/bz/service/mdl/lf:c1/dense:0/1":           node("9008", "9010"),
				"/bz/service/mdl/lf:c1/entry:0/00000000001": node("9003", "9001"),
				"/bz/service/mdl/lf:c1/ps:0/1":              node("9005", "9007"),
			},
			replicaID: 1,
		},
		{
			name: "addresses from the host name", env: map[string]string{"PORT": "9001", "PORT3": "9003", "REPLICA_ID": "0", "SHARD_ID": "0"},
			set:      func(f *utilsspec.AgentConfig) { f.DeployType, f.AgentVersion = ptr("ps"), 2 },
			resolver: fixedResolver{v4: "192.168.0.9", v6: "fe80::9"},
			names:    []string{"ps_0"}, paths: []string{"/bz/service/mdl/ps:0/0"},
			want:      map[string]string{"/bz/service/mdl/ps:0/0": "eph:" + metaJSON("192.168.0.9:9003", "[fe80::9]:9003", "192.168.0.9:9001", "[fe80::9]:9001", unknown)},
			replicaID: 0,
		},
		{
			name: "no resolvable address", env: map[string]string{"PORT": "9001", "PORT3": "9003", "REPLICA_ID": "0", "SHARD_ID": "0"},
			set:   func(f *utilsspec.AgentConfig) { f.DeployType, f.AgentVersion = ptr("ps"), 2 },
			names: []string{"ps_0"}, paths: []string{"/bz/service/mdl/ps:0/0"},
			want:      map[string]string{"/bz/service/mdl/ps:0/0": "eph:" + metaJSON("0.0.0.0:9003", "[::]:9003", "0.0.0.0:9001", "[::]:9001", unknown)},
			replicaID: 0,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := zkfake.New()
			defer client.Close()
			conf := newConf(t, tc.env, tc.set)
			confID := *conf.ReplicaID
			u := newUpdater(t, client, conf, UpdaterOptions{Resolver: tc.resolver})
			if got := u.ModelNames(); !reflect.DeepEqual(got, tc.names) {
				t.Errorf("ModelNames = %v, want %v", got, tc.names)
			}
			if err := u.Register(tctx(t)); err != nil {
				t.Fatal(err)
			}
			if got := u.Paths(); !reflect.DeepEqual(got, tc.paths) {
				t.Errorf("Paths = %v, want %v", got, tc.paths)
			}
			if u.ReplicaID() != tc.replicaID {
				t.Errorf("ReplicaID = %d, want %d", u.ReplicaID(), tc.replicaID)
			}
			got := map[string]string{}
			for p, v := range tree(t, client, "/bz") {
				if strings.HasPrefix(v, "eph:") {
					got[p] = v
				} else if v != "" {
					t.Errorf("parent %s holds %q", p, v)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("nodes %v, want %v", got, tc.want)
			}
			if *conf.ReplicaID != confID {
				t.Errorf("the config's replica id changed from %d to %d", confID, *conf.ReplicaID)
			}
		})
	}
}

// TestRegisterSequence: entries without a replica id get successive numbers.
func TestRegisterSequence(t *testing.T) {
	srv := zkfake.NewServer()
	var ids []int
	for i := 0; i < 3; i++ {
		c := srv.Client()
		defer c.Close()
		u := newUpdater(t, c, newConf(t, map[string]string{"MY_HOST_IP": "h"}, func(f *utilsspec.AgentConfig) { f.DeployType = ptr("entry") }), UpdaterOptions{})
		if err := u.Register(tctx(t)); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, u.ReplicaID())
		if want := fmt.Sprintf("/bz/service/mdl/entry:0/%011d", i); !reflect.DeepEqual(u.Paths(), []string{want}) {
			t.Errorf("entry %d registered at %v, want %s", i, u.Paths(), want)
		}
	}
	if !reflect.DeepEqual(ids, []int{0, 1, 2}) {
		t.Errorf("replica ids %v, want [0 1 2]", ids)
	}
}

// TestRegisterExisting: a node already there is rewritten only when its data differs.
func TestRegisterExisting(t *testing.T) {
	client := zkfake.New()
	defer client.Close()
	env := map[string]string{"MY_HOST_IP": "10.1.2.3", "MY_HOST_IPV6": "fe80::1", "PORT": "1", "PORT3": "3", "REPLICA_ID": "0", "SHARD_ID": "0"}
	conf := newConf(t, env, func(f *utilsspec.AgentConfig) { f.DeployType, f.AgentVersion = ptr("ps"), 2 })
	u := newUpdater(t, client, conf, UpdaterOptions{})
	const path = "/bz/service/mdl/ps:0/0"
	put(t, client, path, meta("stale:1", avail))
	if err := u.Register(tctx(t)); err != nil {
		t.Fatal(err)
	}
	data, st, err := client.Get(tctx(t), path)
	if err != nil {
		t.Fatal(err)
	}
	want := metaJSON("10.1.2.3:3", "[fe80::1]:3", "10.1.2.3:1", "[fe80::1]:1", unknown)
	if string(data) != want || st.Version != 1 {
		t.Errorf("rewritten node: %s (version %d), want %s (version 1)", data, st.Version, want)
	}
	if err := u.Register(tctx(t)); err != nil {
		t.Fatal(err)
	}
	if _, st, _ := client.Get(tctx(t), path); st.Version != 1 {
		t.Errorf("an identical node was written again (version %d)", st.Version)
	}
}

// TestRegisterNeedsPorts: a deploy without the ports of its role cannot register.
func TestRegisterNeedsPorts(t *testing.T) {
	client := zkfake.New()
	defer client.Close()
	conf := newConf(t, map[string]string{"MY_HOST_IP": "h"}, func(f *utilsspec.AgentConfig) { f.DeployType = ptr("ps") })
	conf.TFSPSPort = nil
	u := newUpdater(t, client, conf, UpdaterOptions{})
	if err := u.Register(tctx(t)); errkind.Of(err) != errkind.Attribute {
		t.Errorf("Register without tfs_ps_port: %v, want an Attribute error", err)
	}
}

func TestChooseStatus(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []*servingapis.ModelVersionStatus
		want int64
	}{
		{"one", []*servingapis.ModelVersionStatus{vs(3, sLoading)}, 3},
		{"newest available", []*servingapis.ModelVersionStatus{vs(1, sAvail), vs(3, sLoading), vs(2, sAvail)}, 2},
		{"none available: highest", []*servingapis.ModelVersionStatus{vs(1, sEnd), vs(4, sLoading), vs(2, sLoading)}, 4},
	} {
		if got := chooseStatus(tc.in).GetVersion(); got != tc.want {
			t.Errorf("%s: version %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestUpdateOnce: the node's stat follows the reported status; a failed RPC makes it UNKNOWN; a
// status carrying an error changes nothing (and does not hold the other models back); a node that
// vanished is created again.
func TestUpdateOnce(t *testing.T) {
	leakcheck.Check(t)
	env := map[string]string{"MY_HOST_IP": "h", "REPLICA_ID": "0", "SHARD_ID": "0", "MONOLITH_HOST_SHARD_N": "1"}
	conf := newConf(t, env, func(f *utilsspec.AgentConfig) { f.DeployType, f.AgentVersion, f.NumPS = ptr("ps"), 2, 2 })
	client := zkfake.New()
	defer client.Close()
	stub := &statusStub{}
	u := newUpdater(t, client, conf, UpdaterOptions{Status: stub})
	ctx := tctx(t)
	if err := u.Register(ctx); err != nil {
		t.Fatal(err)
	}
	stat := func(path string) datadef.ModelState {
		data, _, err := client.Get(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		m, err := datadef.DeserializeReplicaMeta(data)
		if err != nil {
			t.Fatal(err)
		}
		return m.Stat
	}
	p0, p1 := "/bz/service/mdl/ps:0/0", "/bz/service/mdl/ps:1/0"
	notFound := "not found"

	stub.set("ps_0", vs(1, sAvail), vs(2, sLoading))
	stub.set("ps_1", vs(1, sLoading))
	if err := u.UpdateOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if stat(p0) != avail || stat(p1) != loading {
		t.Fatalf("stats %v %v, want AVAILABLE LOADING", stat(p0), stat(p1))
	}

	// ps_0 reports an error: it keeps its stat; ps_1 is still updated.
	stub.set("ps_0", modelconfig.VersionStatus(-1, servingapis.ModelVersionStatus_UNKNOWN, 5, &notFound))
	stub.set("ps_1", vs(1, sAvail))
	err := u.UpdateOnce(ctx)
	if errkind.Of(err) != errkind.Generic || !strings.Contains(err.Error(), notFound) {
		t.Errorf("UpdateOnce with an error status: %v, want a Generic error naming it", err)
	}
	if stat(p0) != avail || stat(p1) != avail {
		t.Errorf("stats %v %v, want AVAILABLE AVAILABLE", stat(p0), stat(p1))
	}

	// The node vanished (deleted by hand): the next change creates it again, ephemeral.
	del(t, client, p1)
	stub.set("ps_1", vs(2, sLoading))
	if err := u.UpdateOnce(ctx); err == nil {
		t.Error("the error status of ps_0 went unreported")
	}
	if _, st, err := client.Get(ctx, p1); err != nil || st.EphemeralOwner == 0 || stat(p1) != loading {
		t.Errorf("re-created node: %v, owner %x, stat %v", err, st.EphemeralOwner, stat(p1))
	}

	// TF Serving unreachable: UNKNOWN.
	stub.fail(errors.New("connection refused"))
	if err := u.UpdateOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if stat(p0) != unknown || stat(p1) != unknown {
		t.Errorf("stats %v %v, want UNKNOWN UNKNOWN", stat(p0), stat(p1))
	}
	before := tree(t, client, "/bz")
	if err := u.UpdateOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if after := tree(t, client, "/bz"); !reflect.DeepEqual(before, after) {
		t.Errorf("an unchanged stat was written again")
	}
}

// TestUpdateWriteFailure: a stat whose write failed is written again on the next round.
func TestUpdateWriteFailure(t *testing.T) {
	srv := zkfake.NewServer()
	client := srv.Client()
	defer client.Close()
	env := map[string]string{"MY_HOST_IP": "h", "REPLICA_ID": "0", "SHARD_ID": "0"}
	conf := newConf(t, env, func(f *utilsspec.AgentConfig) { f.DeployType, f.AgentVersion = ptr("ps"), 2 })
	stub := &statusStub{}
	u := newUpdater(t, client, conf, UpdaterOptions{Status: stub, Retry: zk.RetryPolicy{MaxTries: 1}})
	ctx := tctx(t)
	if err := u.Register(ctx); err != nil {
		t.Fatal(err)
	}
	stub.set("ps_0", vs(1, sAvail))
	if err := client.Suspend(); err != nil {
		t.Fatal(err)
	}
	if err := u.UpdateOnce(ctx); !errors.Is(err, zk.ErrConnectionLoss) {
		t.Errorf("UpdateOnce while suspended: %v", err)
	}
	if err := client.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := u.UpdateOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if m, _ := u.Meta("/bz/service/mdl/ps:0/0"); m.Stat != avail {
		t.Errorf("stat after the retry: %v", m.Stat)
	}
}

// TestUpdaterWithFakeTFS: the updater's loop against a fake TF Serving over gRPC, through the
// default status source (a tfs.Monitor it owns).
func TestUpdaterWithFakeTFS(t *testing.T) {
	leakcheck.Check(t)
	tfsSrv := startTFS(t, "ps_0", "ps_2", "entry")
	env := tfsEnv(tfsSrv.Port(), map[string]string{"REPLICA_ID": "4", "SHARD_ID": "0", "MONOLITH_HOST_SHARD_N": "2"})
	conf := newConf(t, env, func(f *utilsspec.AgentConfig) {
		f.DeployType, f.AgentVersion, f.NumPS, f.NumShard = ptr("mixed"), 2, 3, ptr(2)
	})
	client := zkfake.New()
	defer client.Close()
	u := newUpdater(t, client, conf, UpdaterOptions{Status: monitor(t, conf), UpdateInterval: 5 * time.Millisecond})
	if err := u.Register(tctx(t)); err != nil {
		t.Fatal(err)
	}
	if err := u.Start(); err != nil {
		t.Fatal(err)
	}
	defer u.Stop()
	stats := func() []string {
		var out []string
		for p, v := range tree(t, client, "/bz") {
			if v == "" {
				continue
			}
			m, err := datadef.DeserializeReplicaMeta([]byte(strings.TrimPrefix(v, "eph:")))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, p+"="+m.Stat.String())
		}
		sort.Strings(out)
		return out
	}
	tfsSrv.Tick() // START
	tfsSrv.Tick() // LOADING
	want := []string{"/bz/service/mdl/entry:0/00000000004=LOADING", "/bz/service/mdl/ps:0/4=LOADING", "/bz/service/mdl/ps:2/4=LOADING"}
	eventually(t, 5*time.Second, "LOADING reported", func() bool { return reflect.DeepEqual(stats(), want) })
	tfsSrv.Drain()
	want = []string{"/bz/service/mdl/entry:0/00000000004=AVAILABLE", "/bz/service/mdl/ps:0/4=AVAILABLE", "/bz/service/mdl/ps:2/4=AVAILABLE"}
	eventually(t, 5*time.Second, "AVAILABLE reported", func() bool { return reflect.DeepEqual(stats(), want) })
	// TF Serving goes away: UNKNOWN.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tfsSrv.Stop(ctx)
	want = []string{"/bz/service/mdl/entry:0/00000000004=UNKNOWN", "/bz/service/mdl/ps:0/4=UNKNOWN", "/bz/service/mdl/ps:2/4=UNKNOWN"}
	eventually(t, 10*time.Second, "UNKNOWN reported", func() bool { return reflect.DeepEqual(stats(), want) })
}

// TestUpdaterLoopPauses: a paused updater writes nothing; kicked after resuming, it writes at once.
func TestUpdaterLoopPauses(t *testing.T) {
	leakcheck.Check(t)
	client := zkfake.New()
	defer client.Close()
	env := map[string]string{"MY_HOST_IP": "h", "REPLICA_ID": "0", "SHARD_ID": "0"}
	stub := &statusStub{}
	u := newUpdater(t, client, newConf(t, env, func(f *utilsspec.AgentConfig) { f.DeployType, f.AgentVersion = ptr("ps"), 2 }),
		UpdaterOptions{Status: stub, UpdateInterval: time.Hour})
	if err := u.Register(tctx(t)); err != nil {
		t.Fatal(err)
	}
	stub.set("ps_0", vs(1, sAvail))
	if err := u.Start(); err != nil {
		t.Fatal(err)
	}
	if err := u.Start(); errkind.Of(err) != errkind.Runtime {
		t.Errorf("second Start: %v", err)
	}
	u.setPaused(true)
	u.kickUpdate()
	// The kicked round skips while paused: give it the chance, then look.
	for i := 0; i < 20; i++ {
		stub.mu.Lock()
		calls := stub.calls
		stub.mu.Unlock()
		if calls != 0 {
			t.Fatal("a paused updater asked for the status")
		}
		time.Sleep(time.Millisecond)
	}
	u.setPaused(false)
	u.kickUpdate()
	eventually(t, 5*time.Second, "kicked update", func() bool {
		m, _ := u.Meta("/bz/service/mdl/ps:0/0")
		return m.Stat == avail
	})
	u.Stop()
	if len(u.Paths()) != 0 {
		t.Errorf("Stop kept %v", u.Paths())
	}
}

// recorder is a Metrics client that keeps what it gets.
type recorder struct {
	mu      sync.Mutex
	lines   []string
	flushes int
}

func (r *recorder) EmitStore(name string, value int64, tags map[string]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k+"="+tags[k])
	}
	sort.Strings(keys)
	r.lines = append(r.lines, fmt.Sprintf("%s %d %s", name, value, strings.Join(keys, ",")))
}

func (r *recorder) Flush() { r.mu.Lock(); r.flushes++; r.mu.Unlock() }

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.lines
	r.lines = nil
	return out
}

func TestVersionMetrics(t *testing.T) {
	client := zkfake.New()
	defer client.Close()
	env := map[string]string{"MY_HOST_IP": "h", "REPLICA_ID": "3", "SHARD_ID": "0", "TCE_INTERNAL_IDC": "LF"}
	stub := &statusStub{}
	var local, global recorder
	now := time.Unix(1000, 0)
	u := newUpdater(t, client, newConf(t, env, func(f *utilsspec.AgentConfig) { f.DeployType, f.AgentVersion = ptr("ps"), 2 }),
		UpdaterOptions{Status: stub, Metrics: &local, GlobalMetrics: &global, Now: func() time.Time { return now }})
	ctx := tctx(t)
	tags := "base_name=mdl,idc=lf:None,model_name=ps_0,replica_id=3,shard_id=0"

	stub.set("ps_0", vs(1, sAvail), vs(2, sLoading))
	if err := u.CheckVersions(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := local.take(), []string{"serving_model.latest_version 2 " + tags, "serving_model.update_ts 1000 " + tags}; !reflect.DeepEqual(got, want) {
		t.Errorf("first round %v, want %v", got, want)
	}
	if got := global.take(); len(got) != 0 {
		t.Errorf("global metrics on the first round: %v", got)
	}
	now = now.Add(30 * time.Second)
	if err := u.CheckVersions(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := local.take(), []string{"serving_model.latest_version 2 " + tags}; !reflect.DeepEqual(got, want) {
		t.Errorf("same version %v, want %v", got, want)
	}
	if got, want := global.take(), []string{"serving_model.since_last_update 30 " + tags}; !reflect.DeepEqual(got, want) {
		t.Errorf("global %v, want %v", got, want)
	}
	stub.set("ps_0", vs(3, sLoading))
	if err := u.CheckVersions(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := local.take(), []string{"serving_model.latest_version 3 " + tags, "serving_model.update_ts 1030 " + tags}; !reflect.DeepEqual(got, want) {
		t.Errorf("newer version %v, want %v", got, want)
	}
	if local.flushes != 3 {
		t.Errorf("%d flushes, want 3", local.flushes)
	}
	stub.fail(errors.New("down"))
	if err := u.CheckVersions(ctx); err == nil {
		t.Error("a failed status read went unreported")
	}

	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"MONOLITH_METRIC_PREFIX": "mlp", "TCE_PSM": "psm"}, "mlp"},
		{map[string]string{"TCE_PSM": "psm"}, "psm"},
		{nil, "data.monolith_serving.mdl"},
	} {
		if got := MetricsPrefix(agentconf.MapEnv(tc.env), "mdl"); got != tc.want {
			t.Errorf("MetricsPrefix(%v) = %q, want %q", tc.env, got, tc.want)
		}
	}
}

func TestNewUpdaterErrors(t *testing.T) {
	client := zkfake.New()
	defer client.Close()
	for _, tc := range []struct {
		name string
		env  map[string]string
		set  func(f *utilsspec.AgentConfig)
		kind errkind.Kind
	}{
		{"bad SHARD_ID", map[string]string{"SHARD_ID": "x"}, func(f *utilsspec.AgentConfig) { f.DeployType = ptr("ps") }, errkind.Value},
		{"dc aware without a location", nil, func(f *utilsspec.AgentConfig) { f.DeployType, f.DCAware = ptr("ps"), true }, errkind.Type},
	} {
		conf := newConf(t, tc.env, tc.set)
		if _, err := NewUpdater(client, conf, UpdaterOptions{}); errkind.Of(err) != tc.kind {
			t.Errorf("%s: %v, want kind %v", tc.name, err, tc.kind)
		}
	}
}
