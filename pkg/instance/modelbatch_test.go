package instance_test

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	examplepb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/example"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/export"
	"github.com/monolith-go/monolith/pkg/instance"
)

// writeManifest writes m as pkg/export writes model.json (its own types, so that a renamed field
// breaks this test) into a new directory and returns the directory.
func writeManifest(t *testing.T, m any) string {
	t.Helper()
	dir := t.TempDir()
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, export.EntryManifestFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// demoManifest is the entry manifest of cmd/train's demo model, as cmd/export writes it.
func demoManifest() export.EntryManifest {
	spec := export.ModelSpec{Model: export.ModelDNN, Interaction: "dot", Hidden: []int{64, 32},
		DenseFeatures: []export.DenseFeature{{Name: "dense", Dim: 4}}}
	var tables []export.TableEntries
	for i, n := range []string{"slot_1", "slot_2", "slot_3"} {
		spec.SparseFeatures = append(spec.SparseFeatures, export.SparseFeature{Name: n, Slot: i + 1, Table: n, Dim: 8, Pooling: "sum"})
		tables = append(tables, export.TableEntries{Name: n, Dim: 8, Entries: int64(10 * (i + 1))})
	}
	return export.EntryManifest{Format: export.EntryFormat, ModelName: "ctr", Version: 3, NumPS: 2, ShardRule: export.ShardRule,
		Model: spec, Tables: tables, Dense: export.DenseInfo{Prefix: export.DensePrefix}}
}

func TestReadModelFeatures(t *testing.T) {
	dir := writeManifest(t, demoManifest())
	want := &instance.ModelFeatures{
		Dense:  []instance.DenseFeature{{Name: "dense", Dim: 4}},
		Sparse: []instance.ModelSparseFeature{{Name: "slot_1", Slot: 1, Entries: 10}, {Name: "slot_2", Slot: 2, Entries: 20}, {Name: "slot_3", Slot: 3, Entries: 30}},
	}
	for _, path := range []string{dir, filepath.Join(dir, export.EntryManifestFile)} {
		got, err := instance.ReadModelFeatures(path)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("ReadModelFeatures(%s) = %+v, want %+v", path, got, want)
		}
	}
}

func TestReadModelFeaturesErrors(t *testing.T) {
	edit := func(f func(m *export.EntryManifest)) export.EntryManifest {
		m := demoManifest()
		f(&m)
		return m
	}
	tests := []struct {
		name     string
		manifest any // nil: no file
		kind     errkind.Kind
		want     string
	}{
		{"missing", nil, errkind.NotFound, "does not exist"},
		{"not JSON", "{", errkind.Value, "model spec"},
		{"PS manifest", export.PSManifest{Format: export.PSFormat}, errkind.Value, `format "monolith-go/export/ps/v1": not an export's entry manifest`},
		{"no features", edit(func(m *export.EntryManifest) { m.Model.DenseFeatures, m.Model.SparseFeatures = nil, nil }), errkind.Value, "reads no feature"},
		{"name twice", edit(func(m *export.EntryManifest) { m.Model.SparseFeatures[1].Name = "dense" }), errkind.Value, `feature "dense" given twice`},
		{"label name", edit(func(m *export.EntryManifest) { m.Model.DenseFeatures[0].Name = instance.LabelFeature }), errkind.Value, `feature name "__LABEL__"`},
		{"slot 0", edit(func(m *export.EntryManifest) { m.Model.SparseFeatures[0].Slot = 0 }), errkind.Value, "slot 0 is outside [1, 32767]"},
		{"slot too large", edit(func(m *export.EntryManifest) { m.Model.SparseFeatures[0].Slot = 1 << 15 }), errkind.Value, "slot 32768 is outside"},
		{"dim 0", edit(func(m *export.EntryManifest) { m.Model.DenseFeatures[0].Dim = 0 }), errkind.Value, `dense feature "dense" has dimension 0`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "model.json")
			switch m := tc.manifest.(type) {
			case nil:
			case string:
				if err := os.WriteFile(path, []byte(m), 0o644); err != nil {
					t.Fatal(err)
				}
			default:
				path = filepath.Join(writeManifest(t, m), export.EntryManifestFile)
			}
			_, err := instance.ReadModelFeatures(path)
			if err == nil || errkind.Of(err) != tc.kind || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("err = %v (kind %v), want kind %v naming %s and %q", err, errkind.Of(err), tc.kind, path, tc.want)
			}
		})
	}
}

