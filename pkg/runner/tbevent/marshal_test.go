package tbevent

import (
	"bytes"
	"encoding/hex"
	"math"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	tfframework "github.com/monolith-go/monolith/gen/pb/tensorflow/core/framework"
	tfprotobuf "github.com/monolith-go/monolith/gen/pb/tensorflow/core/protobuf"
	tfutil "github.com/monolith-go/monolith/gen/pb/tensorflow/core/util"
)

// fieldNumbers lists the field numbers of b's top-level fields in order.
func fieldNumbers(t *testing.T, b []byte) []protowire.Number {
	t.Helper()
	var out []protowire.Number
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			t.Fatalf("bad tag: %v", protowire.ParseError(n))
		}
		b = b[n:]
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			t.Fatalf("bad value: %v", protowire.ParseError(m))
		}
		b = b[m:]
		out = append(out, num)
	}
	return out
}

func TestMarshalCanonical(t *testing.T) {
	histo := &tfframework.HistogramProto{Min: -1, Max: 2, Num: 3, Sum: 1, SumSquares: 5, BucketLimit: []float64{0, 1, math.Inf(1)}, Bucket: []float64{1, 0, 2}}
	tensor := &tfframework.TensorProto{
		Dtype:       tfframework.DataType_DT_FLOAT,
		TensorShape: &tfframework.TensorShapeProto{Dim: []*tfframework.TensorShapeProto_Dim{{Size: 2, Name: "d"}, {Size: -1}}},
		FloatVal:    []float32{1.5, float32(math.NaN()), -0},
		Int64Val:    []int64{-1, 1 << 40},
		StringVal:   [][]byte{[]byte("a"), {}},
		BoolVal:     []bool{true, false},
	}
	meta := &tfframework.SummaryMetadata{PluginData: &tfframework.SummaryMetadata_PluginData{PluginName: "p", Content: []byte{0}}, DisplayName: "d", DataClass: tfframework.DataClass_DATA_CLASS_TENSOR}
	msgs := map[string]proto.Message{
		"empty event":     &tfutil.Event{},
		"file version":    &tfutil.Event{WallTime: 1, What: &tfutil.Event_FileVersion{FileVersion: FileVersion}},
		"empty oneof msg": &tfutil.Event{What: &tfutil.Event_Summary{Summary: &tfframework.Summary{}}},
		"source metadata": &tfutil.Event{WallTime: 2, Step: -3, What: &tfutil.Event_FileVersion{FileVersion: "v"}, SourceMetadata: &tfutil.SourceMetadata{Writer: "w"}},
		"session log":     &tfutil.Event{What: &tfutil.Event_SessionLog{SessionLog: &tfutil.SessionLog{Status: tfutil.SessionLog_CHECKPOINT, CheckpointPath: "/m/model.ckpt-1"}}},
		"log message":     &tfutil.Event{What: &tfutil.Event_LogMessage{LogMessage: &tfutil.LogMessage{Level: tfutil.LogMessage_WARN, Message: "m"}}},
		"every value kind": &tfutil.Event{Step: 9, What: &tfutil.Event_Summary{Summary: &tfframework.Summary{Value: []*tfframework.Summary_Value{
			{Tag: "s", NodeName: "n", Metadata: meta, Value: &tfframework.Summary_Value_SimpleValue{SimpleValue: 0}},
			{Tag: "h", Value: &tfframework.Summary_Value_Histo{Histo: histo}},
			{Tag: "t", Value: &tfframework.Summary_Value_Tensor{Tensor: tensor}},
			{Tag: "i", Value: &tfframework.Summary_Value_Image{Image: &tfframework.Summary_Image{Height: 1, Width: 2, Colorspace: 3, EncodedImageString: []byte{1, 2}}}},
			{Tag: "a", Value: &tfframework.Summary_Value_Audio{Audio: &tfframework.Summary_Audio{SampleRate: 8000, NumChannels: 1, LengthFrames: 4, ContentType: "audio/wav"}}},
			{Tag: "o", Value: &tfframework.Summary_Value_ObsoleteOldStyleHistogram{ObsoleteOldStyleHistogram: []byte("x")}},
		}}}},
		"histogram": histo,
		"tensor":    tensor,
		"map":       &tfprotobuf.ConfigProto{DeviceCount: map[string]int32{"GPU": 2, "CPU": -1, "TPU": 0}},
	}
	for name, m := range msgs {
		t.Run(name, func(t *testing.T) {
			got, err := marshalCanonical(nil, m.ProtoReflect())
			if err != nil {
				t.Fatal(err)
			}
			back := m.ProtoReflect().New().Interface()
			if err := proto.Unmarshal(got, back); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(back, m) {
				t.Fatalf("round trip: %v, want %v", back, m)
			}
			nums := fieldNumbers(t, got)
			for i := 1; i < len(nums); i++ {
				if nums[i] < nums[i-1] {
					t.Fatalf("fields out of order: %v", nums)
				}
			}
			// Same size as Go's encoding: only the order may differ.
			if goBytes, err := proto.Marshal(m); err != nil || len(goBytes) != len(got) {
				t.Fatalf("%d bytes, proto.Marshal %d (%v)", len(got), len(goBytes), err)
			}
		})
	}
}

func TestMarshalCanonicalKnownBytes(t *testing.T) {
	v := &tfframework.Summary_Value{Tag: "a", NodeName: "n", Value: &tfframework.Summary_Value_SimpleValue{SimpleValue: 1}}
	got, err := marshalCanonical(nil, v.ProtoReflect())
	if err != nil {
		t.Fatal(err)
	}
	// tag(1) "a", simple_value(2) 1.0f, node_name(7) "n": field-number order, as C++ writes it.
	if want := "0a0161150000803f3a016e"; hex.EncodeToString(got) != want {
		t.Fatalf("got %x, want %s", got, want)
	}
	// Unknown fields follow the known ones.
	v.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 100, protowire.VarintType), 5))
	got, err = marshalCanonical(nil, v.ProtoReflect())
	if err != nil {
		t.Fatal(err)
	}
	if want := "0a0161150000803f3a016ea00605"; hex.EncodeToString(got) != want {
		t.Fatalf("with unknown: got %x, want %s", got, want)
	}
	// Map entries go in key order.
	c := &tfprotobuf.ConfigProto{DeviceCount: map[string]int32{"b": 1, "a": 2}}
	got, err = marshalCanonical(nil, c.ProtoReflect())
	if err != nil {
		t.Fatal(err)
	}
	if want := "0a050a016110020a050a01621001"; hex.EncodeToString(got) != want {
		t.Fatalf("map: got %x, want %s", got, want)
	}
	// A packed field is one length-delimited record.
	h := &tfframework.HistogramProto{Bucket: []float64{1}}
	got, err = marshalCanonical(nil, h.ProtoReflect())
	if err != nil {
		t.Fatal(err)
	}
	if want := "3a08000000000000f03f"; hex.EncodeToString(got) != want {
		t.Fatalf("packed: got %x, want %s", got, want)
	}
}

func TestMarshalCanonicalRejectsInvalidUTF8(t *testing.T) {
	e := &tfutil.Event{What: &tfutil.Event_FileVersion{FileVersion: "\xff"}}
	if _, err := marshalCanonical(nil, e.ProtoReflect()); err == nil {
		t.Fatal("invalid UTF-8 was encoded")
	}
	if b, err := marshalCanonical([]byte("keep"), (&tfutil.Event{Step: 1}).ProtoReflect()); err != nil || !bytes.HasPrefix(b, []byte("keep")) {
		t.Fatalf("append: %q, %v", b, err)
	}
}
