package ps

import (
	"encoding/binary"
	"math"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	tensorpb "github.com/monolith-go/monolith/gen/pb/tensorflow/core/framework"
)

func TestCodecRoundTrip(t *testing.T) {
	tests := []struct {
		name   string
		ids    []int64
		floats []float32
	}{
		{name: "empty"},
		{name: "one", ids: []int64{42}, floats: []float32{1.5}},
		{name: "extremes", ids: []int64{math.MinInt64, -1, 0, 1, math.MaxInt64}, floats: []float32{float32(math.Inf(-1)), -0.0, math.SmallestNonzeroFloat32, math.MaxFloat32}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := int64Bytes(tc.ids)
			if len(b) != 8*len(tc.ids) {
				t.Fatalf("%d bytes for %d ids", len(b), len(tc.ids))
			}
			for i, id := range tc.ids {
				if got := int64(binary.LittleEndian.Uint64(b[8*i:])); got != id {
					t.Fatalf("id %d encodes as %d: not little-endian int64", id, got)
				}
			}
			// A copy at an odd offset takes the unaligned path.
			odd := append(make([]byte, 1, len(b)+1), b...)[1:]
			for _, in := range [][]byte{b, odd} {
				got, err := decodeInt64s("ids", in)
				if err != nil || (len(tc.ids) > 0 && !reflect.DeepEqual(got, tc.ids)) || len(got) != len(tc.ids) {
					t.Fatalf("decodeInt64s = %v, %v; want %v", got, err, tc.ids)
				}
			}
			fb := float32Bytes(tc.floats)
			for i, f := range tc.floats {
				if got := binary.LittleEndian.Uint32(fb[4*i:]); got != math.Float32bits(f) {
					t.Fatalf("float %v encodes as %#x", f, got)
				}
			}
			oddf := append(make([]byte, 1, len(fb)+1), fb...)[1:]
			for _, in := range [][]byte{fb, oddf} {
				got, err := decodeFloat32s("floats", in)
				if err != nil || len(got) != len(tc.floats) {
					t.Fatalf("decodeFloat32s = %v, %v", got, err)
				}
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(tc.floats[i]) {
						t.Fatalf("float %d = %v, want %v", i, got[i], tc.floats[i])
					}
				}
			}
		})
	}
}

func TestCodecBadLength(t *testing.T) {
	if _, err := decodeInt64s("lookup ids", make([]byte, 12)); err == nil || !strings.Contains(err.Error(), "lookup ids: 12 bytes") {
		t.Errorf("decodeInt64s(12 bytes) = %v", err)
	}
	if _, err := decodeFloat32s("grads", make([]byte, 6)); err == nil || !strings.Contains(err.Error(), "grads: 6 bytes") {
		t.Errorf("decodeFloat32s(6 bytes) = %v", err)
	}
}

// BenchmarkPayloadEncoding compares the wire forms of a 64k x 16 lookup answer and its ids:
// bytes fields (what ps_service.proto uses) against packed repeated fields, through TensorProto,
// which has both (tensor_content; float_val packed fixed32, int64_val packed varint).
func BenchmarkPayloadEncoding(b *testing.B) {
	const n, dim = 1 << 16, 16
	ids := make([]int64, n)
	floats := make([]float32, n*dim)
	for i := range ids {
		ids[i] = int64(uint64(i+1) * 0x9E3779B97F4A7C15) // random-looking 64-bit ids
	}
	for i := range floats {
		floats[i] = float32(i) * 0.001
	}
	cases := []struct {
		name string
		msg  *tensorpb.TensorProto
		vals int
	}{
		{name: "floats/bytes", msg: &tensorpb.TensorProto{TensorContent: float32Bytes(floats)}, vals: len(floats)},
		{name: "floats/packed_fixed32", msg: &tensorpb.TensorProto{FloatVal: floats}, vals: len(floats)},
		{name: "ids/bytes", msg: &tensorpb.TensorProto{TensorContent: int64Bytes(ids)}, vals: n},
		{name: "ids/packed_varint", msg: &tensorpb.TensorProto{Int64Val: ids}, vals: n},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			wire, _ := proto.Marshal(c.msg)
			b.SetBytes(int64(len(wire)))
			for i := 0; i < b.N; i++ {
				w, err := proto.Marshal(c.msg)
				if err != nil {
					b.Fatal(err)
				}
				var out tensorpb.TensorProto
				if err := proto.Unmarshal(w, &out); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(c.vals)*float64(b.N)/b.Elapsed().Seconds(), "values/s")
		})
	}
}
