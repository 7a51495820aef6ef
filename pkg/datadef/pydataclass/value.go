// Package pydataclass reads and writes the JSON of the reference's dataclasses_json dataclasses
// exactly as Python does: Parse is json.loads (NaN and Infinity literals, integers of any size, the
// last of repeated keys at the first one's place, lone surrogate escapes kept), Value.JSON is
// json.dumps with its defaults (", " and ": ", ASCII only, float repr), and Object's readers give a
// record's fields their Go types while Held remembers what Python would write back for values a Go
// field cannot hold as they were (None in a field with a non-None default, an int in a float field).
package pydataclass

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Kind is the Python type a JSON value decodes to.
type Kind uint8

// The kinds of Value.
const (
	Null Kind = iota
	Bool
	Int
	Float
	Str
	List
	Dict
)

// Value is a JSON value as Python's json module holds it.
type Value struct {
	Kind Kind
	B    bool
	// I is an Int's canonical decimal text (Python ints have no size limit).
	I string
	F float64
	// S is a Str; a lone surrogate escape is kept as its 3-byte (WTF-8) form so that it is written
	// back as the same escape.
	S string
	L []Value
	// D is a Dict's members in Python's order (first occurrence of a key, last value).
	D []Member
}

// Member is one key of a Dict.
type Member struct {
	Key string
	Val Value
}

// Constructors for the values Go fields hold.

// NoneV is Python's None.
func NoneV() Value { return Value{Kind: Null} }

// BoolV is a bool.
func BoolV(b bool) Value { return Value{Kind: Bool, B: b} }

// IntV is an int.
func IntV(n int) Value { return Value{Kind: Int, I: strconv.Itoa(n)} }

// FloatV is a float.
func FloatV(f float64) Value { return Value{Kind: Float, F: f} }

// StrV is a str.
func StrV(s string) Value { return Value{Kind: Str, S: s} }

// OptStrV is a str, or None for nil.
func OptStrV(s *string) Value {
	if s == nil {
		return NoneV()
	}
	return StrV(*s)
}

// OptIntV is an int, or None for nil.
func OptIntV(n *int) Value {
	if n == nil {
		return NoneV()
	}
	return IntV(*n)
}

// IntsV is a list of ints.
func IntsV(v []int) Value {
	l := make([]Value, len(v))
	for i, n := range v {
		l[i] = IntV(n)
	}
	return Value{Kind: List, L: l}
}

// BytesV is bytes as json.dumps writes them through dataclasses-json's encoder: a list of ints.
func BytesV(b []byte) Value {
	l := make([]Value, len(b))
	for i, c := range b {
		l[i] = IntV(int(c))
	}
	return Value{Kind: List, L: l}
}

// Get returns the value of a Dict's key.
func (v Value) Get(key string) (Value, bool) {
	for _, m := range v.D {
		if m.Key == key {
			return m.Val, true
		}
	}
	return Value{}, false
}

// TypeName is the Python type's name, as Python's error messages give it.
func (v Value) TypeName() string {
	return [...]string{Null: "NoneType", Bool: "bool", Int: "int", Float: "float", Str: "str", List: "list", Dict: "dict"}[v.Kind]
}

// JSON is json.dumps(v): ", " and ": " separators, non-ASCII as \u escapes, floats as repr, NaN and
// Infinity as Python writes them.
func (v Value) JSON() []byte { return v.appendJSON(nil) }

func (v Value) appendJSON(b []byte) []byte {
	switch v.Kind {
	case Null:
		return append(b, "null"...)
	case Bool:
		if v.B {
			return append(b, "true"...)
		}
		return append(b, "false"...)
	case Int:
		return append(b, v.I...)
	case Float:
		switch {
		case math.IsNaN(v.F):
			return append(b, "NaN"...)
		case math.IsInf(v.F, 1):
			return append(b, "Infinity"...)
		case math.IsInf(v.F, -1):
			return append(b, "-Infinity"...)
		}
		return append(b, FloatRepr(v.F)...)
	case Str:
		return appendString(b, v.S)
	case List:
		b = append(b, '[')
		for i, x := range v.L {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = x.appendJSON(b)
		}
		return append(b, ']')
	}
	b = append(b, '{')
	for i, m := range v.D {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = appendString(b, m.Key)
		b = append(b, ": "...)
		b = m.Val.appendJSON(b)
	}
	return append(b, '}')
}

