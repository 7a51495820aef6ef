package optimizer

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// exactFMA is a*b+c computed exactly with math/big and rounded once to float32.
func exactFMA(a, b, c float32) float32 {
	x := new(big.Float).SetPrec(300).SetFloat64(float64(a))
	x.Mul(x, new(big.Float).SetPrec(300).SetFloat64(float64(b)))
	x.Add(x, new(big.Float).SetPrec(300).SetFloat64(float64(c)))
	f, _ := x.Float32()
	return f
}

func TestFMA32Midpoints(t *testing.T) {
	// Products of two float32 that put the float64 sum exactly on a float32 midpoint while the
	// exact sum lies just off it: rounding the float64 sum to float32 would go the wrong way.
	p2 := func(e int) float32 { return float32(math.Ldexp(1, e)) }
	for _, tc := range []struct {
		name    string
		a, b, c float32
		want    float32
	}{
		// (1+2^-18)(1-2^-18)*2^-24 = 2^-24 - 2^-60 added to 1+2^-23: just below the midpoint
		// 1+2^-23+2^-24, whose tie would go to the even 1+2^-22.
		{"below", 1 + p2(-18), (1 - p2(-18)) * p2(-24), 1 + p2(-23), 1 + p2(-23)},
		// 4097*2^-12 * 16773121*2^-48 = 2^-24 + 2^-60 added to 1: just above the midpoint 1+2^-24,
		// whose tie would go to the even 1.
		{"above", 4097 * p2(-12), 16773121 * p2(-48), 1, 1 + p2(-23)},
		{"above negative", -4097 * p2(-12), 16773121 * p2(-48), -1, -(1 + p2(-23))},
		{"exact", 3, 5, 7, 22},
		{"cancel", 1 + p2(-12), 1 - p2(-12), -1, -float32(math.Ldexp(1, -24))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if want := exactFMA(tc.a, tc.b, tc.c); want != tc.want {
				t.Fatalf("test case is wrong: exact result %.9g, listed %.9g", want, tc.want)
			}
			if got := fma32(tc.a, tc.b, tc.c); got != tc.want {
				t.Errorf("fma32(%.9g, %.9g, %.9g) = %.9g, want %.9g", tc.a, tc.b, tc.c, got, tc.want)
			}
		})
	}
}

func TestFMA32Random(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	draw := func() float32 {
		// Random bits over a wide exponent range, subnormals included; no NaN or Inf.
		for {
			f := math.Float32frombits(rng.Uint32())
			if !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) && math.Abs(float64(f)) < 1e18 {
				return f
			}
		}
	}
	for i := range 200000 {
		a, b, c := draw(), draw(), draw()
		if i%2 == 0 { // near-cancelling sums
			c = -float32(float64(a) * float64(b))
		}
		want := exactFMA(a, b, c)
		if got := fma32(a, b, c); math.Float32bits(got) != math.Float32bits(want) && !(got == 0 && want == 0) {
			t.Fatalf("fma32(%g, %g, %g) = %g, want %g", a, b, c, got, want)
		}
	}
}

func TestFMA32Special(t *testing.T) {
	inf := float32(math.Inf(1))
	max32 := float32(math.MaxFloat32)
	for _, tc := range []struct {
		a, b, c float32
		want    float64
	}{
		{inf, 0, 1, math.NaN()},
		{inf, 1, 1, math.Inf(1)},
		{max32, 2, 0, math.Inf(1)},
		{max32, 1, -max32, 0},
	} {
		got := fma32(tc.a, tc.b, tc.c)
		if !(float64(got) == tc.want || math.IsNaN(tc.want) && math.IsNaN(float64(got))) {
			t.Errorf("fma32(%g, %g, %g) = %g, want %g", tc.a, tc.b, tc.c, got, tc.want)
		}
	}
}

// TestAdagradKernelsAgree: the assembly kernel and the Go one give the same bits on random
// entries of every scale (the Go one is also checked against the reference's goldens).
func TestAdagradKernelsAgree(t *testing.T) {
	if !hasAVXFMA() {
		t.Skip("no AVX and FMA on this CPU: only the Go kernel runs")
	}
	saved := useAVX
	defer func() { useAVX = saved }()
	rng := rand.New(rand.NewPCG(5, 6))
	scaled := func() float32 {
		return float32((rng.Float64()*2 - 1) * math.Ldexp(1, rng.IntN(40)-20))
	}
	for i := range 20000 {
		dim := 8 * (1 + i%4)
		w, norm, grad := make([]float32, dim), make([]float32, dim), make([]float32, dim)
		for j := range w {
			w[j], grad[j] = scaled(), scaled()
			norm[j] = float32(math.Abs(float64(scaled())))
		}
		lr, wd := float32(rng.Float64()), float32(0)
		if i%2 == 1 {
			wd = float32(rng.Float64() * 0.2)
		}
		w2, norm2 := append([]float32(nil), w...), append([]float32(nil), norm...)
		useAVX = true
		adagradBlocks(w, norm, grad, lr, wd)
		useAVX = false
		adagradBlocks(w2, norm2, grad, lr, wd)
		if !sameFloats(w, w2) || !sameFloats(norm, norm2) {
			t.Fatalf("entry %d (lr %g, wd %g): assembly %v %v, Go %v %v", i, lr, wd, w, norm, w2, norm2)
		}
	}
}
