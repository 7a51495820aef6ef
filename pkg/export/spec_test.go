package export

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/pkg/trainer/batch"
	"github.com/monolith-go/monolith/pkg/trainer/dnn"
)

// TestSpecBuckets: a feature's buckets go into the manifest's spec and back into the served
// model's configuration, and a collisionless feature's manifest has no buckets key (manifests of
// earlier exports read the same).
func TestSpecBuckets(t *testing.T) {
	cfg := dnn.Config{Features: []dnn.Feature{{Name: "user", Slot: 1, Dim: 4, Buckets: 1000}, {Name: "item", Slot: 2, Dim: 4}}, DenseDim: 1}
	spec := SpecFromDNN(cfg, []batch.DenseFeature{{Name: "price", Dim: 1}})
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
