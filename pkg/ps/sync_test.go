package ps

import (
	"context"
	"maps"
	"slices"
	"testing"

	pspb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/ps"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// TestSyncSource: the ids ApplyGradients updates on a server (through the router, each server its
// shard's) are what TakeTouched hands, with the embeddings a lookup reads, once; for the tables
// there at the start and those created later, only while tracking is on.
func TestSyncSource(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name       string
		track      bool // Config.TrackTouched
		setTrack   *bool
		wantTaken  bool
		laterTable bool
	}{
		{name: "off", track: false, wantTaken: false},
		{name: "on from the config", track: true, wantTaken: true},
		{name: "turned on", track: false, setTrack: ptr(true), wantTaken: true},
		{name: "turned off", track: true, setTrack: ptr(false), wantTaken: false},
		{name: "table created later", track: true, wantTaken: true, laterTable: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{TrackTouched: tc.track}
			if !tc.laterTable {
				cfg.Tables = []*pspb.TableConfig{sgdTable("t", 2, 1)}
			}
			servers := startServers(t, 2, cfg)
			r := newRouter(t, servers, RouterConfig{})
			if tc.laterTable {
				if err := r.CreateTables(ctx, []*pspb.TableConfig{sgdTable("t", 2, 1)}); err != nil {
					t.Fatal(err)
				}
			}
			if tc.setTrack != nil {
				for _, s := range servers {
					s.Server.SetTrackTouched(*tc.setTrack)
				}
			}
			ids := []int64{1, 2, 3, 4, 5, 3, -7}
			grads := make([]float32, 2*len(ids))
			for i := range grads {
				grads[i] = float32(-i)
			}
			if err := r.ApplyGradients(ctx, "t", 2, ids, grads, Update{UpdateTimeSec: 100}); err != nil {
				t.Fatal(err)
			}
			taken := map[int64][]float32{}
			for _, s := range servers {
				if got := s.Server.SyncTables(); !maps.Equal(got, map[string]int{"t": 2}) {
					t.Fatalf("SyncTables = %v", got)
				}
				if _, err := s.Server.TakeTouched("t", 3, func(ids []int64, embs []float32) error {
					for k, id := range ids {
						if sh := int(((id % 2) + 2) % 2); sh != s.Server.Index() {
							t.Errorf("ps %d handed id %d of shard %d", s.Server.Index(), id, sh)
						}
						taken[id] = slices.Clone(embs[2*k : 2*k+2])
					}
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			want := []int64{-7, 1, 2, 3, 4, 5}
			if !tc.wantTaken {
				want = nil
			}
			if got := slices.Sorted(maps.Keys(taken)); !slices.Equal(got, want) {
				t.Fatalf("taken %v, want %v", got, want)
			}
			for id, emb := range taken {
				out := make([]float32, 2)
				if _, err := r.Lookup(ctx, "t", 2, []int64{id}, out); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(out, emb) {
					t.Errorf("id %d taken as %v, the server holds %v", id, emb, out)
				}
			}
			if tc.wantTaken {
				// Given back: taken again.
				servers[1].Server.Retouch("t", []int64{1, 3})
				if p := servers[1].Server.TouchedPending("t"); p != 2 {
					t.Errorf("TouchedPending after Retouch = %d, want 2", p)
				}
				n, err := servers[1].Server.TakeTouched("t", 10, func([]int64, []float32) error { return nil })
				if err != nil || n != 2 {
					t.Errorf("TakeTouched after Retouch = %d, %v; want 2", n, err)
				}
			}
		})
	}
	t.Run("unknown table", func(t *testing.T) {
		s := startServers(t, 1, Config{})[0].Server
		if _, err := s.TakeTouched("nope", 1, func([]int64, []float32) error { return nil }); errkind.Of(err) != errkind.NotFound {
			t.Errorf("TakeTouched(unknown) = %v, want NotFound", err)
		}
		s.Retouch("nope", []int64{1}) // nothing to do, no panic
		if p := s.TouchedPending("nope"); p != 0 {
			t.Errorf("TouchedPending(unknown) = %d", p)
		}
	})
}
