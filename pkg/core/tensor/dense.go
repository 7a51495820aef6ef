// Package tensor holds the values the TF graph code of monolith/core computes with, as plain Go:
// dense n-d arrays of one element type (Dense), sparse id lists (Sparse) and ragged id lists
// (Ragged), with the few TF ops that code uses (reshape, concat, split, squeeze, gather,
// reductions) and tf.io.serialize_tensor's byte format. Tensors are values, not graph nodes: an op
// computes its result at once. Shapes are static and fully known.
package tensor

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// DType is the element type of a tensor, named as TF names it.
type DType uint8

// The element types the ported code uses.
const (
	Invalid DType = iota
	Bool
	Int32
	Int64
	Float32
	Float64
)

var dtypeNames = [...]string{"invalid", "bool", "int32", "int64", "float32", "float64"}

// String is TF's dtype name (tf.int32.name).
func (d DType) String() string {
	if int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return "dtype(" + strconv.Itoa(int(d)) + ")"
}

// Elem is the set of Go element types a Dense tensor can hold.
type Elem interface {
	bool | int32 | int64 | float32 | float64
}

// Number is the numeric subset of Elem.
type Number interface {
	int32 | int64 | float32 | float64
}

// DTypeOf returns the DType of the element type T.
func DTypeOf[T Elem]() DType {
	var z T
	switch any(z).(type) {
	case bool:
		return Bool
	case int32:
		return Int32
	case int64:
		return Int64
	case float32:
		return Float32
	case float64:
		return Float64
	}
	return Invalid
}

// Tensor is a dense tensor of any element type; *Dense[T] is the only implementation.
type Tensor interface {
	DType() DType
	// Shape returns a copy of the dimensions; a scalar has none.
	Shape() []int
	Rank() int
	// Size is the number of elements (the product of the dimensions).
	Size() int
	// String prints the dtype, the shape as TF prints a TensorShape, and the values.
	String() string
	isTensor()
}

// Dense is an n-d array of T in row-major order.
type Dense[T Elem] struct {
	shape []int
	data  []T
}

// New returns a tensor of the given shape holding a copy of data; the shape's product must be
// len(data) and no dimension may be negative.
func New[T Elem](data []T, shape []int) (*Dense[T], error) {
	n, err := numElements(shape)
	if err != nil {
		return nil, err
	}
	if n != len(data) {
		return nil, errkind.New(errkind.Value, "tensor: %d values do not fill shape %s", len(data), ShapeString(shape))
	}
	return &Dense[T]{shape: append([]int{}, shape...), data: append([]T{}, data...)}, nil
}

// Scalar returns a rank-0 tensor.
func Scalar[T Elem](v T) *Dense[T] { return &Dense[T]{shape: []int{}, data: []T{v}} }

// Vector returns a rank-1 tensor of the values.
func Vector[T Elem](vs ...T) *Dense[T] {
	return &Dense[T]{shape: []int{len(vs)}, data: append([]T{}, vs...)}
}

// Zeros returns a tensor of the shape filled with T's zero value.
func Zeros[T Elem](shape ...int) (*Dense[T], error) {
	n, err := numElements(shape)
	if err != nil {
		return nil, err
	}
	return &Dense[T]{shape: append([]int{}, shape...), data: make([]T, n)}, nil
}

// wrap takes ownership of data (no copy); callers guarantee the shape fits.
func wrap[T Elem](data []T, shape []int) *Dense[T] { return &Dense[T]{shape: shape, data: data} }

func numElements(shape []int) (int, error) {
	if slices.ContainsFunc(shape, func(d int) bool { return d < 0 }) {
		return 0, errkind.New(errkind.Value, "tensor: negative dimension in shape %s", ShapeString(shape))
	}
	// Multiplied in order, refusing an overflow on the way, as TF's TensorShape::IsValid does.
	n := 1
	for _, d := range shape {
		if d != 0 && n > math.MaxInt/d {
			return 0, errkind.New(errkind.Value, "tensor: shape %s has more elements than an int counts", ShapeString(shape))
		}
		n *= d
	}
	return n, nil
}

