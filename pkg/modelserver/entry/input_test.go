package entry

import (
	"slices"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/pkg/export"
)

// TestInputDefaults: an example that lacks an optional feature gets the default the trainer
// gave it (the spec's), so that serving scores what training trained on; a feature without a
// default is still required.
func TestInputDefaults(t *testing.T) {
	spec := export.ModelSpec{Model: export.ModelDNN,
		SparseFeatures: []export.SparseFeature{{Name: "user", Slot: 1}, {Name: "genre", Slot: 3, Default: []uint64{3<<48 | 77}}},
		DenseFeatures:  []export.DenseFeature{{Name: "price", Dim: 1, Default: []float32{9.99}}, {Name: "age", Dim: 1}}}
	r := newInputReader(spec)
	b, err := r.batch([]example{
		{floats: map[string][]float32{"age": {30}}, fids: map[string][]uint64{"user": {1<<48 | 5}}},
		{floats: map[string][]float32{"age": {40}, "price": {2}}, fids: map[string][]uint64{"user": {1<<48 | 6}, "genre": {3<<48 | 8}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(b.Dense, []float32{9.99, 30, 2, 40}) || !slices.Equal(b.Fids[0], []uint64{1<<48 | 5, 3<<48 | 77}) || !slices.Equal(b.Fids[1], []uint64{1<<48 | 6, 3<<48 | 8}) {
		t.Fatalf("batch %+v", b)
	}
	_, err = r.batch([]example{{floats: map[string][]float32{}, fids: map[string][]uint64{}}})
	if err == nil || !strings.Contains(err.Error(), `example 0 has no float feature "age"`) {
		t.Fatalf("a required feature missing: %v", err)
	}
}
