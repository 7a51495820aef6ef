package zkmirror

import (
	"context"
	"errors"
	"testing"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkfake"
)

// TestCRUD is zk_mirror_test's test_crud.
func TestCRUD(t *testing.T) {
	leakcheck.Check(t)
	m, c := fakeMirror(t)
	ctx := tctx(t)
	if err := m.EnsurePath(ctx, "/model/crud"); err != nil {
		t.Fatal(err)
	}
	if !m.Exists(ctx, "/model/crud") {
		t.Fatal("/model/crud does not exist after EnsurePath")
	}
	if err := m.Create(ctx, "/model/crud/data", []byte("test"), zk.CreateOptions{MakePath: true}); err != nil {
		t.Fatal(err)
	}
	if v, _, err := c.Get(ctx, "/model/crud/data"); err != nil || string(v) != "test" {
		t.Fatalf("get = %q, %v", v, err)
	}
	// Create on an existing node sets it.
	if err := m.Create(ctx, "/model/crud/data", []byte("again"), zk.CreateOptions{MakePath: true}); err != nil {
		t.Fatal(err)
	}
	if err := m.Set(ctx, "/model/crud/data", []byte("new_test")); err != nil {
		t.Fatal(err)
	}
	if v, _, err := c.Get(ctx, "/model/crud/data"); err != nil || string(v) != "new_test" {
		t.Fatalf("get = %q, %v", v, err)
	}
	// Set on a missing node creates it with its ancestors.
	if err := m.Set(ctx, "/model/other/x", []byte("v")); err != nil {
		t.Fatal(err)
	}
	// A non-recursive delete of a node with children deletes them too (the reference's retry).
	if err := m.Delete(ctx, "/model/crud", false); err != nil {
		t.Fatal(err)
	}
	if m.Exists(ctx, "/model/crud") {
		t.Fatal("/model/crud exists after Delete")
	}
	// A missing node is not an error.
	if err := m.Delete(ctx, "/model/nothing", true); err != nil {
		t.Fatalf("delete of a missing node: %v", err)
	}
	if m.NumTCEShard() != 10 || m.TCEReplicaID() != 2 || m.TCEShardID() != 2 {
		t.Fatalf("num_tce_shard %d, tce_replica_id %d, tce_shard_id %d", m.NumTCEShard(), m.TCEReplicaID(), m.TCEShardID())
	}
	wantPaths := map[string]string{
		m.ResourcePath(): "/bzid/resource", m.PortalPath(): "/bzid/portal", m.PublishPath(): "/bzid/publish",
		m.ServicePath(): "/bzid/service", m.ElectionPath(): "/bzid/election",
	}
	for got, want := range wantPaths {
		if got != want {
			t.Errorf("path %s, want %s", got, want)
		}
	}
}

func TestCreateErrors(t *testing.T) {
	m, _ := fakeMirror(t)
	ctx := tctx(t)
	err := m.Create(ctx, "/no/parent", nil, zk.CreateOptions{})
	if !errors.Is(err, zk.ErrNoNode) || errkind.Of(err) != errkind.NotFound {
		t.Fatalf("create without makepath: %v (kind %v)", err, errkind.Of(err))
	}
	if err := m.Create(ctx, "bad path", nil, zk.CreateOptions{}); !errors.Is(err, zk.ErrInvalidPath) {
		t.Fatalf("create of a bad path: %v", err)
	}
}

// TestExistsFallsBackToMirror: when ZooKeeper cannot answer, Exists answers from the mirror.
func TestExistsFallsBackToMirror(t *testing.T) {
	m, c := fakeMirror(t)
	ctx := tctx(t)
	if err := m.ReportResource(ctx, resource(2, 2)); err != nil {
		t.Fatal(err)
	}
	if err := m.WatchResource(ctx); err != nil {
		t.Fatal(err)
	}
	path := "/bzid/resource/2:2"
	if err := c.Suspend(); err != nil {
		t.Fatal(err)
	}
	defer c.Resume()
	if !m.Exists(ctx, path) {
		t.Error("a mirrored node is missing while ZooKeeper is unreachable")
	}
	if m.Exists(ctx, "/bzid/resource/9:9") {
		t.Error("an unknown node exists while ZooKeeper is unreachable")
	}
}

