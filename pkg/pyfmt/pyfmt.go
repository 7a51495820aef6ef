// Package pyfmt formats values the way Python's str()/repr() does, where the reference's output
// (command lines, JSON, config text) is compared byte for byte.
package pyfmt

import (
	"math"
	"strconv"
	"strings"
)

// Float formats f like Python's repr(float): shortest round-trip digits, fixed notation for
// decimal exponents in [-4, 16), scientific otherwise ("1e-05", "1e+16"), and always a fraction
// or exponent ("1.0", not "1").
func Float(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, expStr, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expStr)
	neg := strings.HasPrefix(mant, "-")
	mant = strings.TrimPrefix(mant, "-")
	digits := strings.Replace(mant, ".", "", 1)
	sign := ""
	if neg {
		sign = "-"
	}
	if exp < -4 || exp >= 16 {
		m := digits[:1]
		if len(digits) > 1 {
			m += "." + digits[1:]
		}
		es := "+"
		if exp < 0 {
			es = "-"
			exp = -exp
		}
		return sign + m + "e" + es + pad2(exp)
	}
	var s string
	if exp < 0 {
		s = "0." + strings.Repeat("0", -exp-1) + digits
	} else if len(digits) <= exp+1 {
		s = digits + strings.Repeat("0", exp+1-len(digits)) + ".0"
	} else {
		s = digits[:exp+1] + "." + digits[exp+1:]
	}
	return sign + s
}

func pad2(n int) string {
	s := strconv.Itoa(n)
	if len(s) < 2 {
		s = "0" + s
	}
	return s
}

// Bool formats b like Python's str(bool).
func Bool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// OptStr formats an optional string as an f-string does: None when unset.
func OptStr(s *string) string {
	if s == nil {
		return "None"
	}
	return *s
}

// OptInt formats an optional int as an f-string does: None when unset.
func OptInt(n *int) string {
	if n == nil {
		return "None"
	}
	return strconv.Itoa(*n)
}
