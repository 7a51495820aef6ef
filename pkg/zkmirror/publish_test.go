package zkmirror

import (
	"slices"
	"testing"

	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/zk"
)

func unload(pm datadef.PublishMeta) datadef.PublishMeta {
	pm.PType = datadef.PublishUnload
	return pm
}

func spec(pm datadef.PublishMeta) datadef.PublishMeta {
	pm.IsSpec = true
	return pm
}

// TestExpectedLoading: this host is shard 2, replica 2.
func TestExpectedLoading(t *testing.T) {
	type want struct {
		shard, replica int
		subs           []string
	}
	tests := []struct {
		name string
		pms  []datadef.PublishMeta
		want map[string]want
	}{
		{
			name: "own publish loads as is",
			pms:  []datadef.PublishMeta{publish(2, 2, "m", 2, "ps_0", "entry"), publish(5, 0, "m", 2, "ps_1", "entry")},
			want: map[string]want{"m": {2, 2, []string{"ps_0", "entry"}}},
		},
		{
			name: "own publish wins over one with fewer sub models",
			pms:  []datadef.PublishMeta{publish(2, 2, "m", 2, "ps_0", "ps_2", "entry"), publish(5, 0, "m", 2, "entry")},
			want: map[string]want{"m": {2, 2, []string{"ps_0", "ps_2", "entry"}}},
		},
		{
			name: "a new replica of this shard takes its shard's publish over",
			pms:  []datadef.PublishMeta{publish(2, 0, "m", 2, "ps_0", "entry"), publish(5, 0, "m", 2, "ps_1", "ps_3", "entry")},
			want: map[string]want{"m": {2, 2, []string{"ps_0", "entry"}}},
		},
		{
			name: "a spec publish of this shard is not taken over: entry only",
			pms:  []datadef.PublishMeta{spec(publish(2, 0, "m", 2, "ps_0", "entry")), publish(5, 0, "m", 2, "ps_1", "ps_3", "entry")},
			want: map[string]want{"m": {2, 2, []string{"entry"}}},
		},
		{
			name: "another shard's publish: entry sub models only",
			pms:  []datadef.PublishMeta{publish(5, 0, "m", 2, "ps_1", "entry", "entry_2"), publish(7, 0, "m", 2, "ps_1", "ps_3", "entry")},
			want: map[string]want{"m": {2, 2, []string{"entry", "entry_2"}}},
		},
		{
			name: "fewest sub models wins, the first mirrored on a tie",
			pms: []datadef.PublishMeta{publish(5, 0, "m", 3, "ps_1", "ps_3", "entry"), publish(6, 0, "m", 3, "ps_2", "entry"),
				publish(7, 0, "m", 3, "ps_4", "entry")},
			want: map[string]want{"m": {2, 2, []string{"entry"}}},
		},
		{
			name: "incomplete publishes load nothing",
			pms:  []datadef.PublishMeta{publish(2, 2, "m", 3, "ps_0", "entry"), publish(5, 0, "m", 3, "ps_1", "entry")},
			want: map[string]want{},
		},
		{
			name: "unload publishes are not mirrored",
			pms:  []datadef.PublishMeta{unload(publish(2, 2, "m", 1, "ps_0", "entry"))},
			want: map[string]want{},
		},
		{
			name: "models are independent; a model name that ends another's does not count for it",
			pms: []datadef.PublishMeta{publish(2, 2, "m", 1, "ps_0", "entry"), publish(2, 2, "big_m", 2, "ps_0", "entry"),
				publish(5, 1, "big_m", 2, "ps_1", "entry")},
			want: map[string]want{"m": {2, 2, []string{"ps_0", "entry"}}, "big_m": {2, 2, []string{"ps_0", "entry"}}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := fakeMirror(t)
			if err := m.PublishLoading(tctx(t), tc.pms...); err != nil {
				t.Fatal(err)
			}
			got := m.ExpectedLoading()
			if len(got) != len(tc.want) {
				t.Fatalf("expected loading %v, want %v", got, tc.want)
			}
			for model, w := range tc.want {
				pm, ok := got[model]
				if !ok {
					t.Fatalf("no %s in %v", model, got)
				}
				if *pm.ShardID != w.shard || pm.ReplicaID != w.replica || !slices.Equal(subNames(pm), w.subs) {
					t.Errorf("%s: shard %d replica %d subs %v, want %+v", model, *pm.ShardID, pm.ReplicaID, subNames(pm), w)
				}
			}
		})
	}
}

