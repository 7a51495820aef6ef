// Package pytext writes protobuf messages exactly as Python's text_format.MessageToString does, for
// the files and strings the reference compares byte for byte (model server configs, platform
// configs). Go's prototext randomizes its whitespace on purpose, so it cannot be used for that.
//
// The layout: set fields in field-number order, two spaces of indent per level, "name {" ... "}"
// for messages, "name: value" otherwise; map entries sorted by key, with default keys and values
// left out; Any expanded as "[type_url] {" when its type is linked in; strings and bytes
// C-escaped with non-ASCII bytes in octal; floats as Python prints them.
package pytext

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/monolith-go/monolith/pkg/pyfmt"
)

// Format returns m in Python's text format.
func Format(m proto.Message) string {
	var b strings.Builder
	writeMessage(&b, m.ProtoReflect(), 0)
	return b.String()
}

type entry struct {
	fd protoreflect.FieldDescriptor
	v  protoreflect.Value
}

func writeMessage(b *strings.Builder, m protoreflect.Message, indent int) {
	if writeAny(b, m, indent) {
		return
	}
	var fields []entry
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		fields = append(fields, entry{fd, v})
		return true
	})
	sort.Slice(fields, func(i, j int) bool { return fields[i].fd.Number() < fields[j].fd.Number() })
	for _, f := range fields {
		switch {
		case f.fd.IsMap():
			writeMap(b, f.fd, f.v.Map(), indent)
		case f.fd.IsList():
			l := f.v.List()
			for i := 0; i < l.Len(); i++ {
				writeField(b, f.fd, l.Get(i), indent)
			}
		default:
			writeField(b, f.fd, f.v, indent)
		}
	}
}

// writeAny expands a google.protobuf.Any whose type is registered, as Python does.
func writeAny(b *strings.Builder, m protoreflect.Message, indent int) bool {
	if m.Descriptor().FullName() != "google.protobuf.Any" {
		return false
	}
	fds := m.Descriptor().Fields()
	url := m.Get(fds.ByName("type_url")).String()
	value := m.Get(fds.ByName("value")).Bytes()
	name := url
	if i := strings.LastIndex(url, "/"); i >= 0 {
		name = url[i+1:]
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(name))
	if err != nil {
		return false
	}
	inner := mt.New()
	if err := proto.Unmarshal(value, inner.Interface()); err != nil {
		return false
	}
	pad(b, indent)
	b.WriteString("[" + url + "] {\n")
	writeMessage(b, inner, indent+1)
	pad(b, indent)
	b.WriteString("}\n")
	return true
}

func writeMap(b *strings.Builder, fd protoreflect.FieldDescriptor, m protoreflect.Map, indent int) {
	var keys []protoreflect.MapKey
	m.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
		keys = append(keys, k)
		return true
	})
	sort.Slice(keys, func(i, j int) bool { return lessKey(keys[i], keys[j]) })
	kd, vd := fd.MapKey(), fd.MapValue()
	for _, k := range keys {
		pad(b, indent)
		b.WriteString(string(fd.Name()) + " {\n")
		// Python builds the entry message from key and value: default scalars are not "set".
		if !isDefault(kd, k.Value()) {
			writeField(b, kd, k.Value(), indent+1)
		}
		if v := m.Get(k); vd.Message() != nil || !isDefault(vd, v) {
			writeField(b, vd, v, indent+1)
		}
		pad(b, indent)
		b.WriteString("}\n")
	}
}

func lessKey(a, b protoreflect.MapKey) bool {
	switch x := a.Interface().(type) {
	case string:
		return x < b.Interface().(string)
	case bool:
		return !x && b.Interface().(bool)
	case int32, int64:
		return a.Int() < b.Int()
	case uint32, uint64:
		return a.Uint() < b.Uint()
	}
	return fmt.Sprint(a.Interface()) < fmt.Sprint(b.Interface())
}

func isDefault(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return v.String() == ""
	case protoreflect.BytesKind:
		return len(v.Bytes()) == 0
	case protoreflect.BoolKind:
		return !v.Bool()
	case protoreflect.EnumKind:
		return v.Enum() == 0
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		return v.Float() == 0
	case protoreflect.Int32Kind, protoreflect.Int64Kind, protoreflect.Sint32Kind, protoreflect.Sint64Kind,
		protoreflect.Sfixed32Kind, protoreflect.Sfixed64Kind:
		return v.Int() == 0
	case protoreflect.Uint32Kind, protoreflect.Uint64Kind, protoreflect.Fixed32Kind, protoreflect.Fixed64Kind:
		return v.Uint() == 0
	}
	return false
}

func pad(b *strings.Builder, indent int) { b.WriteString(strings.Repeat("  ", indent)) }

func writeField(b *strings.Builder, fd protoreflect.FieldDescriptor, v protoreflect.Value, indent int) {
	pad(b, indent)
	b.WriteString(string(fd.Name()))
	if fd.Message() != nil {
		b.WriteString(" {\n")
		writeMessage(b, v.Message(), indent+1)
		pad(b, indent)
		b.WriteString("}\n")
		return
	}
	b.WriteString(": ")
	b.WriteString(scalar(fd, v))
	b.WriteString("\n")
}

func scalar(fd protoreflect.FieldDescriptor, v protoreflect.Value) string {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return `"` + CEscape([]byte(v.String())) + `"`
	case protoreflect.BytesKind:
		return `"` + CEscape(v.Bytes()) + `"`
	case protoreflect.BoolKind:
		return strconv.FormatBool(v.Bool())
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return string(ev.Name())
		}
		return strconv.Itoa(int(v.Enum()))
	case protoreflect.FloatKind:
		return shortestFloat32(v.Float())
	case protoreflect.DoubleKind:
		return pyfmt.Float(v.Float())
	case protoreflect.Uint32Kind, protoreflect.Uint64Kind, protoreflect.Fixed32Kind, protoreflect.Fixed64Kind:
		return strconv.FormatUint(v.Uint(), 10)
	}
	return strconv.FormatInt(v.Int(), 10)
}

// shortestFloat32 is Python's str(type_checkers.ToShortestFloat(v)): the shortest %.{6..9}g form
// that reads back as the same float32.
func shortestFloat32(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return pyfmt.Float(v)
	}
	for p := 6; p < 9; p++ {
		s := strconv.FormatFloat(v, 'g', p, 64)
		f, err := strconv.ParseFloat(s, 64)
		if err == nil && float32(f) == float32(v) {
			return pyfmt.Float(f)
		}
	}
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 9, 64), 64)
	return pyfmt.Float(f)
}

// CEscape escapes bytes as Python's text_encoding.CEscape(as_utf8=False): \n \r \t \" \' \\ and
// every byte outside printable ASCII as a three-digit octal escape.
func CEscape(data []byte) string {
	var b strings.Builder
	for _, c := range data {
		switch c {
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '"':
			b.WriteString(`\"`)
		case '\'':
			b.WriteString(`\'`)
		case '\\':
			b.WriteString(`\\`)
		default:
			if c < 0x20 || c >= 0x7f {
				fmt.Fprintf(&b, `\%03o`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	return b.String()
}
