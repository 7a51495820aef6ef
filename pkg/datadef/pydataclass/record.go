package pydataclass

import (
	"fmt"
	"math"
)

// Error kinds, named as pkg/errkind names them (this package imports nothing of pkg/).
const (
	KindValue     = "Value"     // json.JSONDecodeError, ValueError
	KindType      = "Type"      // TypeError, and values Go refuses to hold
	KindAttribute = "Attribute" // AttributeError: dataclasses-json reading a non-object
)

// Error is a decoding error; Kind says which Python exception class it stands for.
type Error struct {
	Kind string
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// Object is the top-level JSON object of a serialized record, read field by field. A field whose
// JSON value Go keeps in another form (None in a field with a non-None default, an int in a float
// field) is remembered in Held, so that the record is written back as Python would write it.
type Object struct {
	class string
	d     Value
	held  *Held
}

// Decode parses data as from_json does: json.loads, then the object's items. A JSON value that is
// not an object is the AttributeError dataclasses-json raises ('list' object has no attribute
// 'items').
func Decode(class string, data []byte) (*Object, error) {
	v, err := Parse(data)
	if err != nil {
		e := err.(*Error)
		return nil, &Error{Kind: e.Kind, Msg: class + ": " + e.Msg}
	}
	if v.Kind != Dict {
		return nil, &Error{Kind: KindAttribute, Msg: fmt.Sprintf("%s: '%s' object has no attribute 'items'", class, v.TypeName())}
	}
	return &Object{class: class, d: v}, nil
}

// Held returns what the readers remembered (nil when every field was kept as read).
func (o *Object) Held() *Held { return o.held }

func (o *Object) hold(name string, py Value, snap any) {
	if o.held == nil {
		o.held = &Held{}
	}
	o.held.fields = append(o.held.fields, heldField{name: name, py: py, snap: snap})
}

func (o *Object) typeErr(name, want string, v Value) error {
	return &Error{Kind: KindType, Msg: fmt.Sprintf("%s.%s: want %s, got %s (%s)", o.class, name, want, short(v.Repr()), v.TypeName())}
}

func short(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// The readers leave *dst as it is when the key is absent (dataclasses-json keeps the default).

// Str reads a str field whose default is a str: null is held as None.
func (o *Object) Str(name string, dst *string) error {
	v, ok := o.d.Get(name)
	switch {
	case !ok:
	case v.Kind == Str:
		*dst = v.S
	case v.Kind == Null:
		o.hold(name, v, *dst)
	default:
		return o.typeErr(name, "a str or null", v)
	}
	return nil
}

// OptStr reads a str field whose default is None (nil).
func (o *Object) OptStr(name string, dst **string) error {
	v, ok := o.d.Get(name)
	switch {
	case !ok:
	case v.Kind == Str:
		s := v.S
		*dst = &s
	case v.Kind == Null:
		*dst = nil
	default:
		return o.typeErr(name, "a str or null", v)
	}
	return nil
}

func (o *Object) int(name string, v Value) (int, error) {
	if v.Kind != Int {
		return 0, o.typeErr(name, "an int or null", v)
	}
	n, ok := v.Int64()
	if !ok || int64(int(n)) != n {
		return 0, &Error{Kind: KindValue, Msg: fmt.Sprintf("%s.%s: %s does not fit a 64-bit int", o.class, name, short(v.I))}
	}
	return int(n), nil
}

// Int reads an int field whose default is an int: null is held as None.
func (o *Object) Int(name string, dst *int) error {
	v, ok := o.d.Get(name)
	switch {
	case !ok:
	case v.Kind == Null:
		o.hold(name, v, *dst)
	default:
		n, err := o.int(name, v)
		if err != nil {
			return err
		}
		*dst = n
	}
	return nil
}

// OptInt reads an int field whose default is None (nil).
func (o *Object) OptInt(name string, dst **int) error {
	v, ok := o.d.Get(name)
	switch {
	case !ok:
	case v.Kind == Null:
		*dst = nil
	default:
		n, err := o.int(name, v)
		if err != nil {
			return err
		}
		*dst = &n
	}
	return nil
}

// Float reads a float field: an int is kept as the int Python holds (written back without a
// fraction), null as None.
func (o *Object) Float(name string, dst *float64) error {
	v, ok := o.d.Get(name)
	switch {
	case !ok:
	case v.Kind == Float:
		*dst = v.F
	case v.Kind == Int:
		*dst = v.IntFloat()
		o.hold(name, v, *dst)
	case v.Kind == Null:
		o.hold(name, v, *dst)
	default:
		return o.typeErr(name, "a number or null", v)
	}
	return nil
}

// Bool reads a bool field: null is held as None.
func (o *Object) Bool(name string, dst *bool) error {
	v, ok := o.d.Get(name)
	switch {
	case !ok:
	case v.Kind == Bool:
		*dst = v.B
	case v.Kind == Null:
		o.hold(name, v, *dst)
	default:
		return o.typeErr(name, "true, false or null", v)
	}
	return nil
}

// Ints reads a List[int] field: null is held as None (and *dst is nil).
func (o *Object) Ints(name string, dst *[]int) error {
	v, ok := o.d.Get(name)
	switch {
	case !ok:
		return nil
	case v.Kind == Null:
		*dst = nil
		o.hold(name, v, true)
		return nil
	case v.Kind != List:
		return o.typeErr(name, "a list of ints or null", v)
	}
	out := make([]int, len(v.L))
	for i, x := range v.L {
		n, err := o.int(fmt.Sprintf("%s[%d]", name, i), x)
		if err != nil {
			return err
		}
		out[i] = n
	}
	*dst = out
	return nil
}

// Bytes reads a bytes field from the list of byte values to_json writes (dataclasses-json itself
// cannot decode it); null is held as None (and *dst is nil).
func (o *Object) Bytes(name string, dst *[]byte) error {
	v, ok := o.d.Get(name)
	switch {
	case !ok:
		return nil
	case v.Kind == Null:
		*dst = nil
		o.hold(name, v, true)
		return nil
	case v.Kind != List:
		return o.typeErr(name, "a list of byte values or null", v)
	}
	out := make([]byte, len(v.L))
	for i, x := range v.L {
		n, err := o.int(fmt.Sprintf("%s[%d]", name, i), x)
		if err != nil {
			return err
		}
		if n < 0 || n > 255 {
			return &Error{Kind: KindValue, Msg: fmt.Sprintf("%s.%s[%d]: %d is not a byte value", o.class, name, i, n)}
		}
		out[i] = byte(n)
	}
	*dst = out
	return nil
}

// Enum reads an Enum field as Enum(value) does: a member's value, or a number or bool equal to
// one (1.0 and True are 1); null is held as None; anything else is the ValueError
// "<repr> is not a valid <enum>".
func (o *Object) Enum(name, enum string, dst *int, members []int) error {
	v, ok := o.d.Get(name)
	if !ok {
		return nil
	}
	var n float64
	switch v.Kind {
	case Null:
		o.hold(name, v, *dst)
		return nil
	case Int:
		n = v.IntFloat()
	case Float:
		n = v.F
	case Bool:
		if v.B {
			n = 1
		}
	default:
		n = math.NaN()
	}
	for _, m := range members {
		if float64(m) == n && (v.Kind != Int || v.I == IntV(m).I) {
			*dst = m
			return nil
		}
	}
	return &Error{Kind: KindValue, Msg: fmt.Sprintf("%s is not a valid %s", short(v.Repr()), enum)}
}

// StrItem is one item of a Dict[str, str].
type StrItem struct{ Key, Val string }

// StrDict reads a Dict[str, str] field in its order and passes its items to set: nil for null
// (None), a non-nil slice for an object. A value that is not an object is the AttributeError of
// value.keys().
func (o *Object) StrDict(name string, set func(items []StrItem)) error {
	v, ok := o.d.Get(name)
	switch {
	case !ok:
		return nil
	case v.Kind == Null:
		set(nil)
		return nil
	case v.Kind != Dict:
		return &Error{Kind: KindAttribute, Msg: fmt.Sprintf("%s.%s: '%s' object has no attribute 'keys'", o.class, name, v.TypeName())}
	}
	items := make([]StrItem, len(v.D))
	for i, m := range v.D {
		if m.Val.Kind != Str {
			return o.typeErr(fmt.Sprintf("%s[%s]", name, strRepr(m.Key)), "a str", m.Val)
		}
		items[i] = StrItem{Key: m.Key, Val: m.Val.S}
	}
	set(items)
	return nil
}

// StrDictV is the value of a Dict[str, str] field: None for nil items.
func StrDictV(items []StrItem) Value {
	if items == nil {
		return NoneV()
	}
	d := Value{Kind: Dict, D: make([]Member, len(items))}
	for i, it := range items {
		d.D[i] = Member{Key: it.Key, Val: StrV(it.Val)}
	}
	return d
}

// Held is what a decoded record's fields held in Python where the Go field keeps another form.
// It is never modified after decoding, so records sharing it may be copied freely.
type Held struct {
	fields []heldField
}

type heldField struct {
	name string
	py   Value
	// snap is the Go field's value right after decoding (for a list, whether it was nil).
	snap any
}

// Value returns what Python holds in field name: the held value while the Go field still has the
// value decoding gave it (cur, comparable: for a list, whether it is nil), else typed, the Go
// value's own form. A nil Held holds nothing.
func (h *Held) Value(name string, cur any, typed Value) Value {
	if h == nil {
		return typed
	}
	for _, f := range h.fields {
		if f.name == name && f.snap == cur {
			return f.py
		}
	}
	return typed
}

// DictOf builds the record's field dict, in field order.
func DictOf(members ...Member) Value { return Value{Kind: Dict, D: members} }

// First returns the first non-nil error: dataclasses-json decodes fields in declaration order and
// stops at the first that raises.
func First(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// PyStr is str(value) for a scalar, as an f-string formats it.
func (v Value) PyStr() string {
	if v.Kind == Str {
		return v.S
	}
	return v.Repr()
}
