package optimizer

import (
	"math"
	"sync/atomic"
)

// stochasticRounding is the reference's StochasticRoundingFloat16OptimizerDecorator
// (OptimizerConfig.stochastic_rounding_float16): after each update every embedding value is rounded
// to one of its two float16 neighbours, up with probability (v - down) / (up - down), drawn from
// the reference's Marsaglia multiply-with-carry generator seeded {0, 1}.
//
// Differences, on purpose: the reference keeps one generator per thread; here each optimizer has
// one, shared by all goroutines (so a run's draws depend on how updates interleave, as they do on
// threads in the reference). The reference drops the global step when it calls the optimizer it
// decorates (BatchSoftmax would see step 0) and, inside a Combine, rounds the later parts' values
// too; this passes the step and rounds the optimizer's own values only.
type stochasticRounding struct {
	part
	rng atomic.Uint64 // the generator's two 32-bit words: rng_[0] low, rng_[1] high
}

func newStochasticRounding(p part) *stochasticRounding {
	s := &stochasticRounding{part: p}
	s.rng.Store(1 << 32)
	return s
}

func (s *stochasticRounding) String() string { return describe(s.part) }

func (s *stochasticRounding) Apply(emb, state, grad []float32, learningRates []float32, globalStep int64) {
	s.part.Apply(emb, state, grad, learningRates, globalStep)
	for i := range emb[:s.Dim()] {
		emb[i] = stochasticRound(emb[i], s.rand())
	}
}

// rand is the reference's rand(): one multiply-with-carry step of both words, then
// ((rng_[0] & 65535) << 16) + rng_[1] (mod 2^32) / 2^32 in float32.
func (s *stochasticRounding) rand() float32 {
	for {
		old := s.rng.Load()
		r0, r1 := old&0xffffffff, old>>32
		r0 = (36969*(r0&65535) + (r0 >> 16)) & 0xffffffff
		r1 = (18000*(r1&65535) + (r1 >> 16)) & 0xffffffff
		if s.rng.CompareAndSwap(old, r0|r1<<32) {
			return float32(((r0&65535)<<16+r1)&0xffffffff) / 4294967296
		}
	}
}

// stochasticRound is the reference's stochastic_round(vf, p).
func stochasticRound(v, p float32) float32 {
	down, up := float16Bounds(v)
	if p <= (v-down)/(up-down) {
		return up
	}
	return down
}

// float16Bounds returns v rounded to float16 toward -inf and toward +inf (half.hpp's float2half
// with round_toward_neg_infinity / round_toward_infinity, back to float32). Values beyond the
// largest float16 (65504) round outward to infinity; NaN stays NaN.
func float16Bounds(v float32) (down, up float32) {
	if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
		return v, v
	}
	a := math.Abs(float64(v))
	var lo, hi float64
	switch {
	case a > 65504:
		lo, hi = 65504, math.Inf(1)
	default:
		q := math.Ldexp(1, -24) // float16's subnormal step, below 2^-14
		if a >= math.Ldexp(1, -14) {
			_, exp := math.Frexp(a) // a = f * 2^exp, f in [0.5, 1)
			q = math.Ldexp(1, exp-1-10)
		}
		lo = math.Floor(a/q) * q
		hi = lo
		if lo != a {
			hi = lo + q
		}
	}
	if math.Signbit(float64(v)) {
		return float32(-hi), float32(-lo)
	}
	return float32(lo), float32(hi)
}
