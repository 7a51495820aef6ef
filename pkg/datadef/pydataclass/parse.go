package pydataclass

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxIntDigits is Python 3.11's default int_max_str_digits: json.loads refuses longer integers.
const maxIntDigits = 4300

// maxDepth bounds nesting (Python stops at its recursion limit; Go's stack would not).
const maxDepth = 1000

// Parse decodes data as json.loads(str(data, 'utf-8')) does. Errors are Value errors with
// json.JSONDecodeError's message ("Expecting value: line 1 column 1 (char 0)").
func Parse(data []byte) (Value, error) {
	if !utf8.Valid(data) {
		return Value{}, &Error{Kind: KindValue, Msg: "'utf-8' codec can't decode the data: invalid UTF-8"}
	}
	p := parser{s: string(data)}
	p.ws()
	v, err := p.value(0)
	if err != nil {
		return Value{}, err
	}
	p.ws()
	if p.i != len(p.s) {
		return Value{}, p.fail("Extra data", p.i)
	}
	return v, nil
}

type parser struct {
	s string
	i int
}

// fail is JSONDecodeError(msg, doc, pos): positions count characters, not bytes.
func (p *parser) fail(msg string, pos int) error {
	before := p.s[:pos]
	line := strings.Count(before, "\n") + 1
	col := utf8.RuneCountInString(before[strings.LastIndexByte(before, '\n')+1:]) + 1
	return &Error{Kind: KindValue, Msg: fmt.Sprintf("%s: line %d column %d (char %d)", msg, line, col, utf8.RuneCountInString(before))}
}

func (p *parser) ws() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) value(depth int) (Value, error) {
	if depth > maxDepth {
		return Value{}, p.fail("Nesting too deep", p.i)
	}
	if p.i >= len(p.s) {
		return Value{}, p.fail("Expecting value", p.i)
	}
	switch c := p.s[p.i]; {
	case c == '"':
		s, err := p.str()
		return StrV(s), err
	case c == '{':
		return p.dict(depth)
	case c == '[':
		return p.list(depth)
	case c == '-' || (c >= '0' && c <= '9'):
		if strings.HasPrefix(p.s[p.i:], "-Infinity") {
			p.i += len("-Infinity")
			return FloatV(math.Inf(-1)), nil
		}
		return p.number()
	}
	for _, lit := range []struct {
		text string
		v    Value
	}{{"null", NoneV()}, {"true", BoolV(true)}, {"false", BoolV(false)},
		{"NaN", FloatV(math.NaN())}, {"Infinity", FloatV(math.Inf(1))}} {
		if strings.HasPrefix(p.s[p.i:], lit.text) {
			p.i += len(lit.text)
			return lit.v, nil
		}
	}
	return Value{}, p.fail("Expecting value", p.i)
}

// number reads -?(0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?: an int without fraction or exponent, else a
// float (float('1e400') is inf, as in Python).
func (p *parser) number() (Value, error) {
	start := p.i
	digits := func() int {
		n := 0
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.s[p.i] == '-' {
		p.i++
	}
	if p.i < len(p.s) && p.s[p.i] == '0' {
		p.i++
	} else if digits() == 0 {
		return Value{}, p.fail("Expecting value", start)
	}
	isFloat := false
	if p.i+1 < len(p.s) && p.s[p.i] == '.' && p.s[p.i+1] >= '0' && p.s[p.i+1] <= '9' {
		p.i++
		digits()
		isFloat = true
	}
	if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		save := p.i
		p.i++
		if p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			p.i = save // not an exponent: the number ends before the 'e'
		} else {
			isFloat = true
		}
	}
	text := p.s[start:p.i]
	if !isFloat && len(strings.TrimPrefix(text, "-")) > maxIntDigits {
		return Value{}, &Error{Kind: KindValue, Msg: fmt.Sprintf("Exceeds the limit (%d digits) for integer string conversion: value has %d digits", maxIntDigits, len(strings.TrimPrefix(text, "-")))}
	}
	if isFloat {
		f, err := strconv.ParseFloat(text, 64)
		if err != nil && !isRange(err) {
			return Value{}, p.fail("Expecting value", start)
		}
		return FloatV(f), nil
	}
	return Value{Kind: Int, I: canonicalInt(text)}, nil
}

