package pyfmt

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// Repr formats v as Python's repr does, for the values Go code carries from the reference: None
// (nil), bools, ints, floats, strings, and lists of strings or ints. Other values print with %v.
func Repr(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case bool:
		return Bool(x)
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return Float(x)
	case string:
		return StrRepr(x)
	case []string:
		parts := make([]string, len(x))
		for i, s := range x {
			parts[i] = StrRepr(s)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case []int64:
		parts := make([]string, len(x))
		for i, n := range x {
			parts[i] = strconv.FormatInt(n, 10)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return fmt.Sprint(v)
}

// StrRepr is Python's repr of a str: single quotes unless the text holds a single quote and no
// double quote; backslash, the quote, \t \n \r escaped; other non-printable characters as \xNN,
// \uNNNN or \UNNNNNNNN.
func StrRepr(s string) string {
	quote := '\''
	if strings.ContainsRune(s, '\'') && !strings.ContainsRune(s, '"') {
		quote = '"'
	}
	var b strings.Builder
	b.WriteRune(quote)
	for _, r := range s {
		switch {
		case r == quote || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < ' ' || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r < 0x7f:
			b.WriteRune(r)
		case unicode.IsPrint(r):
			b.WriteRune(r)
		case r <= 0xff:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	b.WriteRune(quote)
	return b.String()
}