// TestPublishEvents: a PUBLISH event when a model's publishes are complete (load) and when the
// last one goes (unload); none while incomplete, none for another model's publishes.
func TestPublishEvents(t *testing.T) {
	m, c := fakeMirror(t)
	ctx := tctx(t)
	a, b := publish(2, 2, "m", 2, "ps_0", "entry"), publish(5, 0, "m", 2, "ps_1", "entry")
	other := publish(2, 2, "big_m", 5, "entry") // "big_m" ends with "m": must not complete "m"
	if err := m.PublishLoading(ctx, a, other); err != nil {
		t.Fatal(err)
	}
	if evs := events(m); len(evs) != 0 {
		t.Fatalf("events before completion: %d", len(evs))
	}
	if got := m.PublishedPaths("m"); !slices.Equal(got, []string{"/bzid/publish/2:2:m"}) {
		t.Fatalf("published paths of m: %v", got)
	}
	if err := m.PublishLoading(ctx, b); err != nil {
		t.Fatal(err)
	}
	evs := events(m)
	if len(evs) != 1 || *evs[0].Path != "/bzid/publish/5:0:m" || string(evs[0].Data) != string(b.Serialize()) {
		t.Fatalf("load events: %v", evs)
	}
	// Writing the same publishes again changes nothing (the mirror already has them).
	if err := m.PublishLoading(ctx, a, b); err != nil {
		t.Fatal(err)
	}
	if evs := events(m); len(evs) != 0 {
		t.Fatalf("events after an identical publish: %d", len(evs))
	}
	for _, p := range []string{"/bzid/publish/2:2:m", "/bzid/publish/5:0:m"} {
		if err := c.Delete(ctx, p, zk.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	evs = events(m)
	if len(evs) != 1 || *evs[0].Path != "/bzid/publish/5:0:m" {
		t.Fatalf("unload events: %v", evs)
	}
	if len(m.ExpectedLoading()) != 0 {
		t.Fatalf("expected loading after unload: %v", m.ExpectedLoading())
	}
}

// TestUnloadPublishSeenFirst: an UNLOAD publish of a model the mirror never loaded is not mirrored
// and raises no event (the reference's watch stopped on a KeyError there); a LOAD written over it
// later (CHANGED, not mirrored) then counts no publish of the model, which is an unload event, as
// in the reference.
func TestUnloadPublishSeenFirst(t *testing.T) {
	m, _ := fakeMirror(t)
	ctx := tctx(t)
	u := unload(publish(0, 0, "u", 1, "entry"))
	if err := m.PublishLoading(ctx, u); err != nil {
		t.Fatal(err)
	}
	if evs := events(m); len(evs) != 0 {
		t.Fatalf("events for an UNLOAD seen first: %v", evs)
	}
	if got := m.PublishedPaths("u"); len(got) != 0 {
		t.Fatalf("mirrored: %v", got)
	}
	load := publish(0, 0, "u", 1, "entry")
	if err := m.PublishLoading(ctx, load); err != nil {
		t.Fatal(err)
	}
	if evs := events(m); len(evs) != 1 || *evs[0].Path != "/bzid/publish/0:0:u" || string(evs[0].Data) != string(load.Serialize()) {
		t.Fatalf("events after the LOAD over it: %v", evs)
	}
}
