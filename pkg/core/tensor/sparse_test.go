package tensor

import (
	"reflect"
	"testing"

	"github.com/monolith-go/monolith/pkg/errkind"
)

func TestSparseValidateReorderSlice(t *testing.T) {
	s := Sparse[int64]{
		Indices:    [][]int64{{1, 0}, {0, 2}, {0, 0}, {1, 3}},
		Values:     []int64{10, 20, 30, 40},
		DenseShape: []int64{2, 4},
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	r := s.Reorder()
	if !reflect.DeepEqual(r.Values, []int64{30, 20, 10, 40}) || !reflect.DeepEqual(r.Indices, [][]int64{{0, 0}, {0, 2}, {1, 0}, {1, 3}}) {
		t.Fatalf("reorder: %+v", r)
	}
	if !reflect.DeepEqual(s.Values, []int64{10, 20, 30, 40}) {
		t.Fatal("reorder changed its input")
	}
	// tf.sparse.slice(s, [0, 0], [2, 3]): entries with column < 3, input order, shape (2, 3).
	sl, err := s.Slice([]int64{0, 0}, []int64{2, 3})
	if err != nil {
		t.Fatal(err)
	}
	want := Sparse[int64]{Indices: [][]int64{{1, 0}, {0, 2}, {0, 0}}, Values: []int64{10, 20, 30}, DenseShape: []int64{2, 3}}
	if !reflect.DeepEqual(sl, want) {
		t.Fatalf("slice: %+v", sl)
	}
	// A slice reaching past the input is cut at the input's end; one starting past it is empty.
	sl, _ = s.Slice([]int64{1, 2}, []int64{5, 5})
	if !reflect.DeepEqual(sl.DenseShape, []int64{1, 2}) || !reflect.DeepEqual(sl.Indices, [][]int64{{0, 1}}) {
		t.Fatalf("offset slice: %+v", sl)
	}
	sl, _ = s.Slice([]int64{3, 0}, []int64{1, 4})
	if !reflect.DeepEqual(sl.DenseShape, []int64{0, 4}) || len(sl.Values) != 0 {
		t.Fatalf("slice past the end: %+v", sl)
	}
	for _, bad := range []Sparse[int64]{
		{Indices: [][]int64{{0, 0}}, Values: []int64{}, DenseShape: []int64{1, 1}},
		{Indices: [][]int64{{0}}, Values: []int64{1}, DenseShape: []int64{1, 1}},
		{Indices: [][]int64{{0, 1}}, Values: []int64{1}, DenseShape: []int64{1, 1}},
		{DenseShape: []int64{-1}},
	} {
		if err := bad.Validate(); errkind.Of(err) != errkind.Value {
			t.Errorf("validate %+v: %v", bad, err)
		}
	}
	if _, err := s.Slice([]int64{0}, []int64{1}); errkind.Of(err) != errkind.Value {
		t.Errorf("slice rank: %v", err)
	}
	m := s.MapValues(func(v int64) int64 { return v + 1 })
	if m.Values[0] != 11 || s.Values[0] != 10 {
		t.Errorf("map values: %v %v", m.Values, s.Values)
	}
	e := EmptySparse[int64](4, 1)
	if len(e.Indices) != 0 || !reflect.DeepEqual(e.DenseShape, []int64{4, 1}) {
		t.Errorf("empty: %+v", e)
	}
}

func TestRagged(t *testing.T) {
	r := RaggedFromRows([]int64{1, 2, 3}, nil, []int64{4})
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	if r.NRows() != 3 || !reflect.DeepEqual(r.RowLengths(), []int64{3, 0, 1}) {
		t.Fatalf("rows: %d %v", r.NRows(), r.RowLengths())
	}
	s, err := r.ToSparse()
	if err != nil {
		t.Fatal(err)
	}
	want := Sparse[int64]{Indices: [][]int64{{0, 0}, {0, 1}, {0, 2}, {2, 0}}, Values: []int64{1, 2, 3, 4}, DenseShape: []int64{3, 3}}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("to sparse: %+v", s)
	}
	empty, _ := RaggedFromRows[int64]().ToSparse()
	if !reflect.DeepEqual(empty.DenseShape, []int64{0, 0}) || empty.Values == nil {
		t.Errorf("empty ragged: %+v", empty)
	}
	for _, bad := range []Ragged[int64]{{Values: []int64{1}, RowSplits: []int64{0}}, {Values: []int64{1}, RowSplits: []int64{0, 2, 1}}, {}} {
		if err := bad.Validate(); errkind.Of(err) != errkind.Value {
			t.Errorf("validate %+v: %v", bad, err)
		}
	}
}
