package agentconf

import (
	"strings"
	"testing"
)

func TestEvalArithmetic(t *testing.T) {
	// Expected values are what Python's eval gives (then int()/float() as from_file applies them).
	tests := []struct {
		in      string
		wantInt int
		isFloat bool
		wantF   float64
	}{
		{"1", 1, false, 0},
		{"60 * 1000 * 1000", 60000000, false, 0},
		{"2**3", 8, false, 0},
		{"2 ** 3 ** 2", 512, false, 0},
		{"-2**2", -4, false, 0},
		{"0x10", 16, false, 0},
		{"0o17 + 0b11", 18, false, 0},
		{"1_000", 1000, false, 0},
		{"7 // 2", 3, false, 0},
		{"-7 // 2", -4, false, 0},
		{"7 // -2", -4, false, 0},
		{"-7 % 3", 2, false, 0},
		{"7 % -3", -2, false, 0},
		{"-7 // -2", 3, false, 0},
		{"-7 % -2", -1, false, 0},
		{"(1 + 2) * 3", 9, false, 0},
		{"1/4", 0, true, 0.25},
		{"2 ** -1", 0, true, 0.5},
		{"1.5e3", 1, true, 1500},
		{"7.5 // 2", 0, true, 3},
		{"-7.5 % 2", 0, true, 0.5},
		{"+5", 5, false, 0},
		{"--5", 5, false, 0},
		{"0", 0, false, 0},
		{"00", 0, false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			n, err := EvalArithmetic(tc.in)
			if err != nil {
				t.Fatalf("EvalArithmetic(%q): %v", tc.in, err)
			}
			if n.IsFloat != tc.isFloat {
				t.Fatalf("IsFloat = %v, want %v", n.IsFloat, tc.isFloat)
			}
			if tc.isFloat {
				if n.Float != tc.wantF {
					t.Fatalf("= %v, want %v", n.Float, tc.wantF)
				}
				return
			}
			got, err := n.ToInt()
			if err != nil || got != tc.wantInt {
				t.Fatalf("= %v (%v), want %d", got, err, tc.wantInt)
			}
		})
	}
}

func TestEvalArithmeticRejects(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "empty"},
		{"__import__('os')", "not allowed"},
		{"abc", "not allowed"},
		{"1 +", "ends early"},
		{"(1 + 2", "missing )"},
		{"1 2", "unexpected"},
		{"1 / 0", "division by zero"},
		{"1 // 0", "by zero"},
		{"5 % 0", "by zero"},
		{"2 ** 100000", "too large"},
		{"010", "leading zeros"},
		{"1__0", "not a number"},
		{"0xZZ", "not a number"},
		{"True", "not allowed"},
		{"1; 2", "not allowed"},
		{strings.Repeat("9", 4301), "exceeds the limit (4300 digits)"},
	}
	for _, tc := range tests {
		t.Run(clip(tc.in), func(t *testing.T) {
			_, err := EvalArithmetic(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("EvalArithmetic(%q) = %v, want error containing %q", tc.in, err, tc.want)
			}
		})
	}
}

func TestToIntRange(t *testing.T) {
	if _, err := EvalArithmetic(strings.Repeat("9", 4300)); err != nil {
		t.Fatalf("a 4300-digit literal (Python's limit) is a number: %v", err)
	}
	n, err := EvalArithmetic("2 ** 70")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.ToInt(); err == nil {
		t.Fatal("2**70 must not fit an int")
	}
	n, _ = EvalArithmetic("1e300 * 1e300")
	if _, err := n.ToInt(); err == nil {
		t.Fatal("inf must not convert to an int")
	}
}

func FuzzEvalArithmetic(f *testing.F) {
	for _, s := range []string{"60 * 1000 * 1000", "2**3", "0x10", "1/4", "(1+2)*-3 // 4 % 5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := EvalArithmetic(s)
		if err == nil {
			_, _ = n.ToInt()
			_ = n.ToFloat()
		}
	})
}