func TestNewValidates(t *testing.T) {
	c := zkfake.New()
	defer c.Close()
	env := agentconf.MapEnv(map[string]string{"REPLICA_ID": "x"})
	tests := []struct {
		name string
		cfg  Config
	}{
		{"no client", Config{BZID: "b"}},
		{"no bzid", Config{Client: c}},
		{"slash in bzid", Config{Client: c, BZID: "a/b"}},
		{"dot bzid", Config{Client: c, BZID: ".."}},
		{"negative shards", Config{Client: c, BZID: "b", NumShard: -1, ReplicaID: ptr(1)}},
		{"bad REPLICA_ID", Config{Client: c, BZID: "b", Env: env}},
	}
	for _, tc := range tests {
		if _, err := New(tc.cfg); errkind.Of(err) != errkind.Value && !errors.Is(err, zk.ErrInvalidPath) {
			t.Errorf("%s: err %v (kind %v), want a Value error", tc.name, err, errkind.Of(err))
		}
	}
}

func TestReplicaIDFromEnv(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want int
	}{
		{map[string]string{"REPLICA_ID": "7"}, 7},
		{map[string]string{"REPLICA_ID": " 1_2\n"}, 12}, // Python's int(str)
		{map[string]string{}, -1},
		{map[string]string{"MY_POD_NAME": "pod-1"}, agentconf.ReplicaIDFromPodName(agentconf.MapEnv(map[string]string{"MY_POD_NAME": "pod-1"}))},
		{map[string]string{"REPLICA_ID": "-1", "MY_POD_NAME": "pod-1"}, agentconf.ReplicaIDFromPodName(agentconf.MapEnv(map[string]string{"MY_POD_NAME": "pod-1"}))},
	}
	for _, tc := range tests {
		c := zkfake.New()
		m, err := New(Config{Client: c, BZID: "b", Env: agentconf.MapEnv(tc.env), Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		if got := m.TCEReplicaID(); got != tc.want {
			t.Errorf("env %v: replica id %d, want %d", tc.env, got, tc.want)
		}
		if m.NumTCEShard() != 1 || m.DeployType() != agentconf.DeployMixed {
			t.Errorf("defaults: num_tce_shard %d, deploy type %s", m.NumTCEShard(), m.DeployType())
		}
		m.Stop()
		c.Close()
	}
	if pod := agentconf.ReplicaIDFromPodName(agentconf.MapEnv(map[string]string{"MY_POD_NAME": "pod-1"})); pod == -1 {
		t.Fatal("the pod name case tests nothing")
	}
}

// TestStop: Stop unblocks consumers, stops the watches (no more events or mirror changes), and
// later calls fail with ErrStopped; nothing is left running.
func TestStop(t *testing.T) {
	leakcheck.Check(t)
	c := zkfake.New()
	defer c.Close()
	m, err := New(testConfig(c))
	if err != nil {
		t.Fatal(err)
	}
	ctx := tctx(t)
	if err := m.Start(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := m.WatchPortal(ctx); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := m.Queue().Get(ctx)
		got <- err
	}()
	m.Stop()
	if err := <-got; !errors.Is(err, ErrStopped) {
		t.Fatalf("blocked Get returned %v, want ErrStopped", err)
	}
	m.Stop() // idempotent
	// Changes after Stop reach neither the mirror nor the queue.
	if _, err := c.Create(ctx, "/bzid/publish/2:2:m", publish(2, 2, "m", 1, "entry").Serialize(), zk.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, "/bzid/portal/m", nil, zk.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if p := m.MirroredPaths(); len(p) != 0 {
		t.Errorf("mirrored after Stop: %v", p)
	}
	for name, err := range map[string]error{
		"create":       m.Create(ctx, "/x", nil, zk.CreateOptions{}),
		"set":          m.Set(ctx, "/x", nil),
		"delete":       m.Delete(ctx, "/x", true),
		"ensure_path":  m.EnsurePath(ctx, "/x"),
		"watch_portal": m.WatchService(ctx),
		"election":     m.Election("me", func(ctx context.Context) {}),
	} {
		if !errors.Is(err, ErrStopped) {
			t.Errorf("%s after Stop: %v, want ErrStopped", name, err)
		}
	}
}
