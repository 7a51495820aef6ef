package csvconvert

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// strconvFloat32 is what parseFloat32 must return: strconv's float32, ok for finite numbers.
func strconvFloat32(s string) (float32, bool) {
	v, err := strconv.ParseFloat(trimSpace(s), 32)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, false
	}
	return float32(v), true
}

func checkFloat32(t *testing.T, s string) {
	t.Helper()
	got, gotOK := parseFloat32(s)
	want, wantOK := strconvFloat32(s)
	if gotOK != wantOK || math.Float32bits(got) != math.Float32bits(want) {
		t.Errorf("parseFloat32(%q) = %v (%#x), %v; strconv: %v (%#x), %v", s, got, math.Float32bits(got), gotOK, want, math.Float32bits(want), wantOK)
	}
}

// TestParseFloat32: the fast path gives strconv's float32, bit for bit, and rejects what strconv
// rejects or makes NaN or infinite.
func TestParseFloat32(t *testing.T) {
	for _, s := range []string{
		"0", "-0", "+0", "0.0", "-0.000", "1", "-1", "+1", "1.5", "-12.25", ".5", "5.", "-.5", "007",
		"0.05", "0.1", "0.2", "0.3", "3.14159265358979", "1e5", "1E5", "1e+5", "1e-5", "1.e3", "2.5e-3",
		"123456789", "16777216", "16777217", "16777219", "33554433", "0.1e-21", "1e22", "1e23", "1e-22",
		"1e-23", "9007199254740992", "9007199254740993", "1234567890123456789", "12345678901234567890",
		"3.4028234e38", "3.4028235e38", "3.4028236e38", "1e38", "1e39", "-1e39", "1e-38", "1e-45",
		"1e-46", "1.17549435e-38", "1.1754942e-38", " 1.5", "1.5 ", " -2 ",
		"", " ", ".", "-", "+", "e5", ".e5", "1e", "1e+", "1e-", "1.2.3", "1,5", "1_0", "0x1p-2", "0x10",
		"NaN", "nan", "Inf", "-Inf", "+inf", "infinity", "1e1000", "1e-1000", "1ee5", "--1", "abc", "1a",
	} {
		checkFloat32(t, s)
	}
}

// TestParseFloat32Random compares random decimals of up to 19 digits and exponents around the
// fast path's bounds, and float32 halfway points, with strconv.
func TestParseFloat32Random(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200000 {
		digits := 1 + rng.IntN(19)
		m := rng.Uint64() % maxDigits(digits)
		exp := rng.IntN(60) - 30
		var s string
		switch rng.IntN(3) {
		case 0:
			s = strconv.FormatUint(m, 10) + "e" + strconv.Itoa(exp)
		case 1: // a decimal point inside the digits
			d := strconv.FormatUint(m, 10)
			k := rng.IntN(len(d) + 1)
			s = d[:k] + "." + d[k:]
		default:
			s = strconv.FormatFloat(float64(math.Float32frombits(rng.Uint32())), 'g', -1, 32)
		}
		if rng.IntN(2) == 0 {
			s = "-" + s
		}
		checkFloat32(t, s)
	}
	// Halfway between two float32s, written with few digits: integers above 2^24.
	for k := range 2000 {
		checkFloat32(t, strconv.Itoa(1<<24+2*k+1))
		checkFloat32(t, strconv.Itoa(1<<25+4*k+2))
	}
}

// maxDigits is 10^n for n up to 19.
func maxDigits(n int) uint64 {
	p := uint64(1)
	for range n {
		p *= 10
	}
	return p
}

func BenchmarkParseFloat32(b *testing.B) {
	inputs := []string{"123.45", "0.052631", "-1.2345", "42", "3.5e-3", "418.77"}
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			for _, s := range inputs {
				parseFloat32(s)
			}
		}
	})
	b.Run("strconv", func(b *testing.B) {
		for b.Loop() {
			for _, s := range inputs {
				strconv.ParseFloat(s, 32)
			}
		}
	})
}
