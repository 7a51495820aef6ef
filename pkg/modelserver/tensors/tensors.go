// Package tensors converts between TensorFlow TensorProtos and Go slices for the model server's
// signatures. Values are read from the typed repeated field or from tensor_content (little-endian,
// as TensorFlow writes it), whichever the sender filled; numbers are written to tensor_content,
// which costs one copy instead of a per-value encoding.
package tensors

import (
	"encoding/binary"
	"math"

	tfframework "github.com/monolith-go/monolith/gen/pb/tensorflow/core/framework"
	tfprotobuf "github.com/monolith-go/monolith/gen/pb/tensorflow/core/protobuf"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// Shape returns the tensor's dimensions (nil for a scalar).
func Shape(t *tfframework.TensorProto) []int64 {
	var out []int64
	for _, d := range t.GetTensorShape().GetDim() {
		out = append(out, d.GetSize())
	}
	return out
}

// NumElements is the product of the shape's dimensions (1 for a scalar), -1 when a dimension is
// negative (unknown).
func NumElements(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return -1
		}
		n *= d
	}
	return n
}

func shapeProto(shape []int64) *tfframework.TensorShapeProto {
	s := &tfframework.TensorShapeProto{}
	for _, d := range shape {
		s.Dim = append(s.Dim, &tfframework.TensorShapeProto_Dim{Size: d})
	}
	return s
}

// checkCount checks that a tensor holds as many values as its shape says.
func checkCount(t *tfframework.TensorProto, have int) error {
	if want := NumElements(Shape(t)); want != int64(have) {
		return errkind.New(errkind.Value, "tensor of shape %v holds %d values", Shape(t), have)
	}
	return nil
}

func checkType(t *tfframework.TensorProto, want tfframework.DataType) error {
	if t.GetDtype() != want {
		return errkind.New(errkind.Value, "tensor of type %v, want %v", t.GetDtype(), want)
	}
	return nil
}

// Int64s returns the values of a DT_INT64 tensor.
func Int64s(t *tfframework.TensorProto) ([]int64, error) {
	if err := checkType(t, tfframework.DataType_DT_INT64); err != nil {
		return nil, err
	}
	out := t.GetInt64Val()
	if c := t.GetTensorContent(); len(c) > 0 {
		if len(c)%8 != 0 {
			return nil, errkind.New(errkind.Value, "DT_INT64 tensor_content of %d bytes", len(c))
		}
		out = make([]int64, len(c)/8)
		for i := range out {
			out[i] = int64(binary.LittleEndian.Uint64(c[8*i:]))
		}
	}
	return out, checkCount(t, len(out))
}

// Float32s returns the values of a DT_FLOAT tensor.
func Float32s(t *tfframework.TensorProto) ([]float32, error) {
	if err := checkType(t, tfframework.DataType_DT_FLOAT); err != nil {
		return nil, err
	}
	out := t.GetFloatVal()
	if c := t.GetTensorContent(); len(c) > 0 {
		if len(c)%4 != 0 {
			return nil, errkind.New(errkind.Value, "DT_FLOAT tensor_content of %d bytes", len(c))
		}
		out = make([]float32, len(c)/4)
		DecodeFloat32s(c, out)
	}
	return out, checkCount(t, len(out))
}

// DecodeFloat32s decodes len(out) little-endian float32s from b into out.
func DecodeFloat32s(b []byte, out []float32) {
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
}

// Strings returns the values of a DT_STRING tensor (shared with t, not copied).
func Strings(t *tfframework.TensorProto) ([][]byte, error) {
	if err := checkType(t, tfframework.DataType_DT_STRING); err != nil {
		return nil, err
	}
	out := t.GetStringVal()
	return out, checkCount(t, len(out))
}

// FromInt64s is a DT_INT64 tensor of shape holding vals.
func FromInt64s(vals []int64, shape ...int64) *tfframework.TensorProto {
	c := make([]byte, 8*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint64(c[8*i:], uint64(v))
	}
	return &tfframework.TensorProto{Dtype: tfframework.DataType_DT_INT64, TensorShape: shapeProto(shape), TensorContent: c}
}

// FromFloat32s is a DT_FLOAT tensor of shape holding vals.
func FromFloat32s(vals []float32, shape ...int64) *tfframework.TensorProto {
	c := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(c[4*i:], math.Float32bits(v))
	}
	return &tfframework.TensorProto{Dtype: tfframework.DataType_DT_FLOAT, TensorShape: shapeProto(shape), TensorContent: c}
}

// FromStrings is a DT_STRING tensor of shape holding vals (not copied).
func FromStrings(vals [][]byte, shape ...int64) *tfframework.TensorProto {
	return &tfframework.TensorProto{Dtype: tfframework.DataType_DT_STRING, TensorShape: shapeProto(shape), StringVal: vals}
}

// Info describes a signature's input or output: the tensor name, its type and shape (-1: any size).
func Info(name string, dtype tfframework.DataType, shape ...int64) *tfprotobuf.TensorInfo {
	return &tfprotobuf.TensorInfo{Encoding: &tfprotobuf.TensorInfo_Name{Name: name}, Dtype: dtype, TensorShape: shapeProto(shape)}
}
