package tensor

import (
	"slices"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// Ragged is a 2-D tf.RaggedTensor (rows of different lengths) in row-splits form: row i holds
// Values[RowSplits[i]:RowSplits[i+1]].
type Ragged[T Elem] struct {
	Values    []T
	RowSplits []int64
}

// RaggedFromRows builds a Ragged tensor from its rows.
func RaggedFromRows[T Elem](rows ...[]T) Ragged[T] {
	r := Ragged[T]{Values: []T{}, RowSplits: []int64{0}}
	for _, row := range rows {
		r.Values = append(r.Values, row...)
		r.RowSplits = append(r.RowSplits, int64(len(r.Values)))
	}
	return r
}

// Validate checks that the row splits start at 0, never decrease and end at len(Values).
func (r Ragged[T]) Validate() error {
	if len(r.RowSplits) == 0 || r.RowSplits[0] != 0 || r.RowSplits[len(r.RowSplits)-1] != int64(len(r.Values)) {
		return errkind.New(errkind.Value, "ragged: row splits %v do not span %d values", r.RowSplits, len(r.Values))
	}
	for i := 1; i < len(r.RowSplits); i++ {
		if r.RowSplits[i] < r.RowSplits[i-1] {
			return errkind.New(errkind.Value, "ragged: row splits %v decrease", r.RowSplits)
		}
	}
	return nil
}

// NRows is the number of rows.
func (r Ragged[T]) NRows() int { return max(len(r.RowSplits)-1, 0) }

// RowLengths is RaggedTensor.row_lengths().
func (r Ragged[T]) RowLengths() []int64 {
	out := make([]int64, r.NRows())
	for i := range out {
		out[i] = r.RowSplits[i+1] - r.RowSplits[i]
	}
	return out
}

// ToSparse is RaggedTensor.to_sparse(): index (row, position) per value, in row order, and the
// bounding shape [rows, longest row].
func (r Ragged[T]) ToSparse() (Sparse[T], error) {
	if err := r.Validate(); err != nil {
		return Sparse[T]{}, err
	}
	lengths := r.RowLengths()
	var longest int64
	for _, l := range lengths {
		longest = max(longest, l)
	}
	s := Sparse[T]{Indices: make([][]int64, 0, len(r.Values)), Values: slices.Clone(r.Values), DenseShape: []int64{int64(len(lengths)), longest}}
	for row, l := range lengths {
		for j := range l {
			s.Indices = append(s.Indices, []int64{int64(row), j})
		}
	}
	if s.Values == nil {
		s.Values = []T{}
	}
	return s, nil
}
