package embeddingtask

import (
	"math"
	"strings"
	"unicode"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pyfmt"
)

// isPySpace is Python's str.isspace for one character (Go's unicode.IsSpace plus the ASCII
// separators \x1c-\x1f).
func isPySpace(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f) }

// pyStrip is str.strip().
func pyStrip(s string) string { return strings.TrimFunc(s, isPySpace) }

// isASCIIDigits is str.isdigit() for ASCII text: non-empty and only 0-9.
func isASCIIDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// pyInt is int(s) for ASCII decimal text: surrounding whitespace, one sign, digits with single
// underscores between them. Values beyond int64 are errors.
func pyInt(s string) (int, error) {
	t := pyStrip(s)
	neg := false
	if t != "" && (t[0] == '+' || t[0] == '-') {
		neg = t[0] == '-'
		t = t[1:]
	}
	if t == "" || t[0] == '_' || t[len(t)-1] == '_' {
		return 0, badInt(s)
	}
	var v uint64
	prevUnderscore := false
	for i := 0; i < len(t); i++ {
		c := t[i]
		if c == '_' {
			if prevUnderscore {
				return 0, badInt(s)
			}
			prevUnderscore = true
			continue
		}
		prevUnderscore = false
		if c < '0' || c > '9' {
			return 0, badInt(s)
		}
		if v > (math.MaxUint64-9)/10 {
			return 0, errkind.New(errkind.Value, "int %s is out of range", pyfmt.StrRepr(s))
		}
		v = v*10 + uint64(c-'0')
	}
	limit := uint64(math.MaxInt64)
	if neg {
		limit++
	}
	if v > limit {
		return 0, errkind.New(errkind.Value, "int %s is out of range", pyfmt.StrRepr(s))
	}
	if neg {
		return int(-int64(v-1) - 1), nil
	}
	return int(v), nil
}

func badInt(s string) error {
	return errkind.New(errkind.Value, "invalid literal for int() with base 10: %s", pyfmt.StrRepr(s))
}

// floorDiv and floorMod are Python's // and % (and tf.math.floordiv / floormod) on integers.
func floorDiv(a, b int) int {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func floorMod(a, b int) int {
	m := a % b
	if m != 0 && ((m < 0) != (b < 0)) {
		m += b
	}
	return m
}
