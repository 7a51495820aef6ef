package datadef

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pyfmt"
)

// objWriter writes a JSON object the way Python's json.dumps does by default: fields in declaration
// order, ", " and ": " separators, ASCII-only strings, null for None.
type objWriter struct {
	b bytes.Buffer
	n int
}

func (w *objWriter) raw(name, value string) {
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

func (w *objWriter) optStr(name string, v *string) {
	if v == nil {
		w.raw(name, "null")
		return
	}
	w.raw(name, pyfmt.JSONString(*v))
}

func (w *objWriter) str(name, v string)     { w.raw(name, pyfmt.JSONString(v)) }
func (w *objWriter) int(name string, v int) { w.raw(name, strconv.Itoa(v)) }
func (w *objWriter) optInt(name string, v *int) {
	if v == nil {
		w.raw(name, "null")
		return
	}
	w.int(name, *v)
}
func (w *objWriter) float(name string, v float64) { w.raw(name, pyfmt.Float(v)) }
func (w *objWriter) bool(name string, v bool)     { w.raw(name, strconv.FormatBool(v)) }

func (w *objWriter) ints(name string, v []int) {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = strconv.Itoa(x)
	}
	w.raw(name, "["+strings.Join(parts, ", ")+"]")
}

func (w *objWriter) bytes() []byte {
	if w.n == 0 {
		return []byte("{}")
	}
	w.b.WriteByte('}')
	return w.b.Bytes()
}

// object is a decoded JSON object whose fields are read with type checks naming the field.
type object struct {
	typ    string
	fields map[string]json.RawMessage
}

// parseObject decodes serialized as one JSON object. Syntax errors (and invalid UTF-8, which the
// reference fails to decode) are Value errors; a non-object is a Type error.
func parseObject(typ string, serialized []byte) (*object, error) {
	if !utf8.Valid(serialized) {
		return nil, errkind.New(errkind.Value, "%s: serialized data is not valid UTF-8", typ)
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(serialized))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, errkind.New(errkind.Value, "%s: invalid JSON: %v", typ, err)
	}
	if _, err := dec.Token(); err == nil {
		return nil, errkind.New(errkind.Value, "%s: invalid JSON: extra data after the object", typ)
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, errkind.New(errkind.Type, "%s: want a JSON object, got %s", typ, jsonKind(v))
	}
	o := &object{typ: typ}
	if err := json.Unmarshal(serialized, &o.fields); err != nil {
		return nil, errkind.New(errkind.Value, "%s: invalid JSON: %v", typ, err)
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
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func (o *object) typeErr(name string, want string, raw json.RawMessage) error {
	s := string(raw)
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return errkind.New(errkind.Type, "%s.%s: want %s, got %s", o.typ, name, want, s)
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// optStr reads a string or null; an absent key keeps *dst.
func (o *object) optStr(name string, dst **string) error {
	raw, ok := o.fields[name]
	if !ok {
		return nil
	}
	if isNull(raw) {
		*dst = nil
		return nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return o.typeErr(name, "a string or null", raw)
	}
	*dst = &s
	return nil
}

func (o *object) str(name string, dst *string) error {
	raw, ok := o.fields[name]
	if !ok {
		return nil
	}
	if err := json.Unmarshal(raw, dst); err != nil || isNull(raw) {
		return o.typeErr(name, "a string", raw)
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

func (o *object) int(name string, dst *int) error {
	raw, ok := o.fields[name]
	if !ok {
		return nil
	}
	n, ok := parseInt(raw)
	if !ok {
		return o.typeErr(name, "an integer", raw)
	}
	*dst = n
	return nil
}

func (o *object) optInt(name string, dst **int) error {
	raw, ok := o.fields[name]
	if !ok {
		return nil
	}
	if isNull(raw) {
		*dst = nil
		return nil
	}
	n, ok := parseInt(raw)
	if !ok {
		return o.typeErr(name, "an integer or null", raw)
	}
	*dst = &n
	return nil
}

func (o *object) float(name string, dst *float64) error {
	raw, ok := o.fields[name]
	if !ok {
		return nil
	}
	var f float64
	if isNull(raw) || json.Unmarshal(raw, &f) != nil {
		return o.typeErr(name, "a number", raw)
	}
	*dst = f
	return nil
}

func (o *object) bool(name string, dst *bool) error {
	raw, ok := o.fields[name]
	if !ok {
		return nil
	}
	if isNull(raw) || json.Unmarshal(raw, dst) != nil {
		return o.typeErr(name, "true or false", raw)
	}
	return nil
}

func (o *object) ints(name string, dst *[]int) error {
	raw, ok := o.fields[name]
	if !ok {
		return nil
	}
	var items []json.RawMessage
	if isNull(raw) || json.Unmarshal(raw, &items) != nil {
		return o.typeErr(name, "a list of integers", raw)
	}
	out := make([]int, len(items))
	for i, it := range items {
		n, ok := parseInt(it)
		if !ok {
			return o.typeErr(fmt.Sprintf("%s[%d]", name, i), "an integer", it)
		}
		out[i] = n
	}
	*dst = out
	return nil
}

// firstErr returns the first non-nil error.
func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
