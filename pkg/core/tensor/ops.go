package tensor

import (
	"math"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// Reshape is tf.reshape on any tensor; one dimension may be -1.
func Reshape(t Tensor, shape ...int) (Tensor, error) {
	switch x := t.(type) {
	case *Dense[bool]:
		return x.Reshape(shape...)
	case *Dense[int32]:
		return x.Reshape(shape...)
	case *Dense[int64]:
		return x.Reshape(shape...)
	case *Dense[float32]:
		return x.Reshape(shape...)
	case *Dense[float64]:
		return x.Reshape(shape...)
	}
	return nil, errNil("reshape")
}

func errNil(op string) error { return errkind.New(errkind.Value, "tensor: %s of a nil tensor", op) }

// Squeeze is tf.squeeze without axes: every dimension of size 1 is removed (a (1, 1) tensor
// becomes a scalar).
func Squeeze(t Tensor) (Tensor, error) {
	if t == nil {
		return nil, errNil("squeeze")
	}
	var shape []int
	for _, d := range t.Shape() {
		if d != 1 {
			shape = append(shape, d)
		}
	}
	return Reshape(t, shape...)
}

// ExpandDims is tf.expand_dims: a dimension of size 1 is inserted at axis (negative counts from
// the end, -1 appends).
func ExpandDims(t Tensor, axis int) (Tensor, error) {
	if t == nil {
		return nil, errNil("expand_dims")
	}
	shape := t.Shape()
	if axis < 0 {
		axis += len(shape) + 1
	}
	if axis < 0 || axis > len(shape) {
		return nil, errkind.New(errkind.Value, "tensor: expand_dims axis out of range for shape %s", ShapeString(shape))
	}
	out := append(append(append([]int{}, shape[:axis]...), 1), shape[axis:]...)
	return Reshape(t, out...)
}

// Concat is tf.concat: tensors of one dtype and rank whose dimensions agree except along axis.
func Concat(ts []Tensor, axis int) (Tensor, error) {
	if len(ts) == 0 {
		return nil, errkind.New(errkind.Value, "tensor: concat of no tensors")
	}
	for _, t := range ts {
		if t == nil {
			return nil, errNil("concat")
		}
		if t.DType() != ts[0].DType() {
			return nil, errkind.New(errkind.Type, "tensor: concat of %s and %s tensors", ts[0].DType(), t.DType())
		}
	}
	switch ts[0].DType() {
	case Bool:
		return concatAs[bool](ts, axis)
	case Int32:
		return concatAs[int32](ts, axis)
	case Int64:
		return concatAs[int64](ts, axis)
	case Float32:
		return concatAs[float32](ts, axis)
	default:
		return concatAs[float64](ts, axis)
	}
}

func concatAs[T Elem](ts []Tensor, axis int) (Tensor, error) {
	ds := make([]*Dense[T], len(ts))
	for i, t := range ts {
		ds[i] = t.(*Dense[T])
	}
	return ConcatDense(ds, axis)
}

// ConcatDense is Concat on tensors of a known element type.
func ConcatDense[T Elem](ts []*Dense[T], axis int) (*Dense[T], error) {
	if len(ts) == 0 {
		return nil, errkind.New(errkind.Value, "tensor: concat of no tensors")
	}
	rank := len(ts[0].shape)
	if axis < 0 {
		axis += rank
	}
	if axis < 0 || axis >= rank {
		return nil, errkind.New(errkind.Value, "tensor: concat axis out of range for rank %d", rank)
	}
	shape := append([]int{}, ts[0].shape...)
	shape[axis] = 0
	for _, t := range ts {
		if len(t.shape) != rank {
			return nil, errkind.New(errkind.Value, "tensor: concat of shapes %s and %s", ShapeString(ts[0].shape), ShapeString(t.shape))
		}
		for d := range rank {
			if d != axis && t.shape[d] != ts[0].shape[d] {
				return nil, errkind.New(errkind.Value, "tensor: concat of shapes %s and %s along axis %d", ShapeString(ts[0].shape), ShapeString(t.shape), axis)
			}
		}
		shape[axis] += t.shape[axis]
	}
	outer, inner := product(shape[:axis]), product(shape[axis+1:])
	data := make([]T, 0, outer*shape[axis]*inner)
	for o := range outer {
		for _, t := range ts {
			chunk := t.shape[axis] * inner
			data = append(data, t.data[o*chunk:(o+1)*chunk]...)
		}
	}
	return wrap(data, shape), nil
}

// Split is tf.split with explicit sizes: the parts along axis, whose sizes must add up to the
// dimension.
func Split(t Tensor, sizes []int, axis int) ([]Tensor, error) {
	switch x := t.(type) {
	case *Dense[bool]:
		return splitAs(x, sizes, axis)
	case *Dense[int32]:
		return splitAs(x, sizes, axis)
	case *Dense[int64]:
		return splitAs(x, sizes, axis)
	case *Dense[float32]:
		return splitAs(x, sizes, axis)
	case *Dense[float64]:
		return splitAs(x, sizes, axis)
	}
	return nil, errNil("split")
}

func splitAs[T Elem](t *Dense[T], sizes []int, axis int) ([]Tensor, error) {
	parts, err := SplitDense(t, sizes, axis)
	if err != nil {
		return nil, err
	}
	out := make([]Tensor, len(parts))
	for i, p := range parts {
		out[i] = p
	}
	return out, nil
}

// SplitDense is Split on a tensor of a known element type.
func SplitDense[T Elem](t *Dense[T], sizes []int, axis int) ([]*Dense[T], error) {
	rank := len(t.shape)
	if axis < 0 {
		axis += rank
	}
	if axis < 0 || axis >= rank {
		return nil, errkind.New(errkind.Value, "tensor: split axis out of range for shape %s", ShapeString(t.shape))
	}
	total := 0
	for _, s := range sizes {
		if s < 0 {
			return nil, errkind.New(errkind.Value, "tensor: negative split size in %v", sizes)
		}
		total += s
	}
	if total != t.shape[axis] {
		return nil, errkind.New(errkind.Value, "tensor: split sizes %v do not add up to dimension %d of shape %s", sizes, axis, ShapeString(t.shape))
	}
	outer, inner := product(t.shape[:axis]), product(t.shape[axis+1:])
	out := make([]*Dense[T], len(sizes))
	offset := 0
	for i, s := range sizes {
		shape := append([]int{}, t.shape...)
		shape[axis] = s
		data := make([]T, 0, outer*s*inner)
		for o := range outer {
			start := o*t.shape[axis]*inner + offset*inner
			data = append(data, t.data[start:start+s*inner]...)
		}
		out[i] = wrap(data, shape)
		offset += s
	}
	return out, nil
}

// Slice is tf.slice: size[d] elements from begin[d] in each dimension; a size of -1 takes the
// rest of the dimension.
func Slice[T Elem](t *Dense[T], begin, size []int) (*Dense[T], error) {
	rank := len(t.shape)
	if len(begin) != rank || len(size) != rank {
		return nil, errkind.New(errkind.Value, "tensor: slice of shape %s with begin %v and size %v", ShapeString(t.shape), begin, size)
	}
	shape := make([]int, rank)
	for d := range rank {
		s := size[d]
		if s == -1 {
			s = t.shape[d] - begin[d]
		}
		if begin[d] < 0 || s < 0 || begin[d]+s > t.shape[d] {
			return nil, errkind.New(errkind.Value, "tensor: slice [%v, %v) out of bounds of shape %s", begin, size, ShapeString(t.shape))
		}
		shape[d] = s
	}
	n := product(shape)
	data := make([]T, 0, n)
	idx := make([]int, rank)
	for range n {
		flat := 0
		for d := range rank {
			flat = flat*t.shape[d] + begin[d] + idx[d]
		}
		data = append(data, t.data[flat])
		for d := rank - 1; d >= 0; d-- {
			idx[d]++
			if idx[d] < shape[d] {
				break
			}
			idx[d] = 0
		}
	}
	return wrap(data, shape), nil
}

// Gather is tf.gather on the flattened tensor: the elements at the indices, shaped like indices
// (a scalar index gives a scalar).
func Gather[T Elem](t *Dense[T], indices *Dense[int64]) (*Dense[T], error) {
	data := make([]T, len(indices.data))
	for i, ix := range indices.data {
		if ix < 0 || ix >= int64(len(t.data)) {
			return nil, errkind.New(errkind.Value, "tensor: gather index %d out of range [0, %d)", ix, len(t.data))
		}
		data[i] = t.data[ix]
	}
	return wrap(data, append([]int{}, indices.shape...)), nil
}

// Repeat is tf.repeat with one count: every element is repeated n times along axis.
func Repeat[T Elem](t *Dense[T], n, axis int) (*Dense[T], error) {
	rank := len(t.shape)
	if axis < 0 {
		axis += rank
	}
	if axis < 0 || axis >= rank {
		return nil, errkind.New(errkind.Value, "tensor: repeat axis out of range for shape %s", ShapeString(t.shape))
	}
	if n < 0 {
		return nil, errkind.New(errkind.Value, "tensor: negative repeat count %d", n)
	}
	shape := append([]int{}, t.shape...)
	shape[axis] *= n
	inner := product(t.shape[axis+1:])
	data := make([]T, 0, len(t.data)*n)
	for start := 0; start < len(t.data); start += inner {
		for range n {
			data = append(data, t.data[start:start+inner]...)
		}
	}
	return wrap(data, shape), nil
}

// Cast converts every element to T as tf.cast does (bool <-> number as 0/1 and != 0; float to
// integer truncates toward zero).
func Cast[T Elem](t Tensor) (*Dense[T], error) {
	if t == nil {
		return nil, errNil("cast")
	}
	out := make([]T, t.Size())
	if x, ok := t.(*Dense[int64]); ok {
		// Integer values beyond float64's exact range keep their bits through the int64 path.
		for i, v := range x.data {
			out[i] = fromInt64[T](v)
		}
	} else {
		for i, v := range Float64s(t) {
			out[i] = fromFloat64[T](v)
		}
	}
	return wrap(out, t.Shape()), nil
}

func fromFloat64[T Elem](v float64) T {
	var z T
	switch p := any(&z).(type) {
	case *bool:
		*p = v != 0 || math.IsNaN(v)
	case *int32:
		*p = int32(v)
	case *int64:
		*p = int64(v)
	case *float32:
		*p = float32(v)
	case *float64:
		*p = v
	}
	return z
}

func fromInt64[T Elem](v int64) T {
	var z T
	switch p := any(&z).(type) {
	case *bool:
		*p = v != 0
	case *int32:
		*p = int32(v)
	case *int64:
		*p = v
	case *float32:
		*p = float32(v)
	case *float64:
		*p = float64(v)
	}
	return z
}
