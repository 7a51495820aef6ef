// Package pyjson writes and reads JSON objects the way the reference's dataclasses do: Writer gives
// the bytes of Python's json.dumps with default settings, Object reads one back with type checks
// that name the field.
package pyjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pyfmt"
)

// Writer writes a JSON object the way Python's json.dumps does by default: fields in declaration
// order, ", " and ": " separators, ASCII-only strings, null for None.
type Writer struct {
	b bytes.Buffer
	n int
}

// Raw writes field name with value, already JSON.
func (w *Writer) Raw(name, value string) {
	if w.n == 0 {
		w.b.WriteByte('{')
	} else {
		w.b.WriteString(", ")
	}
	w.n++
	w.b.WriteString(pyfmt.JSONString(name))
	w.b.WriteString(": ")
	w.b.WriteString(value)
}

// OptStr writes a string, or null for nil; the other writers follow the same pattern.
func (w *Writer) OptStr(name string, v *string) {
	if v == nil {
		w.Raw(name, "null")
		return
	}
	w.Raw(name, pyfmt.JSONString(*v))
}

func (w *Writer) Str(name, v string)     { w.Raw(name, pyfmt.JSONString(v)) }
func (w *Writer) Int(name string, v int) { w.Raw(name, strconv.Itoa(v)) }
func (w *Writer) OptInt(name string, v *int) {
	if v == nil {
		w.Raw(name, "null")
		return
	}
	w.Int(name, *v)
}

// Float writes v as json.dumps does: repr's digits, and NaN, Infinity, -Infinity (not repr's nan,
// inf) for the non-finite values.
func (w *Writer) Float(name string, v float64) {
	switch {
	case math.IsNaN(v):
		w.Raw(name, "NaN")
	case math.IsInf(v, 1):
		w.Raw(name, "Infinity")
	case math.IsInf(v, -1):
		w.Raw(name, "-Infinity")
	default:
		w.Raw(name, pyfmt.Float(v))
	}
}

func (w *Writer) Bool(name string, v bool) { w.Raw(name, strconv.FormatBool(v)) }

func (w *Writer) Ints(name string, v []int) {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = strconv.Itoa(x)
	}
	w.Raw(name, "["+strings.Join(parts, ", ")+"]")
}

// Bytes ends the object and returns it ({} when no field was written).
func (w *Writer) Bytes() []byte {
	if w.n == 0 {
		return []byte("{}")
	}
	w.b.WriteByte('}')
	return w.b.Bytes()
}

// Object is a decoded JSON object whose fields are read with type checks naming the field.
type Object struct {
	typ    string
	fields map[string]json.RawMessage
}

// Parse decodes serialized as one JSON object; typ names it in errors. Syntax errors (and invalid UTF-8, which the
// reference fails to decode) are Value errors; a non-object is a Type error.
func Parse(typ string, serialized []byte) (*Object, error) {
	if !utf8.Valid(serialized) {
		return nil, errkind.New(errkind.Value, "%s: serialized data is not valid UTF-8", typ)
	}
	// Decode once: an object straight into its fields, anything else (an error) into a value
	// whose kind the error names. Syntax errors are the decoder's whatever the target.
	o := &Object{typ: typ}
	var other any
	target := any(&other)
	if t := bytes.TrimLeft(serialized, " \t\r\n"); len(t) > 0 && t[0] == '{' {
		target = &o.fields
	}
	dec := json.NewDecoder(bytes.NewReader(serialized))
	dec.UseNumber()
	if err := dec.Decode(target); err != nil {
		return nil, errkind.New(errkind.Value, "%s: invalid JSON: %v", typ, err)
	}
	// Bytes after the value are checked before its type: json.loads fails on them first.
	_, err := dec.Token()
	if err == nil {
		return nil, errkind.New(errkind.Value, "%s: invalid JSON: extra data after the value", typ)
	}
	if err != io.EOF { // bytes after the value that are not JSON: the error Unmarshal gives for them
		return nil, errkind.New(errkind.Value, "%s: invalid JSON: %v", typ, json.Unmarshal(serialized, new(any)))
	}
	if o.fields == nil {
		return nil, errkind.New(errkind.Type, "%s: want a JSON object, got %s", typ, jsonKind(other))
	}
	return o, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a bool"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "a list"
	}
	return fmt.Sprintf("%T", v)
}

