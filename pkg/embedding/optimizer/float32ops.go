package optimizer

import "math"

// The optimizers compute in float32 exactly as the reference's C++ does: every float32 operation
// rounds alone (the reference is built without contraction), so products that feed a sum are
// wrapped in float32(...) conversions, which the Go spec guarantees are not fused. Where the
// reference uses explicit FMA intrinsics (Adagrad's AVX path) fma32 rounds once.

// sqrt32 is std::sqrt(float): correctly rounded, since a float64 square root of a float32 rounds
// to float32 without double-rounding error (53 >= 2*24+2).
func sqrt32(x float32) float32 { return float32(math.Sqrt(float64(x))) }

// fma32 is a*b+c computed exactly and rounded once to float32 (vfmadd*ps).
//
// The product of two float32 values is exact in float64, so only the sum can round twice: first
// to float64, then to float32. That goes wrong only when the float64 sum lands exactly on the
// midpoint between two float32 values while the exact sum lies off it; the rounding error of the
// float64 sum (TwoSum) says on which side, and picks the float32 neighbour on that side.
func fma32(a, b, c float32) float32 {
	s := float64(a)*float64(b) + float64(c)
	// Fast path: s in float32's normal range and not a float32 midpoint (one 1 bit followed by 28
	// zero bits below float32's last mantissa bit), so rounding s rounds the exact sum.
	bits := math.Float64bits(s)
	if exp := bits >> 52 & 0x7ff; exp >= 1023-126 && exp < 1023+128 && bits&(1<<29-1) != 1<<28 {
		return float32(s)
	}
	return fma32Slow(a, b, c)
}

// fma32Slow is fma32 for midpoints, float32 subnormals, overflow, NaN and Inf.
func fma32Slow(a, b, c float32) float32 {
	p := float64(a) * float64(b)
	s := p + float64(c)
	r := float32(s)
	if math.IsNaN(s) || math.IsInf(s, 0) {
		return r
	}
	// TwoSum: s + e == p + c exactly.
	bb := s - p
	e := (p - (s - bb)) + (float64(c) - bb)
	if e == 0 || float64(r) == s {
		return r
	}
	// n is the float32 neighbour of r on s's side (r is the nearest float32 to s); at the top of
	// the range that neighbour is 2^128, which float32 cannot hold.
	var n float64
	if math.IsInf(float64(r), 0) {
		n = math.Copysign(math.MaxFloat32, s)
		mid := n + math.Copysign(math.Ldexp(1, 103), s) // half an ulp above MaxFloat32
		if s != mid {
			return r
		}
		if (e > 0) == (s > 0) {
			return r
		}
		return float32(n)
	}
	n = float64(math.Nextafter32(r, float32(math.Copysign(math.Inf(1), s-float64(r)))))
	if math.IsInf(n, 0) {
		n = math.Copysign(math.Ldexp(1, 128), n)
	}
	mid := (float64(r) + n) / 2
	if s != mid {
		return r
	}
	lo, hi := math.Min(float64(r), n), math.Max(float64(r), n)
	if e > 0 {
		return float32(hi)
	}
	return float32(lo)
}
