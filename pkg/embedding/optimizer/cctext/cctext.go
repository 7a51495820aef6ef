// Package cctext writes protobuf messages as the C++ library's TextFormat does: DebugString's
// multi-line form and ShortDebugString's one-line form. The reference's C++ hash table writes its
// optimizer dumps and its factory errors this way, and Go's prototext randomizes whitespace on
// purpose, so neither it nor pkg/pytext (Python's float form) can be used.
//
// Set fields are written in field-number order, two spaces of indent per level ("name {" ... "}"
// for messages, "name: value" otherwise); floats in C++'s SimpleFtoa form (%.6g, or %.9g when
// that does not read back as the same float32), doubles in SimpleDtoa form (%.15g, else %.17g);
// strings and bytes C-escaped with every byte outside printable ASCII in octal (TextFormat::Print's
// escaping; DebugString would keep valid UTF-8 as is). Unknown fields are not written.
package cctext

import (
	"math"
	"sort"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/monolith-go/monolith/pkg/pytext"
)

// Format returns m as C++'s DebugString (TextFormat::PrintToString) writes it.
func Format(m proto.Message) string {
	w := writer{}
	w.message(m.ProtoReflect(), 0)
	return w.b.String()
}

// ShortFormat returns m as C++'s ShortDebugString writes it: one line, fields separated by one
// space, no trailing space.
func ShortFormat(m proto.Message) string {
	w := writer{oneLine: true}
	w.message(m.ProtoReflect(), 0)
	return strings.TrimRight(w.b.String(), " ")
}

type writer struct {
	b       strings.Builder
	oneLine bool
}

type field struct {
	fd protoreflect.FieldDescriptor
	v  protoreflect.Value
}

func (w *writer) message(m protoreflect.Message, indent int) {
	var fields []field
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		fields = append(fields, field{fd, v})
		return true
	})
	sort.Slice(fields, func(i, j int) bool { return fields[i].fd.Number() < fields[j].fd.Number() })
	for _, f := range fields {
		switch {
		case f.fd.IsMap():
			w.mapEntries(f.fd, f.v.Map(), indent)
		case f.fd.IsList():
			l := f.v.List()
			for i := 0; i < l.Len(); i++ {
				w.field(f.fd, l.Get(i), indent)
			}
		default:
			w.field(f.fd, f.v, indent)
		}
	}
}

// mapEntries writes a map as C++ does: one entry message per key, sorted by key, with both key and
// value.
func (w *writer) mapEntries(fd protoreflect.FieldDescriptor, m protoreflect.Map, indent int) {
	var keys []protoreflect.MapKey
	m.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
		keys = append(keys, k)
		return true
	})
	sort.Slice(keys, func(i, j int) bool { return lessKey(keys[i], keys[j]) })
	for _, k := range keys {
		w.open(string(fd.Name()), indent)
		w.field(fd.MapKey(), k.Value(), indent+1)
		w.field(fd.MapValue(), m.Get(k), indent+1)
		w.close(indent)
	}
}

func lessKey(a, b protoreflect.MapKey) bool {
	switch x := a.Interface().(type) {
	case string:
		return x < b.Interface().(string)
	case bool:
		return !x && b.Interface().(bool)
	case uint32, uint64:
		return a.Uint() < b.Uint()
	}
	return a.Int() < b.Int()
}

func (w *writer) open(name string, indent int) {
	if w.oneLine {
		w.b.WriteString(name + " { ")
		return
	}
	w.pad(indent)
	w.b.WriteString(name + " {\n")
}

func (w *writer) close(indent int) {
	if w.oneLine {
		w.b.WriteString("} ")
		return
	}
	w.pad(indent)
	w.b.WriteString("}\n")
}

func (w *writer) pad(indent int) { w.b.WriteString(strings.Repeat("  ", indent)) }

func (w *writer) field(fd protoreflect.FieldDescriptor, v protoreflect.Value, indent int) {
	name := string(fd.Name())
	if fd.Kind() == protoreflect.GroupKind {
		name = string(fd.Message().Name()) // C++ names a group field by its type
	}
	if fd.Message() != nil {
		w.open(name, indent)
		w.message(v.Message(), indent+1)
		w.close(indent)
		return
	}
	if !w.oneLine {
		w.pad(indent)
	}
	w.b.WriteString(name + ": " + scalar(fd, v))
	if w.oneLine {
		w.b.WriteString(" ")
	} else {
		w.b.WriteString("\n")
	}
}

func scalar(fd protoreflect.FieldDescriptor, v protoreflect.Value) string {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return `"` + pytext.CEscape([]byte(v.String())) + `"`
	case protoreflect.BytesKind:
		return `"` + pytext.CEscape(v.Bytes()) + `"`
	case protoreflect.BoolKind:
		return strconv.FormatBool(v.Bool())
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return string(ev.Name())
		}
		return strconv.Itoa(int(v.Enum()))
	case protoreflect.FloatKind:
		return Float32(float32(v.Float()))
	case protoreflect.DoubleKind:
		return Float64(v.Float())
	case protoreflect.Uint32Kind, protoreflect.Uint64Kind, protoreflect.Fixed32Kind, protoreflect.Fixed64Kind:
		return strconv.FormatUint(v.Uint(), 10)
	}
	return strconv.FormatInt(v.Int(), 10)
}

// Float32 is C++ protobuf's SimpleFtoa: "%.6g" when it reads back as the same float32, else "%.9g"
// (always enough); inf, -inf and nan as such.
func Float32(f float32) string {
	if s, ok := nonFinite(float64(f)); ok {
		return s
	}
	s := strconv.FormatFloat(float64(f), 'g', 6, 64)
	if back, err := strconv.ParseFloat(s, 32); err == nil && float32(back) == f {
		return s
	}
	return strconv.FormatFloat(float64(f), 'g', 9, 64)
}

// Float64 is C++ protobuf's SimpleDtoa: "%.15g" when it reads back as the same double, else "%.17g".
func Float64(f float64) string {
	if s, ok := nonFinite(f); ok {
		return s
	}
	s := strconv.FormatFloat(f, 'g', 15, 64)
	if back, err := strconv.ParseFloat(s, 64); err == nil && back == f {
		return s
	}
	return strconv.FormatFloat(f, 'g', 17, 64)
}

func nonFinite(f float64) (string, bool) {
	switch {
	case math.IsNaN(f):
		return "nan", true
	case math.IsInf(f, 1):
		return "inf", true
	case math.IsInf(f, -1):
		return "-inf", true
	}
	return "", false
}
