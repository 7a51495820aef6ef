package zkmirror

import (
	"slices"
	"testing"

	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/zk"
)

// TestWatchPortal: publishes of models missing from the portal are deleted at the start; a PORTAL
// event per model node found (NONE), created (CREATED) and deleted (DELETED); no event for data
// changes; a second WatchPortal sets nothing twice.
func TestWatchPortal(t *testing.T) {
	m, c := fakeMirror(t)
	ctx := tctx(t)
	mk := func(p string, data []byte) {
		t.Helper()
		if _, err := c.Create(ctx, p, data, zk.CreateOptions{MakePath: true}); err != nil {
			t.Fatal(err)
		}
	}
	mm := datadef.NewModelMeta()
	mm.ModelName, mm.NumShard = ptr("kept"), 3
	mk("/bzid/portal/kept", mm.Serialize())
	mk("/bzid/portal/empty", nil)
	mk("/bzid/publish/1:0:kept", publish(1, 0, "kept", 9, "entry").Serialize())
	mk("/bzid/publish/1:0:gone", publish(1, 0, "gone", 9, "entry").Serialize())
	mk("/bzid/publish/2:0:xgone", publish(2, 0, "xgone", 9, "entry").Serialize())
	events(m) // the publish watch's events are not what this test is about
	for range 2 {
		if err := m.WatchPortal(ctx); err != nil {
			t.Fatal(err)
		}
	}
	left, err := c.Children(ctx, "/bzid/publish")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(left, []string{"1:0:kept"}) {
		t.Fatalf("publishes left %v", left)
	}
	type got struct{ path, action, model string }
	read := func() []got {
		var out []got
		for _, ev := range events(m) {
			if ev.EType != datadef.EventPortal {
				continue
			}
			mm, err := datadef.DeserializeModelMeta(ev.Data)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, got{*ev.Path, mm.Action, *mm.ModelName})
		}
		return out
	}
	if evs := read(); !slices.Equal(evs, []got{{"/bzid/portal/empty", "NONE", "empty"}, {"/bzid/portal/kept", "NONE", "kept"}}) {
		t.Fatalf("start events %v", evs)
	}
	mk("/bzid/portal/new", nil)
	if _, err := c.Set(ctx, "/bzid/portal/kept", []byte(`{"model_name": "kept"}`), zk.AnyVersion); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, "/bzid/portal/kept", zk.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	mk("/bzid/portal/kept", nil) // the model's data watch lives on: CREATED
	if evs := read(); !slices.Equal(evs, []got{
		{"/bzid/portal/new", "NONE", "new"}, // found by the children watch: its first call
		{"/bzid/portal/kept", "DELETED", "kept"},
		{"/bzid/portal/kept", "CREATED", "kept"},
	}) {
		t.Fatalf("events %v", evs)
	}
}

// TestWatchResource: the resource node need not exist when the watch is set; resources come and
// go with their nodes.
func TestWatchResource(t *testing.T) {
	m, c := fakeMirror(t)
	ctx := tctx(t)
	if err := m.WatchResource(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.ReportResource(ctx, resource(2, 2)); err != nil {
		t.Fatal(err)
	}
	if err := m.ReportResource(ctx, resource(3, 2)); err != nil {
		t.Fatal(err)
	}
	if n := len(m.Resources()); n != 2 {
		t.Fatalf("%d resources, want 2", n)
	}
	changed := resource(2, 2)
	changed.CPU = 1.5
	if err := m.ReportResource(ctx, changed); err != nil {
		t.Fatal(err)
	}
	if r := m.Resources(); r[0].CPU != 1.5 {
		t.Fatalf("changed resource not mirrored: %s", r[0].Serialize())
	}
	if err := c.Delete(ctx, "/bzid/resource/3:2", zk.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if r := m.Resources(); len(r) != 1 || *r[0].ShardID != 2 {
		t.Fatalf("resources after delete: %v", r)
	}
}

// TestWatchRetryAfterFailure: a Watch* call that failed can be made again.
func TestWatchRetryAfterFailure(t *testing.T) {
	m, c := fakeMirror(t)
	ctx := tctx(t)
	if err := c.Suspend(); err != nil {
		t.Fatal(err)
	}
	if err := m.WatchPortal(ctx); err == nil {
		t.Fatal("WatchPortal succeeded without a connection")
	}
	if err := c.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := m.WatchPortal(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, "/bzid/portal/m", nil, zk.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if evs := events(m); len(evs) != 1 || evs[0].EType != datadef.EventPortal {
		t.Fatalf("events %v", evs)
	}
}

// TestBadNodeData: nodes that cannot be decoded are skipped, never fatal.
func TestBadNodeData(t *testing.T) {
	m, c := fakeMirror(t)
	ctx := tctx(t)
	if err := m.WatchResource(ctx); err != nil {
		t.Fatal(err)
	}
	for p, data := range map[string]string{
		"/bzid/publish/2:2:bad":     "garbage",
		"/bzid/publish/noseparator": string(publish(2, 2, "x", 1, "entry").Serialize()),
		"/bzid/service/m/ps:0/1":    "garbage",
		"/bzid/resource/2:2":        "{\"cpu\": \"x\"}",
		"/bzid/portal/bad":          "garbage",
	} {
		if _, err := c.Create(ctx, p, []byte(data), zk.CreateOptions{MakePath: true}); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.WatchPortal(ctx); err != nil {
		t.Fatal(err)
	}
	if got := m.ExpectedLoading(); len(got) != 0 {
		t.Errorf("expected loading %v", got)
	}
	if got := m.AllReplicas(ServerPS); len(got) != 0 {
		t.Errorf("replicas %v", got)
	}
	if got := m.LocalReplicaPaths(); len(got) != 0 {
		t.Errorf("local replica paths %v", got)
	}
	if got := m.Resources(); len(got) != 0 {
		t.Errorf("resources %v", got)
	}
	for _, ev := range events(m) {
		if ev.EType == datadef.EventPortal {
			t.Errorf("event for an undecodable portal node: %s", ev.Data)
		}
	}
}
