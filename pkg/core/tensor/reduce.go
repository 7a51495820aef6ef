package tensor

import (
	"math"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// Reduction names a full reduction to a scalar (tf.reduce_* without axes).
type Reduction int

// The reductions the host calls use.
const (
	ReduceSum Reduction = iota
	ReduceMean
	ReduceMax
	ReduceMin
)

var reductionNames = [...]string{"reduce_sum", "reduce_mean", "reduce_max", "reduce_min"}

func (r Reduction) String() string { return reductionNames[r] }

// Reduce reduces every element of a numeric tensor to a scalar of the same dtype, as TF does on
// the CPU: an integer mean truncates toward zero; an empty tensor gives the reducer's identity
// (sum and integer mean 0, float mean NaN, max the lowest value, min the highest). Bool tensors
// are rejected, as TF's kernels are not defined for them.
func Reduce(t Tensor, r Reduction) (Tensor, error) {
	switch x := t.(type) {
	case *Dense[int32]:
		return reduceInt(x, r), nil
	case *Dense[int64]:
		return reduceInt(x, r), nil
	case *Dense[float32]:
		return reduceFloat(x, r), nil
	case *Dense[float64]:
		return reduceFloat(x, r), nil
	case *Dense[bool]:
		return nil, errkind.New(errkind.Type, "tensor: %s is not defined for bool tensors", r)
	}
	return nil, errNil(r.String())
}

func reduceInt[T int32 | int64](t *Dense[T], r Reduction) *Dense[T] {
	var lowest, highest T
	if DTypeOf[T]() == Int32 {
		lowest, highest = T(math.MinInt32), T(math.MaxInt32)
	} else {
		var minI64, maxI64 int64 = math.MinInt64, math.MaxInt64
		lowest, highest = T(minI64), T(maxI64)
	}
	switch r {
	case ReduceMax:
		m := lowest
		for _, v := range t.data {
			m = max(m, v)
		}
		return Scalar(m)
	case ReduceMin:
		m := highest
		for _, v := range t.data {
			m = min(m, v)
		}
		return Scalar(m)
	}
	var sum T // accumulates in T and wraps like TF's integer kernels
	for _, v := range t.data {
		sum += v
	}
	if r == ReduceMean && len(t.data) > 0 {
		sum /= T(len(t.data))
	}
	return Scalar(sum)
}

func reduceFloat[T float32 | float64](t *Dense[T], r Reduction) *Dense[T] {
	switch r {
	case ReduceMax:
		m := T(-maxFinite[T]())
		for _, v := range t.data {
			if v > m || v != v {
				m = v
			}
		}
		return Scalar(m)
	case ReduceMin:
		m := T(maxFinite[T]())
		for _, v := range t.data {
			if v < m || v != v {
				m = v
			}
		}
		return Scalar(m)
	}
	// Summed in float64 (exact enough to be independent of the order Eigen's vectorised
	// reduction adds in), then rounded once to T.
	var sum float64
	for _, v := range t.data {
		sum += float64(v)
	}
	if r == ReduceMean {
		sum /= float64(len(t.data)) // 0/0 is NaN, TF's empty float mean
	}
	return Scalar(T(sum))
}

// maxFinite is the largest finite value of T (TF's identity for min; its negation for max).
func maxFinite[T float32 | float64]() float64 {
	if DTypeOf[T]() == Float32 {
		return math.MaxFloat32
	}
	return math.MaxFloat64
}