// product is the number of elements of valid dimensions.
func product(dims []int) int {
	n := 1
	for _, d := range dims {
		n *= d
	}
	return n
}

func (t *Dense[T]) isTensor() {}

// DType is T's dtype.
func (t *Dense[T]) DType() DType { return DTypeOf[T]() }

// Shape returns a copy of the dimensions.
func (t *Dense[T]) Shape() []int { return append([]int{}, t.shape...) }

// Rank is the number of dimensions.
func (t *Dense[T]) Rank() int { return len(t.shape) }

// Size is the number of elements.
func (t *Dense[T]) Size() int { return len(t.data) }

// Data returns a copy of the elements in row-major order.
func (t *Dense[T]) Data() []T { return append([]T{}, t.data...) }

// Reshape returns the same elements with another shape; one dimension may be -1 (inferred).
func (t *Dense[T]) Reshape(shape ...int) (*Dense[T], error) {
	s, err := resolveShape(shape, len(t.data))
	if err != nil {
		return nil, err
	}
	return wrap(t.data, s), nil
}

func (t *Dense[T]) String() string {
	return fmt.Sprintf("tensor(%s, shape=%s, %v)", DTypeOf[T](), ShapeString(t.shape), t.data)
}

// ShapeString formats a shape as TF's TensorShape prints: (), (3,), (2, 3).
func ShapeString(shape []int) string {
	if len(shape) == 1 {
		return "(" + strconv.Itoa(shape[0]) + ",)"
	}
	return "(" + joinDims(shape) + ")"
}

// ShapeList formats a shape as Python prints TensorShape.as_list(): [], [3], [2, 3].
func ShapeList(shape []int) string { return "[" + joinDims(shape) + "]" }

// joinDims is the dimensions separated by ", ".
func joinDims(shape []int) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = strconv.Itoa(d)
	}
	return strings.Join(parts, ", ")
}

// resolveShape fills in a -1 dimension so the shape holds n elements.
func resolveShape(shape []int, n int) ([]int, error) {
	out := append([]int{}, shape...)
	infer := -1
	known := 1
	for i, d := range out {
		switch {
		case d == -1:
			if infer >= 0 {
				return nil, errkind.New(errkind.Value, "tensor: reshape to %v: more than one -1", shape)
			}
			infer = i
		case d < 0:
			return nil, errkind.New(errkind.Value, "tensor: reshape to %v: negative dimension", shape)
		default:
			known *= d
		}
	}
	if infer >= 0 {
		if known == 0 || n%known != 0 {
			return nil, errkind.New(errkind.Value, "tensor: cannot reshape %d elements to %v", n, shape)
		}
		out[infer] = n / known
		return out, nil
	}
	if known != n {
		return nil, errkind.New(errkind.Value, "tensor: cannot reshape %d elements to %v", n, shape)
	}
	return out, nil
}

// As returns t as a *Dense[T], or an error naming both dtypes when t holds another type.
func As[T Elem](t Tensor) (*Dense[T], error) {
	if t == nil {
		return nil, errkind.New(errkind.Value, "tensor: nil tensor, want %s", DTypeOf[T]())
	}
	d, ok := t.(*Dense[T])
	if !ok {
		return nil, errkind.New(errkind.Type, "tensor: dtype %s, want %s", t.DType(), DTypeOf[T]())
	}
	return d, nil
}

// Float64s returns t's elements converted to float64 (bool as 0 or 1), in row-major order.
func Float64s(t Tensor) []float64 {
	switch x := t.(type) {
	case *Dense[bool]:
		out := make([]float64, len(x.data))
		for i, v := range x.data {
			if v {
				out[i] = 1
			}
		}
		return out
	case *Dense[int32]:
		return convert[int32, float64](x.data)
	case *Dense[int64]:
		return convert[int64, float64](x.data)
	case *Dense[float32]:
		return convert[float32, float64](x.data)
	case *Dense[float64]:
		return append([]float64{}, x.data...)
	}
	return nil
}

func convert[F Number, T Number](in []F) []T {
	out := make([]T, len(in))
	for i, v := range in {
		out[i] = T(v)
	}
	return out
}
