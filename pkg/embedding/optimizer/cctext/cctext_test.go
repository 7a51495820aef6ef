package cctext

import (
	"math"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"

	optimizerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/optimizer"
)

func TestFloat32(t *testing.T) {
	for _, tc := range []struct {
		in   float32
		want string
	}{
		{1, "1"},
		{0.1, "0.1"},
		{0.3, "0.3"},
		{1e-05, "1e-05"},
		{1000155.5, "1000155.5"}, // %.6g does not read back: %.9g
		{123456792, "123456792"},
		{0.371362209, "0.371362209"},
		{1e6, "1e+06"},
		{-2.5, "-2.5"},
		{float32(math.Copysign(0, -1)), "-0"},
		{math.MaxFloat32, "3.40282347e+38"},
		{math.SmallestNonzeroFloat32, "1.4013e-45"}, // reads back: a subnormal needs fewer digits
		{float32(math.Inf(1)), "inf"},
		{float32(math.Inf(-1)), "-inf"},
		{float32(math.NaN()), "nan"},
	} {
		if got := Float32(tc.in); got != tc.want {
			t.Errorf("Float32(%g) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestFloat64(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want string
	}{
		{0.1, "0.1"},
		{1.0 / 3, "0.33333333333333331"},
		{1e100, "1e+100"},
		{math.Inf(-1), "-inf"},
	} {
		if got := Float64(tc.in); got != tc.want {
			t.Errorf("Float64(%g) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestFormat(t *testing.T) {
	b1, b2 := float32(0.81), float32(0.970299)
	step := int64(100003)
	dump := &optimizerpb.OptimizerDump{Dump: []*optimizerpb.SingleOptimizerDump{
		{Type: &optimizerpb.SingleOptimizerDump_Adam{Adam: &optimizerpb.AdamOptimizerDump{
			M: []float32{1, -0.5}, V: []float32{1000155.5, 0}, Beta1Power: &b1, Beta2Power: &b2}}},
		{Type: &optimizerpb.SingleOptimizerDump_Sgd{Sgd: &optimizerpb.SgdOptimizerDump{}}},
		{Type: &optimizerpb.SingleOptimizerDump_BatchSoftmax{BatchSoftmax: &optimizerpb.BatchSoftmaxOptimizerDump{GlobalStep: &step}}},
	}}
	wantLong := `dump {
  adam {
    m: 1
    m: -0.5
    v: 1000155.5
    v: 0
    beta1_power: 0.81
    beta2_power: 0.970299
  }
}
dump {
  sgd {
  }
}
dump {
  batch_softmax {
    global_step: 100003
  }
}
`
	wantShort := "dump { adam { m: 1 m: -0.5 v: 1000155.5 v: 0 beta1_power: 0.81 beta2_power: 0.970299 } } " +
		"dump { sgd { } } dump { batch_softmax { global_step: 100003 } }"
	for _, tc := range []struct {
		name string
		msg  proto.Message
		long string
		shrt string
	}{
		{"dump", dump, wantLong, wantShort},
		{"empty", &optimizerpb.OptimizerConfig{}, "", ""},
		{"config", &optimizerpb.OptimizerConfig{
			Type: &optimizerpb.OptimizerConfig_DynamicWdAdagrad{DynamicWdAdagrad: &optimizerpb.DynamicWdAdagradOptimizerConfig{
				DimSize: proto.Int32(4), WeightDecayFactor: proto.Float32(0.01), FlipDirection: proto.Bool(true)}},
			StochasticRoundingFloat16: proto.Bool(false)},
			// Field-number order: stochastic_rounding_float16 (4) before the oneof's member (5).
			"stochastic_rounding_float16: false\ndynamic_wd_adagrad {\n  dim_size: 4\n  weight_decay_factor: 0.01\n  flip_direction: true\n}\n",
			"stochastic_rounding_float16: false dynamic_wd_adagrad { dim_size: 4 weight_decay_factor: 0.01 flip_direction: true }"},
		{"strings and enums", &descriptorpb.FieldDescriptorProto{Name: proto.String("a\"b\n\x01é"), Number: proto.Int32(3),
			Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()},
			"name: \"a\\\"b\\n\\001\\303\\251\"\nnumber: 3\nlabel: LABEL_OPTIONAL\n",
			"name: \"a\\\"b\\n\\001\\303\\251\" number: 3 label: LABEL_OPTIONAL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Format(tc.msg); got != tc.long {
				t.Errorf("Format =\n%s\nwant\n%s", got, tc.long)
			}
			if got := ShortFormat(tc.msg); got != tc.shrt {
				t.Errorf("ShortFormat = %q, want %q", got, tc.shrt)
			}
		})
	}
}
