package csvconvert

import (
	"math"
	"strconv"
)

// parseFloat32 is strconv.ParseFloat(s, 32) for a dense value, spaces around it allowed, with ok
// false for what is not a finite float32 (NaN, infinities, out of range, not a number).
//
// Plain decimals ("-12.5", "3e-4"), what CSV files hold, take a fast path that is about 3x
// strconv's and gives the same float32: up to 19 significant digits m and a power of ten p with
// m <= 2^53 and |p| <= 22 are m*10^p in one correctly rounded float64 operation (both operands
// are exact), and rounding that float64 to float32 gives the correctly rounded float32 of the
// decimal unless the float64 is exactly halfway between two float32s (every float32 and every
// halfway point is a float64, so the decimal and its float64 lie between the same two halfway
// points). Halfway cases, subnormals and everything else go to strconv.
func parseFloat32(s string) (float32, bool) {
	i, neg := 0, false
	if len(s) > 0 && (s[0] == '-' || s[0] == '+') {
		neg, i = s[0] == '-', 1
	}
	// The digits, with a point among them: m, and the power of ten exp that scales it. Digits
	// are counted from positions, not in the loops.
	var m uint64
	from := i
	for ; i < len(s); i++ {
		d := s[i] - '0'
		if d > 9 {
			break
		}
		m = m*10 + uint64(d)
	}
	digits, exp := i-from, 0
	if i < len(s) && s[i] == '.' {
		i++
		from = i
		for ; i < len(s); i++ {
			d := s[i] - '0'
			if d > 9 {
				break
			}
			m = m*10 + uint64(d)
		}
		exp = from - i
		digits -= exp
	}
	// Leading zeros count as digits: 19 of them fit a uint64 (more overflowed m: strconv's).
	if digits == 0 || digits > 19 {
		return parseFloat32Slow(s)
	}
	if i < len(s) {
		if s[i] != 'e' && s[i] != 'E' {
			return parseFloat32Slow(s)
		}
		i++
		eneg := false
		if i < len(s) && (s[i] == '-' || s[i] == '+') {
			eneg = s[i] == '-'
			i++
		}
		if i == len(s) {
			return parseFloat32Slow(s)
		}
		e := 0
		for ; i < len(s); i++ {
			d := s[i] - '0'
			if d > 9 || e > 1000 {
				return parseFloat32Slow(s)
			}
			e = e*10 + int(d)
		}
		if eneg {
			e = -e
		}
		exp += e
	}
	if m == 0 {
		if neg {
			return float32(math.Copysign(0, -1)), true
		}
		return 0, true
	}
	if m > 1<<53 || exp < -22 || exp > 22 {
		return parseFloat32Slow(s)
	}
	v := float64(m)
	if exp > 0 {
		v *= pow10[exp]
	} else if exp < 0 {
		v /= pow10[-exp]
	}
	if v > math.MaxFloat32 || v < 0x1p-126 || math.Float64bits(v)&(1<<29-1) == 1<<28 {
		return parseFloat32Slow(s) // out of range, subnormal, or halfway between two float32s
	}
	f := float32(v)
	if neg {
		f = -f
	}
	return f, true
}

var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

func parseFloat32Slow(s string) (float32, bool) {
	v, err := strconv.ParseFloat(trimSpace(s), 32)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, false
	}
	return float32(v), true
}