// TestRandomModelBatch: every example has each dense feature's values and one fid of each sparse
// feature's slot whose id is one of its table's, then a line id and a label; a seed gives the same
// batch; the batch converts to Instances (tfs_client's example_batch_to_instance).
func TestRandomModelBatch(t *testing.T) {
	mf := &instance.ModelFeatures{
		Dense:  []instance.DenseFeature{{Name: "dense", Dim: 4}, {Name: "ctx", Dim: 1}},
		Sparse: []instance.ModelSparseFeature{{Name: "slot_1", Slot: 1, Entries: 3}, {Name: "slot_7", Slot: 7, Entries: 100}, {Name: "empty", Slot: 9}},
	}
	now := time.Unix(1700000000, 0)
	const n = 200
	eb, err := instance.RandomModelBatch(rand.New(rand.NewPCG(1, 2)), mf, n, now)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := instance.RandomModelBatch(rand.New(rand.NewPCG(1, 2)), mf, n, now)
	if !proto.Equal(eb, again) {
		t.Error("the same seed made another batch")
	}
	if eb.GetBatchSize() != n {
		t.Errorf("batch_size %d", eb.GetBatchSize())
	}
	lists := map[string]*examplepb.NamedFeatureList{}
	var names []string
	for _, l := range eb.GetNamedFeatureList() {
		lists[l.GetName()] = l
		names = append(names, l.GetName())
		if len(l.GetFeature()) != n {
			t.Errorf("%s: %d features", l.GetName(), len(l.GetFeature()))
		}
	}
	if want := []string{"dense", "ctx", "slot_1", "slot_7", "empty", instance.LineIDFeature, instance.LabelFeature}; !reflect.DeepEqual(names, want) {
		t.Fatalf("feature lists %v, want %v", names, want)
	}
	for _, d := range mf.Dense {
		for i, f := range lists[d.Name].GetFeature() {
			if got := len(f.GetFloatList().GetValue()); got != d.Dim {
				t.Fatalf("%s[%d]: %d floats, want %d", d.Name, i, got, d.Dim)
			}
		}
	}
	for _, s := range mf.Sparse {
		ids := map[uint64]bool{}
		for i, f := range lists[s.Name].GetFeature() {
			fids := f.GetFidV2List().GetValue()
			if len(fids) != 1 || fids[0]>>48 != uint64(s.Slot) {
				t.Fatalf("%s[%d]: fids %x, want one of slot %d", s.Name, i, fids, s.Slot)
			}
			id := fids[0] & (1<<48 - 1)
			if s.Entries > 0 && (id < 1 || id > uint64(s.Entries)) {
				t.Fatalf("%s[%d]: id %d outside [1, %d]", s.Name, i, id, s.Entries)
			}
			ids[id] = true
		}
		if s.Entries == 3 && len(ids) != 3 {
			t.Errorf("%s: ids %v, want all of 1..3 in %d examples", s.Name, ids, n)
		}
	}
	insts, err := instance.ExampleBatchToInstances(eb)
	if err != nil {
		t.Fatal(err)
	}
	if len(insts) != n || insts[1].GetLabel()[0] != 1 || len(insts[0].GetFeature()) != 5 || insts[0].GetLineId().GetReqTime() != now.Unix() {
		t.Errorf("instances: %d, first %v", len(insts), insts[0])
	}
	if _, err := instance.RandomModelBatch(rand.New(rand.NewPCG(1, 2)), mf, 0, now); errkind.Of(err) != errkind.Value {
		t.Errorf("batch size 0: %v", err)
	}
}
