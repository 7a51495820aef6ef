package featureschema

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	tfexamplepb "github.com/monolith-go/monolith/gen/pb/tensorflow/core/example"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
)

func TestHashBytes(t *testing.T) {
	for _, s := range []string{"", "a", "drama", "日本"} {
		if HashBytes([]byte(s)) != HashString(s) {
			t.Errorf("HashBytes(%q) != HashString", s)
		}
	}
}

// TestInputs: a schema's inputs decode a tf.train.Example as the schema says: the threshold
// label, int and string ids in their slots, an optional feature's default.
func TestInputs(t *testing.T) {
	s, err := Parse([]byte(`
label: {source: rating, threshold: 4}
features:
  - {name: user, kind: sparse_int, slot: 1, source: user_id}
  - {name: genre, kind: sparse_string, slot: 2, optional: true, default: [unknown]}
  - {name: price, kind: dense, dim: 2}
  - {name: age, kind: dense, dim: 1, optional: true, default: 30}
`), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	in, err := s.Inputs(batch.TFExample)
	if err != nil {
		t.Fatal(err)
	}
	d, err := batch.NewDecoder(in)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := proto.Marshal(&tfexamplepb.Example{Features: &tfexamplepb.Features{Feature: map[string]*tfexamplepb.Feature{
		"rating":  {Kind: &tfexamplepb.Feature_FloatList{FloatList: &tfexamplepb.FloatList{Value: []float32{5}}}},
		"user_id": {Kind: &tfexamplepb.Feature_Int64List{Int64List: &tfexamplepb.Int64List{Value: []int64{7}}}},
		"price":   {Kind: &tfexamplepb.Feature_FloatList{FloatList: &tfexamplepb.FloatList{Value: []float32{1, 2}}}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	b := &batch.Batch{}
	if err := d.Append(b, rec); err != nil {
		t.Fatal(err)
	}
	want := []uint64{FID(1, 7), FID(2, StringID("unknown"))}
	if b.Labels[0] != 1 || !slices.Equal(b.Fids[0], want) || !slices.Equal(b.Dense, []float32{1, 2, 30}) {
		t.Fatalf("batch %+v, want label 1, fids %v, dense [1 2 30]", b, want)
	}
	bs, err := s.BatchSchema()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(bs.Sparse, []string{"user", "genre"}) || len(bs.Dense) != 2 || bs.DenseDim() != 3 ||
		!slices.Equal(bs.Dense[1].Default, []float32{30}) || bs.Dense[0].Default != nil ||
		!slices.Equal(bs.SparseDefault["genre"], []uint64{FID(2, StringID("unknown"))}) || bs.SparseDefault["user"] != nil {
		t.Fatalf("batch schema %+v", bs)
	}
}
