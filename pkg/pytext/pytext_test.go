package pytext

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// testFile builds, without generated code, the descriptor of:
//
//	message E { string s = 1; int64 v = 2; }
//	message M { map<string, int64> labels = 1; map<int32, E> es = 2; float f = 3; double d = 4;
//	            bytes b = 5; string s = 6; repeated int64 r = 7; E e = 8; bool ok = 9; }
func testFile(t *testing.T) protoreflect.FileDescriptor {
	t.Helper()
	opt := func(l descriptorpb.FieldDescriptorProto_Label) *descriptorpb.FieldDescriptorProto_Label { return &l }
	typ := func(k descriptorpb.FieldDescriptorProto_Type) *descriptorpb.FieldDescriptorProto_Type { return &k }
	field := func(name string, num int32, k descriptorpb.FieldDescriptorProto_Type, label descriptorpb.FieldDescriptorProto_Label, typeName string) *descriptorpb.FieldDescriptorProto {
		f := &descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(num), Type: typ(k), Label: opt(label), JsonName: proto.String(name)}
		if typeName != "" {
			f.TypeName = proto.String(typeName)
		}
		return f
	}
	const (
		optional = descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL
		repeated = descriptorpb.FieldDescriptorProto_LABEL_REPEATED
		tString  = descriptorpb.FieldDescriptorProto_TYPE_STRING
		tInt64   = descriptorpb.FieldDescriptorProto_TYPE_INT64
		tInt32   = descriptorpb.FieldDescriptorProto_TYPE_INT32
		tMsg     = descriptorpb.FieldDescriptorProto_TYPE_MESSAGE
	)
	entry := func(name string, key, value *descriptorpb.FieldDescriptorProto) *descriptorpb.DescriptorProto {
		return &descriptorpb.DescriptorProto{Name: proto.String(name), Field: []*descriptorpb.FieldDescriptorProto{key, value},
			Options: &descriptorpb.MessageOptions{MapEntry: proto.Bool(true)}}
	}
	fdp := &descriptorpb.FileDescriptorProto{
		Name: proto.String("pytext_test.proto"), Package: proto.String("t"), Syntax: proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{
			{Name: proto.String("E"), Field: []*descriptorpb.FieldDescriptorProto{
				field("s", 1, tString, optional, ""), field("v", 2, tInt64, optional, "")}},
			{Name: proto.String("M"), Field: []*descriptorpb.FieldDescriptorProto{
				field("labels", 1, tMsg, repeated, ".t.M.LabelsEntry"),
				field("es", 2, tMsg, repeated, ".t.M.EsEntry"),
				field("f", 3, descriptorpb.FieldDescriptorProto_TYPE_FLOAT, optional, ""),
				field("d", 4, descriptorpb.FieldDescriptorProto_TYPE_DOUBLE, optional, ""),
				field("b", 5, descriptorpb.FieldDescriptorProto_TYPE_BYTES, optional, ""),
				field("s", 6, tString, optional, ""),
				field("r", 7, tInt64, repeated, ""),
				field("e", 8, tMsg, optional, ".t.E"),
				field("ok", 9, descriptorpb.FieldDescriptorProto_TYPE_BOOL, optional, ""),
			}, NestedType: []*descriptorpb.DescriptorProto{
				entry("LabelsEntry", field("key", 1, tString, optional, ""), field("value", 2, tInt64, optional, "")),
				entry("EsEntry", field("key", 1, tInt32, optional, ""), field("value", 2, tMsg, optional, ".t.E")),
			}},
		},
	}
	fd, err := protodesc.NewFile(fdp, nil)
	if err != nil {
		t.Fatal(err)
	}
	return fd
}

// The expected texts are what Python's text_format.MessageToString (protobuf 4.21) printed for
// the same messages.
func TestFormatMatchesPython(t *testing.T) {
	fd := testFile(t)
	mDesc, eDesc := fd.Messages().ByName("M"), fd.Messages().ByName("E")
	fields := mDesc.Fields()
	newE := func(s string, v int64) protoreflect.Message {
		e := dynamicpb.NewMessage(eDesc)
		if s != "" {
			e.Set(eDesc.Fields().ByName("s"), protoreflect.ValueOfString(s))
		}
		if v != 0 {
			e.Set(eDesc.Fields().ByName("v"), protoreflect.ValueOfInt64(v))
		}
		return e
	}
	tests := []struct {
		name  string
		build func(m *dynamicpb.Message)
		want  string
	}{
		{"everything", func(m *dynamicpb.Message) {
			labels := m.Mutable(fields.ByName("labels")).Map()
			labels.Set(protoreflect.ValueOfString("b").MapKey(), protoreflect.ValueOfInt64(0))
			labels.Set(protoreflect.ValueOfString("a").MapKey(), protoreflect.ValueOfInt64(2))
			es := m.Mutable(fields.ByName("es")).Map()
			es.Set(protoreflect.ValueOfInt32(3).MapKey(), protoreflect.ValueOfMessage(newE("", 0)))
			es.Set(protoreflect.ValueOfInt32(-1).MapKey(), protoreflect.ValueOfMessage(newE("", 5)))
			m.Set(fields.ByName("f"), protoreflect.ValueOfFloat32(0.1))
			m.Set(fields.ByName("d"), protoreflect.ValueOfFloat64(1e-7))
			m.Set(fields.ByName("b"), protoreflect.ValueOfBytes([]byte("\x00\x7f\xff'\"")))
			m.Set(fields.ByName("s"), protoreflect.ValueOfString("é\n\tq'x"))
			r := m.Mutable(fields.ByName("r")).List()
			r.Append(protoreflect.ValueOfInt64(1))
			r.Append(protoreflect.ValueOfInt64(2))
			m.Set(fields.ByName("e"), protoreflect.ValueOfMessage(newE("", 0)))
			m.Set(fields.ByName("ok"), protoreflect.ValueOfBool(true))
		}, `labels {
  key: "a"
  value: 2
}
labels {
  key: "b"
}
es {
  key: -1
  value {
    v: 5
  }
}
es {
  key: 3
  value {
  }
}
f: 0.1
d: 1e-07
b: "\000\177\377\'\""
s: "\303\251\n\tq\'x"
r: 1
r: 2
e {
}
ok: true
`},
		{"integral floats and an empty key", func(m *dynamicpb.Message) {
			m.Set(fields.ByName("f"), protoreflect.ValueOfFloat32(3))
			m.Set(fields.ByName("d"), protoreflect.ValueOfFloat64(2))
			m.Mutable(fields.ByName("labels")).Map().Set(protoreflect.ValueOfString("").MapKey(), protoreflect.ValueOfInt64(0))
		}, "labels {\n}\nf: 3.0\nd: 2.0\n"},
		{"empty", func(*dynamicpb.Message) {}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := dynamicpb.NewMessage(mDesc)
			tc.build(m)
			if got := Format(m); got != tc.want {
				t.Fatalf("got:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

func TestShortestFloat32(t *testing.T) {
	// Python: str(type_checkers.ToShortestFloat(x)) for float32 values.
	for in, want := range map[float32]string{0.1: "0.1", 0.25: "0.25", 1024: "1024.0", 3.3: "3.3", 1e-10: "1e-10", 16777217: "16777216.0"} {
		if got := shortestFloat32(float64(in)); got != want {
			t.Errorf("shortestFloat32(%v) = %s, want %s", in, got, want)
		}
	}
}