func isRange(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// canonicalInt is the decimal text Python writes for an int literal (-0 is 0).
func canonicalInt(text string) string {
	if text == "-0" {
		return "0"
	}
	return text
}

func (p *parser) str() (string, error) {
	start := p.i
	p.i++ // opening quote
	var b []byte
	for {
		j := p.i
		for j < len(p.s) && p.s[j] != '"' && p.s[j] != '\\' && p.s[j] >= 0x20 {
			j++
		}
		b = append(b, p.s[p.i:j]...)
		p.i = j
		if p.i >= len(p.s) {
			return "", p.fail("Unterminated string starting at", start)
		}
		switch c := p.s[p.i]; {
		case c == '"':
			p.i++
			return string(b), nil
		case c < 0x20:
			return "", p.fail("Invalid control character at", p.i)
		}
		// a backslash
		if p.i+1 >= len(p.s) {
			return "", p.fail("Unterminated string starting at", start)
		}
		esc := p.s[p.i+1]
		if c, ok := simpleEscapes[esc]; ok {
			b = append(b, c)
			p.i += 2
			continue
		}
		if esc != 'u' {
			return "", p.fail("Invalid \\escape", p.i)
		}
		r, ok := hex4(p.s, p.i+2)
		if !ok {
			return "", p.fail("Invalid \\uXXXX escape", p.i+1)
		}
		p.i += 6
		if r >= 0xd800 && r <= 0xdbff && strings.HasPrefix(p.s[p.i:], `\u`) {
			if lo, ok := hex4(p.s, p.i+2); ok && lo >= 0xdc00 && lo <= 0xdfff {
				p.i += 6
				b = utf8.AppendRune(b, 0x10000+(r-0xd800)<<10+(lo-0xdc00))
				continue
			}
		}
		if r >= 0xd800 && r <= 0xdfff {
			b = appendSurrogate(b, r)
			continue
		}
		b = utf8.AppendRune(b, r)
	}
}

var simpleEscapes = map[byte]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

func hex4(s string, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	n, err := strconv.ParseUint(s[i:i+4], 16, 32)
	if err != nil || strings.ContainsAny(s[i:i+4], "+-") {
		return 0, false
	}
	return rune(n), true
}

func (p *parser) dict(depth int) (Value, error) {
	p.i++ // {
	v := Value{Kind: Dict, D: []Member{}}
	index := map[string]int{}
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return v, nil
	}
	for {
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return Value{}, p.fail("Expecting property name enclosed in double quotes", p.i)
		}
		key, err := p.str()
		if err != nil {
			return Value{}, err
		}
		p.ws()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return Value{}, p.fail("Expecting ':' delimiter", p.i)
		}
		p.i++
		p.ws()
		val, err := p.value(depth + 1)
		if err != nil {
			return Value{}, err
		}
		if at, dup := index[key]; dup {
			v.D[at].Val = val // a dict keeps a repeated key's first place and its last value
		} else {
			index[key] = len(v.D)
			v.D = append(v.D, Member{Key: key, Val: val})
		}
		p.ws()
		if p.i < len(p.s) && p.s[p.i] == '}' {
			p.i++
			return v, nil
		}
		if p.i >= len(p.s) || p.s[p.i] != ',' {
			return Value{}, p.fail("Expecting ',' delimiter", p.i)
		}
		p.i++
		p.ws()
	}
}

func (p *parser) list(depth int) (Value, error) {
	p.i++ // [
	v := Value{Kind: List, L: []Value{}}
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		return v, nil
	}
	for {
		val, err := p.value(depth + 1)
		if err != nil {
			return Value{}, err
		}
		v.L = append(v.L, val)
		p.ws()
		if p.i < len(p.s) && p.s[p.i] == ']' {
			p.i++
			return v, nil
		}
		if p.i >= len(p.s) || p.s[p.i] != ',' {
			return Value{}, p.fail("Expecting ',' delimiter", p.i)
		}
		p.i++
		p.ws()
	}
}

// Int64 returns an Int's value when it fits an int64.
func (v Value) Int64() (int64, bool) {
	if v.Kind != Int {
		return 0, false
	}
	n, err := strconv.ParseInt(v.I, 10, 64)
	return n, err == nil
}

// IntFloat is float(v) of an Int (int(10**400) is too large: inf).
func (v Value) IntFloat() float64 {
	f, ok := new(big.Float).SetString(v.I)
	if !ok {
		return math.NaN()
	}
	x, _ := f.Float64()
	return x
}
