package ps

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pspb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/ps"
	hashtablepb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/embedding"
)

// lookupAll looks ids up through r.
func lookupAll(t *testing.T, r *Router, table string, dim int, ids []int64) []float32 {
	t.Helper()
	out := make([]float32, len(ids)*dim)
	if _, err := r.Lookup(context.Background(), table, dim, ids, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSaveRestore trains two tables on 2 servers, saves them, and restores the dump onto jobs of
// 3, 2 and 1 servers: every lookup reads what the trained job read, each server holds only its
// own ids, and training goes on from the restored optimizer state exactly as it would have.
func TestSaveRestore(t *testing.T) {
	leakcheck.Check(t)
	ctx := context.Background()
	tables := []*pspb.TableConfig{constTable("user", 4), sgdTable("item", 2, 0.1)}
	trained := startServers(t, 2, Config{Tables: tables})
	r2 := newRouter(t, trained, RouterConfig{})
	rng := rand.New(rand.NewPCG(3, 4))
	pool := idPool(rng, 400)
	for step := int64(1); step <= 3; step++ {
		for _, tc := range tables {
			ids, grads := batch(rng, pool, 600, dimOf(tc))
			if err := r2.ApplyGradients(ctx, tc.GetName(), dimOf(tc), ids, grads, Update{GlobalStep: step, UpdateTimeSec: 5000}); err != nil {
				t.Fatal(err)
			}
		}
	}
	dir := t.TempDir()
	saved, err := r2.Save(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	for s, resp := range saved {
		for _, tf := range resp.GetTables() {
			want := DumpBasename(dir, tf.GetTable(), s, 2) + "-00000-of-00001"
			if len(tf.GetFiles()) != 1 || tf.GetFiles()[0] != want {
				t.Fatalf("ps %d saved %v, want [%s]", s, tf.GetFiles(), want)
			}
		}
	}
	want := map[string][]float32{}
	for _, tc := range tables {
		want[tc.GetName()] = lookupAll(t, r2, tc.GetName(), dimOf(tc), pool)
	}
	// The next step on the trained job, for comparison after the restores.
	nextIDs, nextGrads := batch(rng, pool, 600, 4)

	for _, n := range []int{3, 2, 1} {
		t.Run(fmt.Sprintf("%d servers", n), func(t *testing.T) {
			servers := startServers(t, n, Config{Tables: tables})
			r := newRouter(t, servers, RouterConfig{})
			restored, err := r.Restore(ctx, dir)
			if err != nil {
				t.Fatal(err)
			}
			for s, resp := range restored {
				if resp.GetDumpNumPs() != 2 {
					t.Fatalf("ps %d: dump_num_ps %d, want 2", s, resp.GetDumpNumPs())
				}
				// With 2 servers each reads its own file; otherwise every file.
				wantFiles := 2
				if n == 2 {
					wantFiles = 1
				}
				for _, tf := range resp.GetTables() {
					if len(tf.GetFiles()) != wantFiles {
						t.Errorf("ps %d read %v, want %d files", s, tf.GetFiles(), wantFiles)
					}
				}
			}
			for _, tc := range tables {
				got := lookupAll(t, r, tc.GetName(), dimOf(tc), pool)
				for i := range got {
					if got[i] != want[tc.GetName()][i] {
						t.Fatalf("table %s: float %d = %v after the restore, %v before", tc.GetName(), i, got[i], want[tc.GetName()][i])
					}
				}
			}
			stats, err := r.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for s, st := range stats {
				for _, tb := range st.GetTables() {
					var restoredHere int64
					for _, tf := range restored[s].GetTables() {
						if tf.GetTable() == tb.GetName() {
							restoredHere = tf.GetEntries()
						}
					}
					if tb.GetEntries() != restoredHere || tb.GetEntries() == 0 {
						t.Errorf("ps %d table %s: %d entries, %d restored", s, tb.GetName(), tb.GetEntries(), restoredHere)
					}
				}
			}
			for _, id := range pool[:30] {
				for s := 0; s < n; s++ {
					f, err := r.Client(s).Lookup(ctx, "user", 4, []int64{id}, make([]float32, 4))
					if err != nil {
						t.Fatal(err)
					}
					if f == 1 && embedding.Shard(id, n) != s {
						t.Errorf("id %d restored on ps %d, floormod routes it to %d", id, s, embedding.Shard(id, n))
					}
				}
			}
			// The optimizer state came back too: one more step matches the trained job's.
			if err := r.ApplyGradients(ctx, "user", 4, nextIDs, nextGrads, Update{GlobalStep: 4, UpdateTimeSec: 5001}); err != nil {
				t.Fatal(err)
			}
			after := lookupAll(t, r, "user", 4, pool)
			ref := startServers(t, 2, Config{Tables: tables})
			rr := newRouter(t, ref, RouterConfig{})
			if _, err := rr.Restore(ctx, dir); err != nil {
				t.Fatal(err)
			}
			if err := rr.ApplyGradients(ctx, "user", 4, nextIDs, nextGrads, Update{GlobalStep: 4, UpdateTimeSec: 5001}); err != nil {
				t.Fatal(err)
			}
			refAfter := lookupAll(t, rr, "user", 4, pool)
			for i := range after {
				if after[i] != refAfter[i] {
					t.Fatalf("after a step on the restored job: float %d = %v, %v on a job of 2", i, after[i], refAfter[i])
				}
			}
		})
	}
}

func TestRestoreErrors(t *testing.T) {
	leakcheck.Check(t)
	ctx := context.Background()
	tables := []*pspb.TableConfig{sgdTable("emb", 2, 0.1)}
	servers := startServers(t, 2, Config{Tables: tables})
	r := newRouter(t, servers, RouterConfig{})
	if err := r.ApplyGradients(ctx, "emb", 2, []int64{1, 2, 3}, make([]float32, 6), Update{GlobalStep: 1}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := r.Save(ctx, dir); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		code  codes.Code
		want  string
	}{
		{name: "a server's files missing", code: codes.NotFound, want: "lacks servers [1] of 2",
			setup: func(t *testing.T, d string) {
				files, _ := filepath.Glob(filepath.Join(d, "emb", "ps_1_of_2-*"))
				for _, f := range files {
					os.Remove(f)
				}
			}},
		{name: "dumps of two job sizes", code: codes.InvalidArgument, want: "mixes dumps of",
			setup: func(t *testing.T, d string) {
				os.WriteFile(filepath.Join(d, "emb", "ps_0_of_3-00000-of-00001"), nil, 0o644)
			}},
		{name: "corrupt file", code: codes.Internal, want: "ps_0_of_2-00000-of-00001",
			setup: func(t *testing.T, d string) {
				os.WriteFile(filepath.Join(d, "emb", "ps_0_of_2-00000-of-00001"), []byte("not a record"), 0o644)
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := t.TempDir()
			if err := os.CopyFS(d, os.DirFS(dir)); err != nil {
				t.Fatal(err)
			}
			tc.setup(t, d)
			_, err := r.Restore(ctx, d)
			if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Restore = %v, want %v with %q", err, tc.code, tc.want)
			}
		})
	}
}

// TestFilteredTable: with a sliding filter of threshold 3, an id gets an entry once it has been
// seen 3 times (at its fourth occurrence: the reference holds an id back while its count before
// the batch is below the threshold); the filter's counts are saved and restored with the table.
func TestFilteredTable(t *testing.T) {
	leakcheck.Check(t)
	ctx := context.Background()
	tb := sgdTable("emb", 2, 1)
	tb.Filter = &pspb.FilterConfig{
		Type: pspb.FilterConfig_SLIDING_HASH, Capacity: 1000, SplitNum: 5,
		OccurrenceThreshold: &hashtablepb.SlotOccurrenceThresholdConfig{DefaultOccurrenceThreshold: ptr[uint32](3)},
	}
	servers := startServers(t, 1, Config{Tables: []*pspb.TableConfig{tb}})
	r := newRouter(t, servers, RouterConfig{})
	apply := func(r *Router, ids ...int64) {
		t.Helper()
		grads := make([]float32, 2*len(ids))
		for i := range grads {
			grads[i] = -1
		}
		if err := r.ApplyGradients(ctx, "emb", 2, ids, grads, Update{GlobalStep: 1}); err != nil {
			t.Fatal(err)
		}
	}
	found := func(r *Router, id int64) bool {
		t.Helper()
		f, err := r.Lookup(ctx, "emb", 2, []int64{id}, make([]float32, 2))
		if err != nil {
			t.Fatal(err)
		}
		return f == 1
	}
	for i := 0; i < 3; i++ {
		apply(r, 10)
	}
	if found(r, 10) {
		t.Fatal("id 10 has an entry after 3 occurrences, the threshold holds it back until it was seen 3 times before")
	}
	apply(r, 10, 11)
	if !found(r, 10) || found(r, 11) {
		t.Fatalf("after the fourth occurrence: id 10 found %v (want true), id 11 %v (want false)", found(r, 10), found(r, 11))
	}
	apply(r, 11)
	dir := t.TempDir()
	saved, err := r.Save(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	files := saved[0].GetTables()[0].GetFiles()
	sort.Strings(files)
	if len(files) != 6 || !strings.Contains(files[0], "filter_ps_0_of_1-00000-of-00005") {
		t.Fatalf("saved %v, want the table's file and 5 filter splits", files)
	}
	// A fresh server restores id 11's count (2): its fourth occurrence admits it.
	fresh := startServers(t, 1, Config{Tables: []*pspb.TableConfig{tb}})
	rf := newRouter(t, fresh, RouterConfig{})
	if _, err := rf.Restore(ctx, dir); err != nil {
		t.Fatal(err)
	}
	if !found(rf, 10) || found(rf, 11) {
		t.Fatal("restore: id 10 should have its entry, id 11 none yet")
	}
	apply(rf, 11)
	apply(rf, 11)
	if !found(rf, 11) {
		t.Fatal("id 11 not admitted at its fourth occurrence after the restore: the filter's counts were lost")
	}
}

func ptr[T any](v T) *T { return &v }