// appendString writes s as json.dumps does with ensure_ascii: every character outside ' '..'~' is
// escaped, astral ones as surrogate pairs; a kept lone surrogate is written as its escape again.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	u := func(b []byte, r rune) []byte {
		return append(b, '\\', 'u', hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf])
	}
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= ' ' && c <= '~' {
			if c == '"' || c == '\\' {
				b = append(b, '\\')
			}
			b = append(b, c)
			i++
			continue
		}
		switch c {
		case '\n':
			b = append(b, `\n`...)
			i++
			continue
		case '\r':
			b = append(b, `\r`...)
			i++
			continue
		case '\t':
			b = append(b, `\t`...)
			i++
			continue
		case '\b':
			b = append(b, `\b`...)
			i++
			continue
		case '\f':
			b = append(b, `\f`...)
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			r, size = surrogateAt(s[i:])
		}
		i += size
		if r >= 0x10000 {
			r -= 0x10000
			b = u(b, 0xd800+(r>>10))
			b = u(b, 0xdc00+(r&0x3ff))
			continue
		}
		b = u(b, r)
	}
	return append(b, '"')
}

// surrogateAt decodes the WTF-8 form of a lone surrogate (ED A0..BF 80..BF) at the start of s;
// any other invalid byte is U+FFFD.
func surrogateAt(s string) (rune, int) {
	if len(s) >= 3 && s[0] == 0xed && s[1] >= 0xa0 && s[1] <= 0xbf && s[2] >= 0x80 && s[2] <= 0xbf {
		return 0xd000 | rune(s[1]&0x3f)<<6 | rune(s[2]&0x3f), 3
	}
	return utf8.RuneError, 1
}

// appendSurrogate writes a lone surrogate in its WTF-8 form.
func appendSurrogate(b []byte, r rune) []byte {
	return append(b, 0xed, byte(0x80|(r>>6)&0x3f), byte(0x80|r&0x3f))
}

// FloatRepr is Python's repr of a finite float: the shortest digits that read back the same, in
// positional form for exponents -4..15 (always with a fraction, 2.0) and as 1e+16 / 1e-05 outside.
func FloatRepr(f float64) string {
	e := strconv.FormatFloat(f, 'e', -1, 64) // [-]d.ddde±XX
	mant, expStr, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expStr)
	sign := ""
	if strings.HasPrefix(mant, "-") {
		sign, mant = "-", mant[1:]
	}
	digits := strings.Replace(mant, ".", "", 1)
	if exp < -4 || exp >= 16 {
		m := digits[:1]
		if len(digits) > 1 {
			m += "." + digits[1:]
		}
		es := "+"
		if exp < 0 {
			es, exp = "-", -exp
		}
		x := strconv.Itoa(exp)
		if len(x) < 2 {
			x = "0" + x
		}
		return sign + m + "e" + es + x
	}
	switch {
	case exp < 0:
		return sign + "0." + strings.Repeat("0", -exp-1) + digits
	case len(digits) <= exp+1:
		return sign + digits + strings.Repeat("0", exp+1-len(digits)) + ".0"
	}
	return sign + digits[:exp+1] + "." + digits[exp+1:]
}

// Repr is Python's repr of the value (as error messages quote it).
func (v Value) Repr() string {
	switch v.Kind {
	case Null:
		return "None"
	case Bool:
		if v.B {
			return "True"
		}
		return "False"
	case Int:
		return v.I
	case Float:
		switch {
		case math.IsNaN(v.F):
			return "nan"
		case math.IsInf(v.F, 1):
			return "inf"
		case math.IsInf(v.F, -1):
			return "-inf"
		}
		return FloatRepr(v.F)
	case Str:
		return strRepr(v.S)
	case List:
		parts := make([]string, len(v.L))
		for i, x := range v.L {
			parts[i] = x.Repr()
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	parts := make([]string, len(v.D))
	for i, m := range v.D {
		parts[i] = strRepr(m.Key) + ": " + m.Val.Repr()
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// strRepr is Python's repr of a str: single quotes unless the text holds ' and no ".
func strRepr(s string) string {
	q := byte('\'')
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		q = '"'
	}
	b := []byte{q}
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			r, size = surrogateAt(s[i:])
		}
		i += size
		switch {
		case r == rune(q) || r == '\\':
			b = append(b, '\\', byte(r))
		case r == '\n':
			b = append(b, `\n`...)
		case r == '\r':
			b = append(b, `\r`...)
		case r == '\t':
			b = append(b, `\t`...)
		case r < ' ' || r == 0x7f:
			b = append(b, `\x`...)
			b = append(b, "0123456789abcdef"[r>>4], "0123456789abcdef"[r&0xf])
		case r >= 0xd800 && r <= 0xdfff:
			b = append(b, []byte(`\u`+strconv.FormatInt(int64(r), 16))...)
		default:
			b = utf8.AppendRune(b, r)
		}
	}
	return string(append(b, q))
}
