package tensor

import (
	"encoding/binary"
	"math"

	"google.golang.org/protobuf/proto"

	tfframework "github.com/monolith-go/monolith/gen/pb/tensorflow/core/framework"
	"github.com/monolith-go/monolith/pkg/errkind"
)

var protoDTypes = map[DType]tfframework.DataType{
	Bool:    tfframework.DataType_DT_BOOL,
	Int32:   tfframework.DataType_DT_INT32,
	Int64:   tfframework.DataType_DT_INT64,
	Float32: tfframework.DataType_DT_FLOAT,
	Float64: tfframework.DataType_DT_DOUBLE,
}

// ToProto is TF's Tensor::AsProtoTensorContent: dtype, shape and the elements as little-endian
// bytes in tensor_content (bools one byte each).
func ToProto(t Tensor) (*tfframework.TensorProto, error) {
	if t == nil {
		return nil, errNil("serialize")
	}
	shape := &tfframework.TensorShapeProto{}
	for _, d := range t.Shape() {
		shape.Dim = append(shape.Dim, &tfframework.TensorShapeProto_Dim{Size: int64(d)})
	}
	var content []byte
	switch x := t.(type) {
	case *Dense[bool]:
		content = make([]byte, len(x.data))
		for i, v := range x.data {
			if v {
				content[i] = 1
			}
		}
	case *Dense[int32]:
		content = make([]byte, 4*len(x.data))
		for i, v := range x.data {
			binary.LittleEndian.PutUint32(content[4*i:], uint32(v))
		}
	case *Dense[int64]:
		content = make([]byte, 8*len(x.data))
		for i, v := range x.data {
			binary.LittleEndian.PutUint64(content[8*i:], uint64(v))
		}
	case *Dense[float32]:
		content = make([]byte, 4*len(x.data))
		for i, v := range x.data {
			binary.LittleEndian.PutUint32(content[4*i:], math.Float32bits(v))
		}
	case *Dense[float64]:
		content = make([]byte, 8*len(x.data))
		for i, v := range x.data {
			binary.LittleEndian.PutUint64(content[8*i:], math.Float64bits(v))
		}
	}
	return &tfframework.TensorProto{Dtype: protoDTypes[t.DType()], TensorShape: shape, TensorContent: content}, nil
}

// Serialize is tf.io.serialize_tensor: the TensorProto of t in its wire format.
func Serialize(t Tensor) ([]byte, error) {
	p, err := ToProto(t)
	if err != nil {
		return nil, err
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(p)
}

// Parse is tf.io.parse_tensor for the dtypes this package holds, reading tensor_content or the
// typed value fields (fewer typed values than elements repeat the last one, as TF does).
func Parse(data []byte) (Tensor, error) {
	var p tfframework.TensorProto
	if err := proto.Unmarshal(data, &p); err != nil {
		return nil, errkind.Wrap(errkind.Value, err)
	}
	shape := make([]int, len(p.GetTensorShape().GetDim()))
	for i, d := range p.GetTensorShape().GetDim() {
		shape[i] = int(d.GetSize())
	}
	n, err := numElements(shape)
	if err != nil {
		return nil, err
	}
	c := p.GetTensorContent()
	switch p.GetDtype() {
	case tfframework.DataType_DT_BOOL:
		return decode(c, 1, n, shape, func(b []byte) bool { return b[0] != 0 }, p.GetBoolVal())
	case tfframework.DataType_DT_INT32:
		return decode(c, 4, n, shape, func(b []byte) int32 { return int32(binary.LittleEndian.Uint32(b)) }, p.GetIntVal())
	case tfframework.DataType_DT_INT64:
		return decode(c, 8, n, shape, func(b []byte) int64 { return int64(binary.LittleEndian.Uint64(b)) }, p.GetInt64Val())
	case tfframework.DataType_DT_FLOAT:
		return decode(c, 4, n, shape, func(b []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b)) }, p.GetFloatVal())
	case tfframework.DataType_DT_DOUBLE:
		return decode(c, 8, n, shape, func(b []byte) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b)) }, p.GetDoubleVal())
	}
	return nil, errkind.New(errkind.Type, "tensor: parse of unsupported dtype %s", p.GetDtype())
}

// maxRepeatedElements bounds the elements a few typed values may fill by repetition: the input does
// not back them, so a huge shape must not make Parse allocate what it says.
const maxRepeatedElements = 1 << 24

func decode[T Elem](content []byte, width, n int, shape []int, get func([]byte) T, vals []T) (Tensor, error) {
	switch {
	case len(content) > 0 || len(vals) == 0:
		// Divided, not multiplied: width*n may overflow.
		if len(content)%width != 0 || len(content)/width != n {
			return nil, errkind.New(errkind.Value, "tensor: %d content bytes for %d elements of %d bytes", len(content), n, width)
		}
		data := make([]T, n)
		for i := range data {
			data[i] = get(content[width*i:])
		}
		return wrap(data, shape), nil
	case len(vals) < n && n > maxRepeatedElements:
		return nil, errkind.New(errkind.Value, "tensor: %d values repeated to %d elements: more than %d", len(vals), n, maxRepeatedElements)
	case len(vals) <= n:
		data := make([]T, n)
		for i := range data {
			data[i] = vals[min(i, len(vals)-1)]
		}
		return wrap(data, shape), nil
	default:
		return nil, errkind.New(errkind.Value, "tensor: %d values for %d elements", len(vals), n)
	}
}
