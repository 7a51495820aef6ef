package tensor

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/big"
	"testing"

	"google.golang.org/protobuf/proto"

	tfframework "github.com/monolith-go/monolith/gen/pb/tensorflow/core/framework"
	"github.com/monolith-go/monolith/pkg/errkind"
)

func fzProto(p *tfframework.TensorProto) []byte {
	b, err := proto.Marshal(p)
	if err != nil {
		panic(err)
	}
	return b
}

func fzShape(dims ...int64) *tfframework.TensorShapeProto {
	s := &tfframework.TensorShapeProto{}
	for _, d := range dims {
		s.Dim = append(s.Dim, &tfframework.TensorShapeProto_Dim{Size: d})
	}
	return s
}

// FuzzParse: any bytes parse to a tensor or to an error with a kind, never a panic or a runaway
// allocation; a parsed tensor has as many elements as its shape says, and serializes to bytes that
// parse to the same tensor. Run with
//
//	go test ./pkg/core/tensor -run='^$' -fuzz='^FuzzParse$' -fuzztime=60s
func FuzzParse(f *testing.F) {
	for _, t := range []Tensor{Vector[float32](1, 0.5), Scalar[int64](7), Vector[float32](), Vector(true, false), Vector[float64](math.NaN(), -0.0), Vector[int32](-1)} {
		b, err := Serialize(t)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(fzProto(&tfframework.TensorProto{Dtype: tfframework.DataType_DT_FLOAT, TensorShape: fzShape(3), FloatVal: []float32{2.5}}))
	f.Add(fzProto(&tfframework.TensorProto{Dtype: tfframework.DataType_DT_INT64, TensorShape: fzShape(2, 2), Int64Val: []int64{1, 2}}))
	f.Add(fzProto(&tfframework.TensorProto{Dtype: tfframework.DataType_DT_STRING}))
	f.Add([]byte{0xff})
	// Found by FuzzParse: a shape whose element count overflows an int parsed as a tensor of 0
	// elements; one whose byte size overflows passed the content check and panicked in make; one
	// typed value for a huge shape allocated all of it.
	f.Add(fzProto(&tfframework.TensorProto{Dtype: tfframework.DataType_DT_FLOAT, TensorShape: fzShape(1<<62, 4)}))
	f.Add(fzProto(&tfframework.TensorProto{Dtype: tfframework.DataType_DT_DOUBLE, TensorShape: fzShape(1 << 61)}))
	f.Add(fzProto(&tfframework.TensorProto{Dtype: tfframework.DataType_DT_FLOAT, TensorShape: fzShape(1 << 30), FloatVal: []float32{1}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		x, err := Parse(b)
		if err != nil {
			if k := errkind.Of(err); k != errkind.Value && k != errkind.Type {
				t.Fatalf("Parse(%x): %v (kind %v)", b, err, k)
			}
			return
		}
		n := big.NewInt(1)
		for _, d := range x.Shape() {
			n.Mul(n, big.NewInt(int64(d)))
		}
		if !n.IsInt64() || n.Int64() != int64(x.Size()) || x.Rank() != len(x.Shape()) {
			t.Fatalf("Parse(%x): shape %v with %d elements", b, x.Shape(), x.Size())
		}
		out, err := Serialize(x)
		if err != nil {
			t.Fatalf("Serialize(%v): %v", x, err)
		}
		y, err := Parse(out)
		if err != nil {
			t.Fatalf("Parse(Serialize(%v)): %v", x, err)
		}
		if out2, _ := Serialize(y); !bytes.Equal(out, out2) || y.DType() != x.DType() {
			t.Fatalf("%v serialized, parsed and serialized again differs", x)
		}
	})
}

// FuzzTypedValues: a tensor given as tensor_content parses the same as one given as its typed
// value fields, whole or with the repeated last values left out (as TF writes them).
func FuzzTypedValues(f *testing.F) {
	f.Add(uint8(0), []byte{1, 2, 3, 4, 5, 6, 7, 8}, uint8(2), uint8(1))
	f.Add(uint8(3), []byte("\x00\x00\x80\x3f"), uint8(1), uint8(0))
	f.Add(uint8(4), []byte{}, uint8(0), uint8(0))
	f.Fuzz(func(t *testing.T, kind uint8, raw []byte, rows uint8, drop uint8) {
		dtypes := []tfframework.DataType{tfframework.DataType_DT_BOOL, tfframework.DataType_DT_INT32, tfframework.DataType_DT_INT64,
			tfframework.DataType_DT_FLOAT, tfframework.DataType_DT_DOUBLE}
		k := int(kind) % len(dtypes)
		w := []int{1, 4, 8, 4, 8}[k]
		n := len(raw) / w
		r := int64(rows%4) + 1
		if n%int(r) != 0 {
			n -= n % int(r)
		}
		content := raw[:n*w]
		shape := fzShape(r, int64(n)/r)
		cp := &tfframework.TensorProto{Dtype: dtypes[k], TensorShape: shape, TensorContent: content}
		tp := &tfframework.TensorProto{Dtype: dtypes[k], TensorShape: shape}
		for i := 0; i < n; i++ {
			e := content[i*w:]
			switch k {
			case 0:
				tp.BoolVal = append(tp.BoolVal, e[0] != 0)
			case 1:
				tp.IntVal = append(tp.IntVal, int32(binary.LittleEndian.Uint32(e)))
			case 2:
				tp.Int64Val = append(tp.Int64Val, int64(binary.LittleEndian.Uint64(e)))
			case 3:
				tp.FloatVal = append(tp.FloatVal, math.Float32frombits(binary.LittleEndian.Uint32(e)))
			case 4:
				tp.DoubleVal = append(tp.DoubleVal, math.Float64frombits(binary.LittleEndian.Uint64(e)))
			}
		}
		// Leave out trailing values equal to the one before them: they repeat.
		trim := func(l int) int {
			for d := 0; d < int(drop) && l > 1 && bytes.Equal(content[(l-1)*w:l*w], content[(l-2)*w:(l-1)*w]); d++ {
				l--
			}
			return l
		}
		l := trim(n)
		tp.BoolVal, tp.IntVal, tp.Int64Val = cut(tp.BoolVal, l), cut(tp.IntVal, l), cut(tp.Int64Val, l)
		tp.FloatVal, tp.DoubleVal = cut(tp.FloatVal, l), cut(tp.DoubleVal, l)
		fromContent, err1 := Parse(fzProto(cp))
		fromVals, err2 := Parse(fzProto(tp))
		if err1 != nil || err2 != nil {
			if n == 0 && err1 == nil && err2 == nil {
				return
			}
			t.Fatalf("content: %v; typed values: %v", err1, err2)
		}
		b1, _ := Serialize(fromContent)
		b2, _ := Serialize(fromVals)
		if !bytes.Equal(b1, b2) {
			t.Fatalf("content %v, typed values %v", fromContent, fromVals)
		}
	})
}

func cut[T any](s []T, n int) []T {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// TestParseRefusesUnbackedSizes: shapes whose element or byte counts overflow, and few typed values
// repeated to a huge shape, are Value errors (found by FuzzParse: a tensor of 0 elements, a panic
// in make, an allocation of the whole shape).
func TestParseRefusesUnbackedSizes(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    *tfframework.TensorProto
	}{
		{"element count overflows", &tfframework.TensorProto{Dtype: tfframework.DataType_DT_FLOAT, TensorShape: fzShape(1<<62, 4)}},
		{"byte count overflows", &tfframework.TensorProto{Dtype: tfframework.DataType_DT_DOUBLE, TensorShape: fzShape(1 << 61)}},
		{"one value for 2**30 elements", &tfframework.TensorProto{Dtype: tfframework.DataType_DT_FLOAT, TensorShape: fzShape(1 << 30), FloatVal: []float32{1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if x, err := Parse(fzProto(tc.p)); errkind.Of(err) != errkind.Value {
				t.Fatalf("Parse = %v, %v; want a Value error", x, err)
			}
		})
	}
	// Within the bound, few values still fill the shape, as in TF.
	x, err := Parse(fzProto(&tfframework.TensorProto{Dtype: tfframework.DataType_DT_INT32, TensorShape: fzShape(0, 1<<62), IntVal: nil}))
	if err != nil || x.Size() != 0 {
		t.Fatalf("empty shape with a huge dimension: %v, %v", x, err)
	}
}
