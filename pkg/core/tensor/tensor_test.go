package tensor

import (
	"encoding/hex"
	"math"
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"

	tfframework "github.com/monolith-go/monolith/gen/pb/tensorflow/core/framework"
	"github.com/monolith-go/monolith/pkg/errkind"
)

func mustNew[T Elem](t *testing.T, data []T, shape ...int) *Dense[T] {
	t.Helper()
	d, err := New(data, shape)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestNewAndReshape(t *testing.T) {
	d := mustNew(t, []int32{1, 2, 3, 4, 5, 6}, 2, 3)
	if d.DType() != Int32 || d.Rank() != 2 || d.Size() != 6 || !reflect.DeepEqual(d.Shape(), []int{2, 3}) {
		t.Fatalf("got %v", d)
	}
	r, err := d.Reshape(-1, 2)
	if err != nil || !reflect.DeepEqual(r.Shape(), []int{3, 2}) {
		t.Fatalf("reshape: %v %v", r, err)
	}
	for _, bad := range [][]int{{4, 2}, {-1, -1}, {-1, 4}, {-2, 3}} {
		if _, err := d.Reshape(bad...); errkind.Of(err) != errkind.Value {
			t.Errorf("reshape %v: err %v", bad, err)
		}
	}
	if _, err := New([]int32{1, 2}, []int{3}); errkind.Of(err) != errkind.Value {
		t.Errorf("short data: %v", err)
	}
	if _, err := New([]int32{}, []int{-1}); errkind.Of(err) != errkind.Value {
		t.Errorf("negative dim: %v", err)
	}
	// Data is a copy.
	data := d.Data()
	data[0] = 99
	if d.Data()[0] != 1 {
		t.Error("Data aliases the tensor")
	}
	if s := Scalar(int64(7)); s.Rank() != 0 || s.Size() != 1 {
		t.Errorf("scalar %v", s)
	}
	if z, err := Zeros[float32](2, 2); err != nil || z.Size() != 4 {
		t.Errorf("zeros %v %v", z, err)
	}
}

func TestShapeStrings(t *testing.T) {
	for _, c := range []struct {
		shape     []int
		str, list string
	}{{nil, "()", "[]"}, {[]int{3}, "(3,)", "[3]"}, {[]int{2, 3}, "(2, 3)", "[2, 3]"}} {
		if got := ShapeString(c.shape); got != c.str {
			t.Errorf("ShapeString(%v) = %s", c.shape, got)
		}
		if got := ShapeList(c.shape); got != c.list {
			t.Errorf("ShapeList(%v) = %s", c.shape, got)
		}
	}
	if Float32.String() != "float32" || DType(42).String() != "dtype(42)" {
		t.Error("dtype names")
	}
}

func TestConcatSplitRoundTrip(t *testing.T) {
	a := mustNew(t, []float32{1, 2, 3, 4}, 2, 2)
	b := mustNew(t, []float32{5, 6}, 2, 1)
	c, err := Concat([]Tensor{a, b}, 1)
	if err != nil {
		t.Fatal(err)
	}
	got := c.(*Dense[float32])
	if !reflect.DeepEqual(got.Data(), []float32{1, 2, 5, 3, 4, 6}) || !reflect.DeepEqual(got.Shape(), []int{2, 3}) {
		t.Fatalf("concat axis 1: %v", got)
	}
	parts, err := Split(c, []int{2, 1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(parts[0], Tensor(a)) || !reflect.DeepEqual(parts[1], Tensor(b)) {
		t.Fatalf("split: %v", parts)
	}
	rows, err := Concat([]Tensor{a, a}, 0)
	if err != nil || !reflect.DeepEqual(rows.Shape(), []int{4, 2}) {
		t.Fatalf("concat axis 0: %v %v", rows, err)
	}
	if _, err := Concat([]Tensor{a, Vector[int32](1)}, 0); errkind.Of(err) != errkind.Type {
		t.Errorf("mixed dtypes: %v", err)
	}
	if _, err := Concat([]Tensor{a, b}, 0); errkind.Of(err) != errkind.Value {
		t.Errorf("mismatched dims: %v", err)
	}
	if _, err := Split(c, []int{2, 2}, 1); errkind.Of(err) != errkind.Value {
		t.Errorf("bad sizes: %v", err)
	}
}

func TestSqueezeExpandSliceGatherRepeat(t *testing.T) {
	one := mustNew(t, []int64{5}, 1, 1)
	s, _ := Squeeze(one)
	if s.Rank() != 0 {
		t.Errorf("squeeze (1,1) = %v", s)
	}
	row := mustNew(t, []int64{1, 2, 3}, 1, 3)
	s, _ = Squeeze(row)
	if !reflect.DeepEqual(s.Shape(), []int{3}) {
		t.Errorf("squeeze (1,3) = %v", s)
	}
	e, err := ExpandDims(Vector[int32](1, 2), -1)
	if err != nil || !reflect.DeepEqual(e.Shape(), []int{2, 1}) {
		t.Errorf("expand -1: %v %v", e, err)
	}
	m := mustNew(t, []int32{1, 2, 3, 4, 5, 6}, 2, 3)
	sl, err := Slice(m, []int{0, 1}, []int{-1, 2})
	if err != nil || !reflect.DeepEqual(sl.Data(), []int32{2, 3, 5, 6}) {
		t.Errorf("slice: %v %v", sl, err)
	}
	if _, err := Slice(m, []int{0, 0}, []int{-1, 4}); errkind.Of(err) != errkind.Value {
		t.Errorf("slice out of bounds: %v", err)
	}
	g, err := Gather(m, Vector[int64](5, 0))
	if err != nil || !reflect.DeepEqual(g.Data(), []int32{6, 1}) {
		t.Errorf("gather: %v %v", g, err)
	}
	g, _ = Gather(m, Scalar[int64](2))
	if g.Rank() != 0 || g.Data()[0] != 3 {
		t.Errorf("gather scalar: %v", g)
	}
	if _, err := Gather(m, Vector[int64](6)); errkind.Of(err) != errkind.Value {
		t.Errorf("gather out of range: %v", err)
	}
	r, err := Repeat(mustNew(t, []int64{7, 8, 9, 10}, 2, 2), 2, 1)
	if err != nil || !reflect.DeepEqual(r.Data(), []int64{7, 7, 8, 8, 9, 9, 10, 10}) || !reflect.DeepEqual(r.Shape(), []int{2, 4}) {
		t.Errorf("repeat: %v %v", r, err)
	}
	c, _ := Cast[int32](Vector(true, false))
	if !reflect.DeepEqual(c.Data(), []int32{1, 0}) {
		t.Errorf("cast bool: %v", c)
	}
	f, _ := Cast[bool](Vector[float32](0, float32(math.NaN()), -1))
	if !reflect.DeepEqual(f.Data(), []bool{false, true, true}) {
		t.Errorf("cast to bool: %v", f)
	}
	big, _ := Cast[int64](Vector[int64](math.MaxInt64))
	if big.Data()[0] != math.MaxInt64 {
		t.Errorf("int64 cast lost bits: %v", big)
	}
}

func TestReduce(t *testing.T) {
	for _, c := range []struct {
		name string
		in   Tensor
		r    Reduction
		want Tensor
	}{
		{"int mean truncates", Vector[int32](1, 2, 2), ReduceMean, Scalar[int32](1)},
		{"negative int mean toward zero", Vector[int64](-1, -2), ReduceMean, Scalar[int64](-1)},
		{"float mean", Vector[float32](1, 2), ReduceMean, Scalar[float32](1.5)},
		{"int max", Vector[int32](3, -1, 7), ReduceMax, Scalar[int32](7)},
		{"int min", Vector[int64](3, -1, 7), ReduceMin, Scalar[int64](-1)},
		{"float sum", Vector[float64](0.5, 0.25), ReduceSum, Scalar(0.75)},
		{"empty int mean is 0", Vector[int64](), ReduceMean, Scalar[int64](0)},
		{"empty int max is lowest", Vector[int32](), ReduceMax, Scalar[int32](math.MinInt32)},
		{"empty float min is highest", Vector[float32](), ReduceMin, Scalar[float32](math.MaxFloat32)},
		{"empty float sum", Vector[float32](), ReduceSum, Scalar[float32](0)},
	} {
		got, err := Reduce(c.in, c.r)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %v %v, want %v", c.name, got, err, c.want)
		}
	}
	nan, _ := Reduce(Vector[float32](), ReduceMean)
	if v := nan.(*Dense[float32]).Data()[0]; !math.IsNaN(float64(v)) {
		t.Errorf("empty float mean = %v, want NaN", v)
	}
	if _, err := Reduce(Vector(true), ReduceSum); errkind.Of(err) != errkind.Type {
		t.Errorf("bool reduce: %v", err)
	}
}

// The expected bytes are the TensorProto wire format tf.io.serialize_tensor writes: dtype (field
// 1), tensor_shape (field 2, one dim message per dimension, a zero size omitted) and
// tensor_content (field 4, little-endian, omitted when empty).
func TestSerialize(t *testing.T) {
	for _, c := range []struct {
		name string
		t    Tensor
		hex  string
	}{
		{"float32 vector", Vector[float32](1, 0.5), "0801" + "120412020802" + "2208" + "0000803f0000003f"},
		{"int64 scalar", Scalar[int64](7), "0809" + "1200" + "2208" + "0700000000000000"},
		{"empty float32 vector", Vector[float32](), "0801" + "12021200"},
		{"bool matrix", mustNew(t, []bool{true, false}, 1, 2), "080a" + "1208120208011202" + "0802" + "22020100"},
	} {
		b, err := Serialize(c.t)
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(b); got != c.hex {
			t.Errorf("%s: %s, want %s", c.name, got, c.hex)
		}
		back, err := Parse(b)
		if err != nil || !reflect.DeepEqual(back, c.t) {
			t.Errorf("%s: parse back %v %v", c.name, back, err)
		}
	}
}

func TestParseTypedValues(t *testing.T) {
	shape := &tfframework.TensorShapeProto{Dim: []*tfframework.TensorShapeProto_Dim{{Size: 3}}}
	for _, c := range []struct {
		name string
		p    *tfframework.TensorProto
		want Tensor
	}{
		{"one value fills", &tfframework.TensorProto{Dtype: tfframework.DataType_DT_FLOAT, TensorShape: shape, FloatVal: []float32{2.5}}, Vector[float32](2.5, 2.5, 2.5)},
		{"last value repeats", &tfframework.TensorProto{Dtype: tfframework.DataType_DT_INT64, TensorShape: shape, Int64Val: []int64{1, 2}}, Vector[int64](1, 2, 2)},
		{"all values", &tfframework.TensorProto{Dtype: tfframework.DataType_DT_INT32, TensorShape: shape, IntVal: []int32{1, 2, 3}}, Vector[int32](1, 2, 3)},
	} {
		b, err := proto.Marshal(c.p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Parse(b)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %v %v", c.name, got, err)
		}
	}
	tooMany := &tfframework.TensorProto{Dtype: tfframework.DataType_DT_FLOAT, TensorShape: shape, FloatVal: []float32{1, 2, 3, 4}}
	b, _ := proto.Marshal(tooMany)
	if _, err := Parse(b); errkind.Of(err) != errkind.Value {
		t.Errorf("too many values: %v", err)
	}
	str, _ := proto.Marshal(&tfframework.TensorProto{Dtype: tfframework.DataType_DT_STRING})
	if _, err := Parse(str); errkind.Of(err) != errkind.Type {
		t.Errorf("string tensor: %v", err)
	}
	if _, err := Parse([]byte{0xff}); errkind.Of(err) != errkind.Value {
		t.Errorf("garbage: %v", err)
	}
}

func TestEveryDType(t *testing.T) {
	for _, x := range []Tensor{
		mustNew(t, []bool{true, false, true, true}, 2, 2),
		mustNew(t, []int32{1, 2, 3, 4}, 2, 2),
		mustNew(t, []int64{1, 2, 3, 4}, 2, 2),
		mustNew(t, []float32{1, 2, 3, 4}, 2, 2),
		mustNew(t, []float64{1, 2, 3, 4}, 2, 2),
	} {
		name := x.DType().String()
		flat, err := Reshape(x, -1)
		if err != nil || flat.Rank() != 1 {
			t.Errorf("%s reshape: %v %v", name, flat, err)
		}
		cat, err := Concat([]Tensor{x, x}, -1)
		if err != nil || !reflect.DeepEqual(cat.Shape(), []int{2, 4}) {
			t.Errorf("%s concat: %v %v", name, cat, err)
		}
		parts, err := Split(cat, []int{2, 2}, 1)
		if err != nil || !reflect.DeepEqual(parts[0], x) {
			t.Errorf("%s split: %v %v", name, parts, err)
		}
		if got := Float64s(x); !reflect.DeepEqual(got, []float64{1, 2, 3, 4}) && name != "bool" {
			t.Errorf("%s float64s: %v", name, got)
		}
		b, err := Serialize(x)
		if err != nil {
			t.Fatal(err)
		}
		if back, err := Parse(b); err != nil || !reflect.DeepEqual(back, x) {
			t.Errorf("%s serialize round trip: %v %v", name, back, err)
		}
		for _, target := range []func(Tensor) (Tensor, error){
			func(t Tensor) (Tensor, error) { return Cast[bool](t) },
			func(t Tensor) (Tensor, error) { return Cast[int32](t) },
			func(t Tensor) (Tensor, error) { return Cast[float64](t) },
		} {
			if c, err := target(x); err != nil || !reflect.DeepEqual(c.Shape(), []int{2, 2}) {
				t.Errorf("%s cast: %v %v", name, c, err)
			}
		}
	}
	if got := Float64s(Vector(true, false)); !reflect.DeepEqual(got, []float64{1, 0}) {
		t.Errorf("bool float64s %v", got)
	}
	if DTypeOf[float64]() != Float64 || DTypeOf[bool]() != Bool {
		t.Error("DTypeOf")
	}
}

func TestNilAndAs(t *testing.T) {
	for name, err := range map[string]error{
		"reshape": second(Reshape(nil, 1)),
		"squeeze": second(Squeeze(nil)),
		"expand":  second(ExpandDims(nil, 0)),
		"split":   second(Split(nil, nil, 0)),
		"concat":  second(Concat([]Tensor{nil}, 0)),
		"empty":   second(Concat(nil, 0)),
		"reduce":  second(Reduce(nil, ReduceSum)),
		"cast":    second(Cast[int32](nil)),
		"proto":   second(ToProto(nil)),
		"as":      second(As[int32](nil)),
	} {
		if errkind.Of(err) != errkind.Value {
			t.Errorf("%s of nil: %v", name, err)
		}
	}
	if _, err := As[int32](Vector[float32](1)); errkind.Of(err) != errkind.Type {
		t.Errorf("as wrong dtype: %v", err)
	}
	if d, err := As[float32](Vector[float32](1)); err != nil || d.Size() != 1 {
		t.Errorf("as: %v %v", d, err)
	}
	if s := mustNew(t, []int32{1, 2}, 1, 2).String(); s != "tensor(int32, shape=(1, 2), [1 2])" {
		t.Errorf("string %s", s)
	}
	if _, err := ExpandDims(Vector[int32](1), 3); errkind.Of(err) != errkind.Value {
		t.Errorf("expand axis: %v", err)
	}
	if _, err := Repeat(Vector[int32](1), 2, 1); errkind.Of(err) != errkind.Value {
		t.Errorf("repeat axis: %v", err)
	}
	if _, err := Repeat(Vector[int32](1), -1, 0); errkind.Of(err) != errkind.Value {
		t.Errorf("repeat count: %v", err)
	}
	if _, err := SplitDense(Vector[int32](1, 2), []int{-1, 3}, 0); errkind.Of(err) != errkind.Value {
		t.Errorf("negative split: %v", err)
	}
	if _, err := ConcatDense([]*Dense[int32]{Vector[int32](1)}, 1); errkind.Of(err) != errkind.Value {
		t.Errorf("concat axis: %v", err)
	}
	if _, err := Slice(Vector[int32](1), []int{0, 0}, []int{1, 1}); errkind.Of(err) != errkind.Value {
		t.Errorf("slice rank: %v", err)
	}
}

func second[T any](_ T, err error) error { return err }

func TestReduceFloat64(t *testing.T) {
	for _, c := range []struct {
		r    Reduction
		want float64
	}{{ReduceMax, 3}, {ReduceMin, -1}, {ReduceSum, 2}, {ReduceMean, 2.0 / 3}} {
		got, err := Reduce(Vector[float64](3, -1, 0), c.r)
		if err != nil || got.(*Dense[float64]).Data()[0] != c.want {
			t.Errorf("%s: %v %v", c.r, got, err)
		}
	}
	got, _ := Reduce(Vector[float64](), ReduceMax)
	if got.(*Dense[float64]).Data()[0] != -math.MaxFloat64 {
		t.Errorf("empty float64 max %v", got)
	}
	got, _ = Reduce(Vector[float32](1, float32(math.NaN())), ReduceMax)
	if !math.IsNaN(float64(got.(*Dense[float32]).Data()[0])) {
		t.Errorf("NaN max %v", got)
	}
}