// TypeErr is the Type error for field name, whose value raw is not want.
func (o *Object) TypeErr(name string, want string, raw json.RawMessage) error {
	s := string(raw)
	if len(s) > 40 {
		cut := 40
		for cut > 0 && !utf8.RuneStart(s[cut]) { // whole runes only: the message stays UTF-8
			cut--
		}
		s = s[:cut] + "..."
	}
	return errkind.New(errkind.Type, "%s.%s: want %s, got %s", o.typ, name, want, s)
}

// IsNull reports whether raw is JSON null.
func IsNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// Field returns the raw value of key name, for readers of other types.
func (o *Object) Field(name string) (json.RawMessage, bool) {
	raw, ok := o.fields[name]
	return raw, ok
}

// The readers below leave *dst as it is when the key is absent (dataclasses-json keeps the
// default) and return a Type error naming the field when the value has the wrong type.

// OptStr reads a string or null.
func (o *Object) OptStr(name string, dst **string) error {
	raw, ok := o.fields[name]
	if !ok {
		return nil
	}
	if IsNull(raw) {
		*dst = nil
		return nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return o.TypeErr(name, "a string or null", raw)
	}
	*dst = &s
	return nil
}

// Str reads a string.
func (o *Object) Str(name string, dst *string) error {
	raw, ok := o.fields[name]
	if !ok {
		return nil
	}
	if err := json.Unmarshal(raw, dst); err != nil || IsNull(raw) {
		return o.TypeErr(name, "a string", raw)
	}
	return nil
}

func parseInt(raw json.RawMessage) (int, bool) {
	s := strings.TrimSpace(string(raw))
	if strings.ContainsAny(s, ".eE") {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return int(n), err == nil
}

// Int reads an integer (no fraction or exponent).
func (o *Object) Int(name string, dst *int) error {
	raw, ok := o.fields[name]
	if !ok {
		return nil
	}
	n, ok := parseInt(raw)
	if !ok {
		return o.TypeErr(name, "an integer", raw)
	}
	*dst = n
	return nil
}

// OptInt reads an integer or null.
func (o *Object) OptInt(name string, dst **int) error {
	raw, ok := o.fields[name]
	if !ok {
		return nil
	}
	if IsNull(raw) {
		*dst = nil
		return nil
	}
	n, ok := parseInt(raw)
	if !ok {
		return o.TypeErr(name, "an integer or null", raw)
	}
	*dst = &n
	return nil
}

// Float reads a number.
func (o *Object) Float(name string, dst *float64) error {
	raw, ok := o.fields[name]
	if !ok {
		return nil
	}
	var f float64
	if IsNull(raw) || json.Unmarshal(raw, &f) != nil {
		return o.TypeErr(name, "a number", raw)
	}
	*dst = f
	return nil
}

// Bool reads true or false.
func (o *Object) Bool(name string, dst *bool) error {
	raw, ok := o.fields[name]
	if !ok {
		return nil
	}
	if IsNull(raw) || json.Unmarshal(raw, dst) != nil {
		return o.TypeErr(name, "true or false", raw)
	}
	return nil
}

// Ints reads a list of integers.
func (o *Object) Ints(name string, dst *[]int) error {
	raw, ok := o.fields[name]
	if !ok {
		return nil
	}
	var items []json.RawMessage
	if IsNull(raw) || json.Unmarshal(raw, &items) != nil {
		return o.TypeErr(name, "a list of integers", raw)
	}
	out := make([]int, len(items))
	for i, it := range items {
		n, ok := parseInt(it)
		if !ok {
			return o.TypeErr(fmt.Sprintf("%s[%d]", name, i), "an integer", it)
		}
		out[i] = n
	}
	*dst = out
	return nil
}
