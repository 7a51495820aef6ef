package export

import (
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	hashtablepb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/embedding"
	"github.com/monolith-go/monolith/pkg/modelconfig"
	"github.com/monolith-go/monolith/pkg/resource"
	"github.com/monolith-go/monolith/pkg/trainer/dnn"
)

// TestExportReproducesTheTrainer trains a dnn model on real parameter servers, checkpoints it as
// cmd/train does and exports it: the loaded PS shards hold every entry of the trainer's tables
// with the same bits (routed to floormod(id, num_ps), also onto another number of shards), the
// loaded entry holds the trainer's dense parameters bit for bit, and the model built from the
// export predicts exactly what the trainer's model predicts.
func TestExportReproducesTheTrainer(t *testing.T) {
	for _, tc := range []struct {
		name      string
		trainPS   int
		exportPS  int // 0: the checkpoint's
		wantPS    int
		withState bool
		hidden    []int
	}{
		{"2 ps, same shards", 2, 0, 2, false, []int{16, 8}},
		{"2 ps re-sharded to 3", 2, 3, 3, false, []int{16}},
		{"3 ps onto 1, optimizer state kept", 3, 1, 1, true, []int{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			ctx := tctx(t)
			j := newJob(t, tc.trainPS, tc.hidden)
			j.train(ctx, 30)
			prefix := j.save(ctx)
			base := filepath.Join(t.TempDir(), "exports", "demo")
			now := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
			res, err := Export(ctx, Options{ModelDir: j.modelDir, ExportBase: base, Spec: j.spec, NumPS: tc.exportPS,
				WithOptimizerState: tc.withState, Now: func() time.Time { return now }, Log: quiet})
			if err != nil {
				t.Fatal(err)
			}
			if res.Version != 30 || res.GlobalStep != 30 || res.NumPS != tc.wantPS || res.Checkpoint != prefix {
				t.Fatalf("result %+v", res)
			}

			// The layout: entry and ps_i, each with version 30 and nothing else but the state.
			var subs []string
			entries, _ := os.ReadDir(base)
			for _, e := range entries {
				if e.IsDir() {
					subs = append(subs, e.Name())
					vs, err := modelconfig.VersionDirs(filepath.Join(base, e.Name()))
					if err != nil || len(vs) != 1 || vs[0].Name != "30" {
						t.Errorf("%s: versions %v, %v", e.Name(), vs, err)
					}
					inner, _ := os.ReadDir(filepath.Join(base, e.Name()))
					if len(inner) != 2 {
						t.Errorf("%s holds %v, want the version and the state file", e.Name(), inner)
					}
				}
			}
			want := []string{"entry"}
			for i := range tc.wantPS {
				want = append(want, PSSubGraph(i))
			}
			sort.Strings(want)
			if !slices.Equal(subs, want) {
				t.Fatalf("sub-graphs %v, want %v", subs, want)
			}

			// Everyone may read it (the model server may run as another user).
			filepath.WalkDir(base, func(p string, e fs.DirEntry, err error) error {
				if err != nil {
					t.Fatal(err)
				}
				fi, _ := e.Info()
				if want := fs.FileMode(0o044); e.IsDir() && fi.Mode().Perm()&0o055 != 0o055 || !e.IsDir() && fi.Mode().Perm()&want != want {
					t.Errorf("%s: mode %v, not readable by all", p, fi.Mode())
				}
				return nil
			})

			// The entry: the trainer's dense parameters, bit for bit.
			entry, err := LoadEntry(res.Dirs[EntrySubGraph])
			if err != nil {
				t.Fatal(err)
			}
			if m := entry.Manifest; m.NumPS != tc.wantPS || m.GlobalStep != 30 || m.ModelName != "demo" || m.ExportedAt != "2024-05-06T07:08:09Z" {
				t.Errorf("manifest %+v", m)
			}
			exported := map[string][]float64{}
			for _, x := range entry.Tensors {
				exported[x.Name] = x.Float64
			}
			params, slots := 0, 0
			for _, x := range j.model.Tensors() {
				got, ok := exported[x.Name]
				switch {
				case denseParam.MatchString(x.Name):
					params++
					if !ok || !sameFloat64(got, x.Float64) {
						t.Errorf("dense parameter %s: exported %v, trained %v", x.Name, got, x.Float64)
					}
				case x.Name == dnn.StepName:
				default:
					slots++
					if ok != tc.withState || (ok && !sameFloat64(got, x.Float64)) {
						t.Errorf("optimizer tensor %s: exported %v (%v), trained %v", x.Name, ok, got, x.Float64)
					}
				}
			}
			if params != 2*(len(tc.hidden)+1) || slots == 0 {
				t.Fatalf("%d parameters and %d optimizer tensors", params, slots)
			}

			// The PS shards: every entry of the trainer's tables, its embedding's bits, on its shard.
			var shards []*PSShard
			for i := range tc.wantPS {
				s, err := LoadPSShard(ctx, res.Dirs[PSSubGraph(i)])
				if err != nil {
					t.Fatal(err)
				}
				shards = append(shards, s)
			}
			var total int64
			for _, tb := range j.spec.Tables() {
				dump := dumpEntries(t, prefix, tb.Name)
				var ids []int64
				for id := range dump {
					ids = append(ids, id)
				}
				slices.Sort(ids)
				trained := make([]float32, len(ids)*tb.Dim)
				if _, err := j.router.Lookup(ctx, tb.Name, tb.Dim, ids, trained); err != nil {
					t.Fatal(err)
				}
				var held int
				for _, s := range shards {
					held += s.Tables[tb.Name].Size()
				}
				if held != len(ids) || len(ids) == 0 {
					t.Fatalf("table %s: the shards hold %d entries, the trainer %d", tb.Name, held, len(ids))
				}
				total += int64(held)
				for k, id := range ids {
					got := make([]float32, tb.Dim)
					s := shards[embedding.Shard(id, tc.wantPS)]
					if n, err := s.Lookup(tb.Name, []int64{id}, got); err != nil || n != 1 {
						t.Fatalf("table %s id %d: found %d, %v", tb.Name, id, n, err)
					}
					if !sameFloat32(got, trained[k*tb.Dim:(k+1)*tb.Dim]) {
						t.Fatalf("table %s id %d: exported %v, trained %v", tb.Name, id, got, trained[k*tb.Dim:(k+1)*tb.Dim])
					}
				}
				// The optimizer's state is in the shards exactly when asked for.
				for i := range tc.wantPS {
					err := ReadTableEntries(ctx, res.Dirs[PSSubGraph(i)], tb.Name, func(d *hashtablepb.EntryDump) error {
						src := dump[d.GetId()]
						if tc.withState != (d.Opt != nil) || (tc.withState && !proto.Equal(d, src)) {
							t.Errorf("table %s id %d: exported %v, dumped %v", tb.Name, d.GetId(), d, src)
						}
						if d.GetLastUpdateTsSec() != src.GetLastUpdateTsSec() {
							t.Errorf("table %s id %d: update time %d, dumped %d", tb.Name, d.GetId(), d.GetLastUpdateTsSec(), src.GetLastUpdateTsSec())
						}
						return nil
					})
					if err != nil {
						t.Fatal(err)
					}
				}
			}
			if res.Entries != total {
				t.Errorf("result counts %d entries, the shards hold %d", res.Entries, total)
			}

			// The model built from the export predicts the trainer's probabilities, bit for bit.
			served, err := entry.NewModel(shardStore{shards})
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range j.batches(2, 3, 50) {
				want, err := j.model.Predict(ctx, b)
				if err != nil {
					t.Fatal(err)
				}
				got, err := served.Predict(ctx, b)
				if err != nil {
					t.Fatal(err)
				}
				if !sameFloat64(got, want) {
					t.Fatalf("served predictions %v, trained %v", got[:4], want[:4])
				}
			}
		})
	}
}

