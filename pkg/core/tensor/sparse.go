package tensor

import (
	"slices"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// Sparse is a tf.SparseTensor: the non-empty positions (one index of len(DenseShape) coordinates
// per value) of a tensor of DenseShape.
type Sparse[T Elem] struct {
	Indices    [][]int64
	Values     []T
	DenseShape []int64
}

// Validate checks that every index has the rank of DenseShape and lies inside it, and that there
// is one value per index.
func (s Sparse[T]) Validate() error {
	if len(s.Indices) != len(s.Values) {
		return errkind.New(errkind.Value, "sparse: %d indices for %d values", len(s.Indices), len(s.Values))
	}
	for _, d := range s.DenseShape {
		if d < 0 {
			return errkind.New(errkind.Value, "sparse: negative dense shape %v", s.DenseShape)
		}
	}
	for i, ix := range s.Indices {
		if len(ix) != len(s.DenseShape) {
			return errkind.New(errkind.Value, "sparse: index %d has rank %d, dense shape %v", i, len(ix), s.DenseShape)
		}
		for d, c := range ix {
			if c < 0 || c >= s.DenseShape[d] {
				return errkind.New(errkind.Value, "sparse: index %v out of bounds of dense shape %v", ix, s.DenseShape)
			}
		}
	}
	return nil
}

// Clone returns a deep copy.
func (s Sparse[T]) Clone() Sparse[T] {
	out := Sparse[T]{Values: slices.Clone(s.Values), DenseShape: slices.Clone(s.DenseShape)}
	if s.Indices != nil {
		out.Indices = make([][]int64, len(s.Indices))
		for i, ix := range s.Indices {
			out.Indices[i] = slices.Clone(ix)
		}
	}
	return out
}

// MapValues returns a tensor with f applied to every value. The result shares the index
// coordinates with s (functions here never modify an index in place).
func (s Sparse[T]) MapValues(f func(T) T) Sparse[T] {
	out := Sparse[T]{Indices: slices.Clone(s.Indices), Values: make([]T, len(s.Values)), DenseShape: slices.Clone(s.DenseShape)}
	for i, v := range s.Values {
		out.Values[i] = f(v)
	}
	return out
}

// Reorder is tf.sparse.reorder: the entries sorted by index in row-major order (stable, so equal
// indices keep their order).
func (s Sparse[T]) Reorder() Sparse[T] {
	if slices.IsSortedFunc(s.Indices, slices.Compare[[]int64]) {
		// Already in order (what parse_example yields): share the index coordinates.
		return Sparse[T]{Indices: slices.Clone(s.Indices), Values: slices.Clone(s.Values), DenseShape: slices.Clone(s.DenseShape)}
	}
	order := make([]int, len(s.Indices))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return slices.Compare(s.Indices[a], s.Indices[b]) })
	out := Sparse[T]{Indices: make([][]int64, len(order)), Values: make([]T, len(order)), DenseShape: slices.Clone(s.DenseShape)}
	for i, o := range order {
		out.Indices[i] = slices.Clone(s.Indices[o])
		out.Values[i] = s.Values[o]
	}
	return out
}

// Slice is tf.sparse.slice: the entries inside [start, start+size) in every dimension, shifted
// by -start, in their input order; the result's dense shape is the part of the slice inside the
// input (max(min(start+size, shape) - start, 0)).
func (s Sparse[T]) Slice(start, size []int64) (Sparse[T], error) {
	rank := len(s.DenseShape)
	if len(start) != rank || len(size) != rank {
		return Sparse[T]{}, errkind.New(errkind.Value, "sparse: slice start %v and size %v for dense shape %v", start, size, s.DenseShape)
	}
	out := Sparse[T]{DenseShape: make([]int64, rank), Indices: [][]int64{}, Values: []T{}}
	for d := range rank {
		if start[d] < 0 || size[d] < 0 {
			return Sparse[T]{}, errkind.New(errkind.Value, "sparse: negative slice start %v or size %v", start, size)
		}
		out.DenseShape[d] = max(min(start[d]+size[d], s.DenseShape[d])-start[d], 0)
	}
next:
	for i, ix := range s.Indices {
		if len(ix) != rank {
			return Sparse[T]{}, errkind.New(errkind.Value, "sparse: index %d has rank %d, dense shape %v", i, len(ix), s.DenseShape)
		}
		shifted := make([]int64, rank)
		for d, c := range ix {
			if c < start[d] || c >= start[d]+size[d] {
				continue next
			}
			shifted[d] = c - start[d]
		}
		out.Indices = append(out.Indices, shifted)
		out.Values = append(out.Values, s.Values[i])
	}
	return out, nil
}

// EmptySparse is a sparse tensor of the dense shape with no entries.
func EmptySparse[T Elem](denseShape ...int64) Sparse[T] {
	return Sparse[T]{Indices: [][]int64{}, Values: []T{}, DenseShape: slices.Clone(denseShape)}
}
