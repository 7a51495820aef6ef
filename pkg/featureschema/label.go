package featureschema

import (
	"fmt"
	"strconv"
	"strings"
)

// Apply turns a raw label value into the 0 or 1 the model learns: with a threshold, 1 when v >=
// threshold; with positive values, 1 when v is one of them; with neither, v itself, which must be
// 0 or 1. NaN and infinities are errors under every rule.
func (l Label) Apply(v float64) (float32, error) {
	if !finite(v) {
		return 0, fmt.Errorf("label %s is not a finite number", fmtFloat(v))
	}
	switch {
	case l.Threshold != nil:
		return b2f(v >= *l.Threshold), nil
	case l.Positive != nil:
		pos := l.positive
		if len(pos) != len(l.Positive) {
			var err error
			if pos, _, err = l.positiveValues(); err != nil {
				return 0, fmt.Errorf("label.positive: %w", err)
			}
		}
		for _, p := range pos {
			if v == p {
				return 1, nil
			}
		}
		return 0, nil
	case v == 0 || v == 1:
		return float32(v), nil
	}
	return 0, fmt.Errorf("label %s is neither 0 nor 1 (a schema's label.threshold or label.positive maps other values to 0/1)", fmtFloat(v))
}

// Rule describes how Apply maps values, for people: "value is 0 or 1", "1 if value >= 4, else 0".
func (l Label) Rule() string {
	switch {
	case l.Threshold != nil:
		return fmt.Sprintf("1 if value >= %s, else 0", fmtFloat(*l.Threshold))
	case l.Positive != nil:
		return fmt.Sprintf("1 if value is one of %s, else 0", strings.Join(l.Positive, ", "))
	}
	return "value is 0 or 1"
}

// positiveValues parses the positive values as numbers; an error names the index of the first
// that is not one.
func (l Label) positiveValues() ([]float64, int, error) {
	out := make([]float64, len(l.Positive))
	for i, s := range l.Positive {
		x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || !finite(x) {
			return nil, i, fmt.Errorf("%q is not a finite number", s)
		}
		out[i] = x
	}
	return out, 0, nil
}

func b2f(b bool) float32 {
	if b {
		return 1
	}
	return 0
}
