package tbevent

import (
	"fmt"
	"math"
	"sort"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// marshalCanonical appends m's wire encoding to b with every field in field-number order, oneof
// members included, then m's unknown fields: the order TensorFlow's C++ serializer (and Python's
// protobuf runtime) writes. Go's proto.Marshal writes oneof members after the other fields, so a
// summary value with metadata would differ from TensorFlow's bytes while meaning the same.
// Map entries are written in key order (C++ leaves their order unspecified).
func marshalCanonical(b []byte, m protoreflect.Message) ([]byte, error) {
	fields := m.Descriptor().Fields()
	order := make([]protoreflect.FieldDescriptor, 0, fields.Len())
	for i := 0; i < fields.Len(); i++ {
		if fd := fields.Get(i); m.Has(fd) {
			order = append(order, fd)
		}
	}
	sort.Slice(order, func(i, j int) bool { return order[i].Number() < order[j].Number() })
	var err error
	for _, fd := range order {
		v := m.Get(fd)
		switch {
		case fd.IsList():
			b, err = appendList(b, fd, v.List())
		case fd.IsMap():
			b, err = appendMap(b, fd, v.Map())
		default:
			b, err = appendField(b, fd, v)
		}
		if err != nil {
			return nil, err
		}
	}
	return append(b, m.GetUnknown()...), nil
}

func appendList(b []byte, fd protoreflect.FieldDescriptor, l protoreflect.List) ([]byte, error) {
	if fd.IsPacked() {
		b = protowire.AppendTag(b, fd.Number(), protowire.BytesType)
		var body []byte
		for i := 0; i < l.Len(); i++ {
			var err error
			if body, err = appendScalar(body, fd.Kind(), l.Get(i)); err != nil {
				return nil, err
			}
		}
		return protowire.AppendBytes(b, body), nil
	}
	for i := 0; i < l.Len(); i++ {
		var err error
		if b, err = appendField(b, fd, l.Get(i)); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func appendMap(b []byte, fd protoreflect.FieldDescriptor, mp protoreflect.Map) ([]byte, error) {
	keys := make([]protoreflect.MapKey, 0, mp.Len())
	mp.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
		keys = append(keys, k)
		return true
	})
	sort.Slice(keys, func(i, j int) bool { return lessKey(keys[i], keys[j]) })
	for _, k := range keys {
		entry, err := appendField(nil, fd.MapKey(), k.Value())
		if err != nil {
			return nil, err
		}
		if entry, err = appendField(entry, fd.MapValue(), mp.Get(k)); err != nil {
			return nil, err
		}
		b = protowire.AppendTag(b, fd.Number(), protowire.BytesType)
		b = protowire.AppendBytes(b, entry)
	}
	return b, nil
}

func lessKey(a, b protoreflect.MapKey) bool {
	switch av := a.Interface().(type) {
	case bool:
		return !av && b.Bool()
	case string:
		return av < b.String()
	case int32, int64:
		return a.Int() < b.Int()
	default:
		return a.Uint() < b.Uint()
	}
}

// appendField appends one tagged value of fd.
func appendField(b []byte, fd protoreflect.FieldDescriptor, v protoreflect.Value) ([]byte, error) {
	switch fd.Kind() {
	case protoreflect.MessageKind:
		// Only the order differs from Go's encoding, so proto.Size gives the length up front and
		// the message is encoded in place.
		size := proto.Size(v.Message().Interface())
		b = protowire.AppendTag(b, fd.Number(), protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(size))
		start := len(b)
		b, err := marshalCanonical(b, v.Message())
		if err != nil {
			return nil, err
		}
		if n := len(b) - start; n != size {
			return nil, fmt.Errorf("tbevent: %s encoded in %d bytes, proto.Size says %d", fd.FullName(), n, size)
		}
		return b, nil
	case protoreflect.GroupKind:
		b = protowire.AppendTag(b, fd.Number(), protowire.StartGroupType)
		b, err := marshalCanonical(b, v.Message())
		if err != nil {
			return nil, err
		}
		return protowire.AppendTag(b, fd.Number(), protowire.EndGroupType), nil
	}
	b = protowire.AppendTag(b, fd.Number(), wireType(fd.Kind()))
	return appendScalar(b, fd.Kind(), v)
}

func wireType(k protoreflect.Kind) protowire.Type {
	switch k {
	case protoreflect.FloatKind, protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind:
		return protowire.Fixed32Type
	case protoreflect.DoubleKind, protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind:
		return protowire.Fixed64Type
	case protoreflect.StringKind, protoreflect.BytesKind:
		return protowire.BytesType
	default:
		return protowire.VarintType
	}
}

// appendScalar appends the untagged encoding of a non-message value.
func appendScalar(b []byte, k protoreflect.Kind, v protoreflect.Value) ([]byte, error) {
	switch k {
	case protoreflect.BoolKind:
		return protowire.AppendVarint(b, protowire.EncodeBool(v.Bool())), nil
	case protoreflect.EnumKind:
		return protowire.AppendVarint(b, uint64(int64(v.Enum()))), nil
	case protoreflect.Int32Kind, protoreflect.Int64Kind:
		return protowire.AppendVarint(b, uint64(v.Int())), nil
	case protoreflect.Sint32Kind, protoreflect.Sint64Kind:
		return protowire.AppendVarint(b, protowire.EncodeZigZag(v.Int())), nil
	case protoreflect.Uint32Kind, protoreflect.Uint64Kind:
		return protowire.AppendVarint(b, v.Uint()), nil
	case protoreflect.FloatKind:
		return protowire.AppendFixed32(b, math.Float32bits(float32(v.Float()))), nil
	case protoreflect.Fixed32Kind:
		return protowire.AppendFixed32(b, uint32(v.Uint())), nil
	case protoreflect.Sfixed32Kind:
		return protowire.AppendFixed32(b, uint32(int32(v.Int()))), nil
	case protoreflect.DoubleKind:
		return protowire.AppendFixed64(b, math.Float64bits(v.Float())), nil
	case protoreflect.Fixed64Kind:
		return protowire.AppendFixed64(b, v.Uint()), nil
	case protoreflect.Sfixed64Kind:
		return protowire.AppendFixed64(b, uint64(v.Int())), nil
	case protoreflect.StringKind:
		// proto.Marshal refuses invalid UTF-8 in proto3 strings too: TensorBoard could not parse it.
		if s := v.String(); !utf8.ValidString(s) {
			return nil, fmt.Errorf("tbevent: string field holds invalid UTF-8: %q", s)
		}
		return protowire.AppendString(b, v.String()), nil
	case protoreflect.BytesKind:
		return protowire.AppendBytes(b, v.Bytes()), nil
	}
	return nil, fmt.Errorf("tbevent: cannot encode a field of kind %v", k)
}
