// Package pyint is Python's integer semantics where the reference relies on them: int(str) in base
// 10 (it reads environment variables, sub-model indices, version directories and vocabulary files
// with it, so text it accepts ("  -1_000\n") must be accepted here, and text it rejects ("-_1",
// "1__0") rejected), and the floor division and modulo of // and %.
package pyint

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode"

	"github.com/monolith-go/monolith/pkg/pyfmt"
)

// ErrSyntax and ErrRange are the two ways Parse fails (test with errors.Is).
var (
	ErrSyntax = errors.New("invalid literal for int() with base 10")
	ErrRange  = errors.New("out of the 64-bit integer range")
)

// Parse is int(s) in base 10: surrounding white space (Python's int strips what Go's
// unicode.IsSpace matches, not the \x1c-\x1f that str.strip also removes), one optional sign,
// decimal digits (any Unicode decimal digit, as Python) with single underscores between them.
// Python's ints are unbounded; values beyond int64 are ErrRange. The error text is Python's
// ("invalid literal for int() with base 10: 'x'").
func Parse(s string) (int64, error) {
	t := strings.TrimFunc(s, unicode.IsSpace)
	neg := false
	if t != "" && (t[0] == '+' || t[0] == '-') {
		neg = t[0] == '-'
		t = t[1:]
	}
	if t == "" || t[0] == '_' || t[len(t)-1] == '_' {
		return 0, syntaxError(s)
	}
	var v uint64
	underscore := false
	for _, r := range t {
		if r == '_' {
			if underscore {
				return 0, syntaxError(s)
			}
			underscore = true
			continue
		}
		underscore = false
		d, ok := digit(r)
		if !ok {
			return 0, syntaxError(s)
		}
		if v > (math.MaxUint64-9)/10 {
			return 0, rangeError(s)
		}
		v = v*10 + d
	}
	limit := uint64(math.MaxInt64)
	if neg {
		limit++
	}
	if v > limit {
		return 0, rangeError(s)
	}
	if neg {
		return -int64(v-1) - 1, nil
	}
	return int64(v), nil
}

// digit is the value of a Unicode decimal digit (category Nd). Unicode assigns them in runs of
// ten, 0 to 9, some runs adjacent (the mathematical digits): the value is the distance from the
// start of the run of digits, modulo 10.
func digit(r rune) (uint64, bool) {
	if r >= '0' && r <= '9' {
		return uint64(r - '0'), true
	}
	if !unicode.IsDigit(r) {
		return 0, false
	}
	start := r
	for unicode.IsDigit(start - 1) {
		start--
	}
	return uint64(r-start) % 10, true
}

// Atoi is Parse for an int.
func Atoi(s string) (int, error) {
	n, err := Parse(s)
	if err == nil && int64(int(n)) != n {
		return 0, rangeError(s)
	}
	return int(n), err
}

func syntaxError(s string) error { return fmt.Errorf("%w: %s", ErrSyntax, pyfmt.StrRepr(s)) }

func rangeError(s string) error { return fmt.Errorf("int %s: %w", pyfmt.StrRepr(s), ErrRange) }

// FloorDiv and FloorMod are Python's // and % on integers (and tf.math.floordiv / floormod): the
// quotient rounds toward negative infinity and the remainder takes the divisor's sign.
func FloorDiv[T ~int | ~int64](a, b T) T {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func FloorMod[T ~int | ~int64](a, b T) T {
	m := a % b
	if m != 0 && (m < 0) != (b < 0) {
		m += b
	}
	return m
}
