package export

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
	"github.com/monolith-go/monolith/pkg/trainer/dnn"
)

// TestSpecBuckets: a feature's buckets go into the manifest's spec and back into the served
// model's configuration, and a collisionless feature's manifest has no buckets key (manifests of
// earlier exports read the same).
func TestSpecBuckets(t *testing.T) {
	cfg := dnn.Config{Features: []dnn.Feature{{Name: "user", Slot: 1, Dim: 4, Buckets: 1000}, {Name: "item", Slot: 2, Dim: 4}}, DenseDim: 1}
	spec := SpecFromDNN(cfg, batch.Schema{Dense: []batch.DenseFeature{{Name: "price", Dim: 1}}})
	if err := spec.Validate(); err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"slot":1,"table":"user","dim":4,"pooling":"sum","buckets":1000}`) ||
		!strings.Contains(string(data), `"slot":2,"table":"item","dim":4,"pooling":"sum"}`) {
		t.Fatalf("spec JSON %s", data)
	}
	var back ModelSpec
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	got := back.DNNConfig().Features
	if got[0].Buckets != 1000 || got[1].Buckets != 0 {
		t.Fatalf("served features %+v", got)
	}
}

// TestSpecFile: the spec file round-trips; none is not found; a bad one is a Value error naming
// the file; SpecDiff names the first difference.
func TestSpecFile(t *testing.T) {
	dir := t.TempDir()
	if _, found, err := ReadSpecFile(dir); found || err != nil {
		t.Fatalf("no file: found %v, %v", found, err)
	}
	cfg := dnn.Config{Features: []dnn.Feature{{Name: "user", Slot: 1, Dim: 4, Buckets: 10}}, DenseDim: 0}
	spec := SpecFromDNN(cfg, batch.Schema{})
	if err := WriteSpecFile(dir, spec); err != nil {
		t.Fatal(err)
	}
	got, found, err := ReadSpecFile(dir)
	if err != nil || !found || SpecDiff(got, spec) != "" {
		t.Fatalf("read back %+v, %v, %v", got, found, err)
	}
	other := SpecFromDNN(dnn.Config{Features: []dnn.Feature{{Name: "user", Slot: 1, Dim: 4, Pooling: dnn.Mean}}, Hidden: []int{}}, batch.Schema{})
	other.Hidden = spec.Hidden
	if d := SpecDiff(other, spec); d != `sparse feature "user": {Name:user Slot:1 Table:user Dim:4 Pooling:mean Default:[] Buckets:0}, not {Name:user Slot:1 Table:user Dim:4 Pooling:sum Default:[] Buckets:10}` {
		t.Errorf("SpecDiff = %q", d)
	}
	if err := os.WriteFile(filepath.Join(dir, SpecFile), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadSpecFile(dir); err == nil || errkind.Of(err) != errkind.Value || !strings.Contains(err.Error(), filepath.Join(dir, SpecFile)) {
		t.Fatalf("bad file: %v", err)
	}
}