func sameFloat64(a, b []float64) bool {
	return slices.EqualFunc(a, b, func(x, y float64) bool { return math.Float64bits(x) == math.Float64bits(y) })
}

func sameFloat32(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}

// TestStateAndModelInfo: each sub-graph's ExportSaverListenerState is what the reference writes
// (Python's text_format of ServingModelState, byte for byte), pkg/resource's model info finds the
// version of the checkpoint's step through it, and the last Keep versions are kept.
func TestStateAndModelInfo(t *testing.T) {
	leakcheck.Check(t)
	ctx := tctx(t)
	j := newJob(t, 2, []int{8})
	// The reference's layout: exports under the model dir, which model info reads the
	// checkpoint state of.
	base := filepath.Join(j.modelDir, "exported_models")
	var versions []int64
	for range 4 {
		j.train(ctx, 5)
		j.save(ctx)
		res, err := Export(ctx, Options{ModelDir: j.modelDir, ExportBase: base, ModelName: "m", Spec: j.spec, Keep: 3, Log: quiet})
		if err != nil {
			t.Fatal(err)
		}
		versions = append(versions, res.Version)
		if len(versions) == 4 && (len(res.Removed) != 3 || !strings.HasSuffix(res.Removed[0], "/5")) {
			t.Errorf("retention removed %v", res.Removed)
		}
	}
	if !slices.Equal(versions, []int64{5, 10, 15, 20}) {
		t.Fatalf("versions %v", versions)
	}
	for _, sg := range []string{"entry", "ps_0", "ps_1"} {
		data, err := os.ReadFile(filepath.Join(base, sg, resource.ExportStateFile))
		if err != nil {
			t.Fatal(err)
		}
		var want strings.Builder
		for _, v := range []string{"10", "15", "20"} {
			want.WriteString("entries {\n  export_dir: \"" + filepath.Join(base, sg, v) + "\"\n  global_step: " + v + "\n}\n")
		}
		if string(data) != want.String() {
			t.Errorf("%s state:\n%s\nwant:\n%s", sg, data, want.String())
		}
		vs, err := modelconfig.VersionDirs(filepath.Join(base, sg))
		if err != nil || len(vs) != 3 || vs[0].Number != 10 {
			t.Errorf("%s versions %v, %v", sg, vs, err)
		}
	}
	info, err := resource.ModelInfo(base, resource.ModelInfoOptions{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if len(info) != 3 || info["entry"].VersionPath != filepath.Join(base, "entry", "20") || info["ps_1"].Size == 0 {
		t.Errorf("model info %+v", info)
	}
	// With an older checkpoint named, model info picks that checkpoint's version.
	info, err = resource.ModelInfo(base, resource.ModelInfoOptions{Ckpt: "model.ckpt-15", Logger: quiet})
	if err != nil || info["ps_0"].VersionPath != filepath.Join(base, "ps_0", "15") {
		t.Errorf("model info of step 15: %+v, %v", info, err)
	}
}

// TestWriteStateFormat: the state text is Python's text_format.MessageToString (recorded from the
// reference's export_pb2 with protobuf 4.21): quotes escaped, an empty state empty.
func TestWriteStateFormat(t *testing.T) {
	for _, tc := range []struct {
		st   resource.ServingModelState
		want string
	}{
		{resource.ServingModelState{}, ""},
		{resource.ServingModelState{Entries: []resource.ServingEntry{{ExportDir: "/tmp/x/entry/100", GlobalStep: 100}, {ExportDir: `/tmp/x/entry/200 "q"`, GlobalStep: 200}}},
			"entries {\n  export_dir: \"/tmp/x/entry/100\"\n  global_step: 100\n}\nentries {\n  export_dir: \"/tmp/x/entry/200 \\\"q\\\"\"\n  global_step: 200\n}\n"},
	} {
		dir := filepath.Join(t.TempDir(), "entry") // created by WriteState
		if err := WriteState(dir, &tc.st); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(dir, resource.ExportStateFile))
		if err != nil || string(data) != tc.want {
			t.Errorf("state %q, %v; want %q", data, err, tc.want)
		}
		back, err := ReadState(dir)
		if err != nil || len(back.Entries) != len(tc.st.Entries) || (len(back.Entries) > 0 && back.Entries[1] != tc.st.Entries[1]) {
			t.Errorf("read back %+v, %v", back, err)
		}
		if _, err := os.Stat(filepath.Join(dir, resource.ExportStateFile+"-tmp")); !os.IsNotExist(err) {
			t.Errorf("temporary state file left: %v", err)
		}
	}
}

// TestTimestampVersion: with VersionTimestamp the version is the export's Unix time, and the
// state still maps it to the checkpoint's step.
func TestTimestampVersion(t *testing.T) {
	leakcheck.Check(t)
	ctx := tctx(t)
	j := newJob(t, 1, []int{4})
	j.train(ctx, 3)
	j.save(ctx)
	base := t.TempDir()
	now := time.Unix(1622716114, 0)
	res, err := Export(ctx, Options{ModelDir: j.modelDir, ExportBase: base, Spec: j.spec, VersionType: VersionTimestamp,
		Now: func() time.Time { return now }, Log: quiet})
	if err != nil || res.Version != 1622716114 || res.Dirs["ps_0"] != filepath.Join(base, "ps_0", "1622716114") {
		t.Fatalf("%+v, %v", res, err)
	}
	st, err := ReadState(filepath.Join(base, "entry"))
	if err != nil || len(st.Entries) != 1 || st.Entries[0].GlobalStep != 3 {
		t.Fatalf("state %+v, %v", st, err)
	}
	// The same second again is the same version: refused.
	if _, err := Export(ctx, Options{ModelDir: j.modelDir, ExportBase: base, Spec: j.spec, VersionType: VersionTimestamp,
		Now: func() time.Time { return now }, Log: quiet}); err == nil || !strings.Contains(err.Error(), filepath.Join(base, "entry", "1622716114")) {
		t.Errorf("second export in the same second: %v", err)
	}
}
