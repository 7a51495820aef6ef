package tensors

import (
	"math"
	"slices"
	"testing"

	tfframework "github.com/monolith-go/monolith/gen/pb/tensorflow/core/framework"
)

func shape(dims ...int64) *tfframework.TensorShapeProto { return shapeProto(dims) }

func TestRoundTrip(t *testing.T) {
	ids := []int64{0, -1, math.MaxInt64, math.MinInt64, 42}
	got, err := Int64s(FromInt64s(ids, int64(len(ids))))
	if err != nil || !slices.Equal(got, ids) {
		t.Errorf("Int64s(FromInt64s) = %v, %v; want %v", got, err, ids)
	}
	fs := []float32{0, -0.5, float32(math.Inf(1)), math.MaxFloat32, 1e-40, 3, 4}
	gotf, err := Float32s(FromFloat32s(fs[:6], 2, 3))
	if err != nil || !slices.Equal(gotf, fs[:6]) {
		t.Errorf("Float32s(FromFloat32s) = %v, %v; want %v", gotf, err, fs[:6])
	}
	strs := [][]byte{[]byte("a"), nil, []byte("ccc")}
	gots, err := Strings(FromStrings(strs, 3))
	if err != nil || len(gots) != 3 || string(gots[2]) != "ccc" {
		t.Errorf("Strings(FromStrings) = %q, %v", gots, err)
	}
}

// TestTypedFields reads values a client put in the typed repeated fields (as Python's
// make_tensor_proto does), not in tensor_content.
func TestTypedFields(t *testing.T) {
	got, err := Int64s(&tfframework.TensorProto{Dtype: tfframework.DataType_DT_INT64, TensorShape: shape(2), Int64Val: []int64{7, 8}})
	if err != nil || !slices.Equal(got, []int64{7, 8}) {
		t.Errorf("Int64s(int64_val) = %v, %v", got, err)
	}
	gotf, err := Float32s(&tfframework.TensorProto{Dtype: tfframework.DataType_DT_FLOAT, TensorShape: shape(1, 2), FloatVal: []float32{.5, 2}})
	if err != nil || !slices.Equal(gotf, []float32{.5, 2}) {
		t.Errorf("Float32s(float_val) = %v, %v", gotf, err)
	}
	scalar, err := Strings(&tfframework.TensorProto{Dtype: tfframework.DataType_DT_STRING, StringVal: [][]byte{[]byte("t")}})
	if err != nil || len(scalar) != 1 {
		t.Errorf("Strings(scalar) = %q, %v", scalar, err)
	}
}

func TestBadTensors(t *testing.T) {
	tests := []struct {
		name string
		read func() error
	}{
		{"int64 of wrong type", func() error { _, err := Int64s(FromFloat32s([]float32{1}, 1)); return err }},
		{"int64 count and shape disagree", func() error { _, err := Int64s(FromInt64s([]int64{1, 2}, 3)); return err }},
		{"int64 content not whole values", func() error {
			_, err := Int64s(&tfframework.TensorProto{Dtype: tfframework.DataType_DT_INT64, TensorShape: shape(1), TensorContent: make([]byte, 7)})
			return err
		}},
		{"float content not whole values", func() error {
			_, err := Float32s(&tfframework.TensorProto{Dtype: tfframework.DataType_DT_FLOAT, TensorShape: shape(1), TensorContent: make([]byte, 5)})
			return err
		}},
		{"float of wrong type", func() error { _, err := Float32s(FromInt64s([]int64{1}, 1)); return err }},
		{"strings of wrong type", func() error { _, err := Strings(FromInt64s([]int64{1}, 1)); return err }},
		{"strings of unknown dimension", func() error { _, err := Strings(FromStrings([][]byte{nil}, -1)); return err }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.read(); err == nil {
				t.Error("no error")
			}
		})
	}
}

func TestInfo(t *testing.T) {
	tests := []struct {
		name  string
		dtype tfframework.DataType
		shape []int64
	}{
		{"scalar", tfframework.DataType_DT_INT32, nil},
		{"vector of any size", tfframework.DataType_DT_STRING, []int64{-1}},
		{"matrix", tfframework.DataType_DT_FLOAT, []int64{-1, 16}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info := Info(tt.name, tt.dtype, tt.shape...)
			var dims []int64
			for _, d := range info.GetTensorShape().GetDim() {
				dims = append(dims, d.GetSize())
			}
			if info.GetName() != tt.name || info.GetDtype() != tt.dtype || !slices.Equal(dims, tt.shape) || info.GetTensorShape() == nil {
				t.Errorf("Info = %v, want name %q, dtype %v, shape %v", info, tt.name, tt.dtype, tt.shape)
			}
		})
	}
}
