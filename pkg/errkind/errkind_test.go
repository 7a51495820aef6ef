package errkind

import (
	"errors"
	"fmt"
	"testing"
)

func TestOf(t *testing.T) {
	base := errors.New("boom")
	tests := []struct {
		name string
		err  error
		want Kind
	}{
		{"nil", nil, Unknown},
		{"plain", base, Unknown},
		{"new", New(Value, "bad %d", 1), Value},
		{"wrapped by fmt", fmt.Errorf("ctx: %w", New(Precondition, "x")), Precondition},
		{"outermost wins", Wrap(Runtime, New(Type, "inner")), Runtime},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Of(tc.err); got != tc.want {
				t.Fatalf("Of(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
	if Wrap(Value, nil) != nil {
		t.Fatal("Wrap(nil) must be nil")
	}
	if !errors.Is(Wrap(Value, base), base) {
		t.Fatal("Wrap must keep the chain")
	}
}

func TestParseRoundTrip(t *testing.T) {
	for k := Unknown; k <= Generic; k++ {
		got, err := Parse(k.String())
		if err != nil || got != k {
			t.Fatalf("Parse(%q) = %v, %v", k.String(), got, err)
		}
	}
	if _, err := Parse("Nope"); err == nil {
		t.Fatal("Parse of an unknown name must fail")
	}
}
