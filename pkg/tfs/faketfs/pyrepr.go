package faketfs

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// Tuple is a Python tuple of strings (ModelConf.signature_name).
type Tuple []string

// PyRepr formats a metadata value as Python's repr does, which is what the reference puts in
// GetModelMetadata's Any values: strings quoted ('a'), None, ints, lists [1, 2] and tuples
// ('a', 'b').
func PyRepr(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case string:
		return pyStrRepr(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case int:
		return strconv.Itoa(x)
	case bool:
		if x {
			return "True"
		}
		return "False"
	case []int64:
		parts := make([]string, len(x))
		for i, n := range x {
			parts[i] = strconv.FormatInt(n, 10)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case Tuple:
		parts := make([]string, len(x))
		for i, s := range x {
			parts[i] = pyStrRepr(s)
		}
		if len(parts) == 1 {
			return "(" + parts[0] + ",)"
		}
		return "(" + strings.Join(parts, ", ") + ")"
	}
	return fmt.Sprint(v)
}

// PyStr formats a metadata value as Python's str does: strings as they are, the rest as PyRepr.
func PyStr(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return PyRepr(v)
}

// pyStrRepr is Python's repr of a str: single quotes unless the text holds a single quote and no
// double quote; backslash, the quote, \t \n \r escaped; other non-printable characters as \xNN,
// \uNNNN or \UNNNNNNNN.
func pyStrRepr(s string) string {
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
