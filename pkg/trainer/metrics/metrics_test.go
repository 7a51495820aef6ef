package metrics

import (
	"math"
	"strings"
	"testing"
)

func TestLogLoss(t *testing.T) {
	tests := []struct {
		name          string
		labels, preds []float32
		want          float64
	}{
		{"certain and right", []float32{1, 0}, []float32{1, 0}, -math.Log(1 - LogLossEpsilon)},
		{"coin", []float32{1, 0, 1}, []float32{0.5, 0.5, 0.5}, math.Log(2)},
		{"mixed", []float32{1, 0}, []float32{0.8, 0.4}, (-math.Log(0.8) - math.Log(0.6)) / 2},
		{"certain and wrong is clipped", []float32{1}, []float32{0}, -math.Log(LogLossEpsilon)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var l LogLoss
			// Two updates of halves give the mean over all examples.
			h := len(tc.labels) / 2
			if err := l.Update(tc.labels[:h], tc.preds[:h]); err != nil {
				t.Fatal(err)
			}
			if err := l.Update(tc.labels[h:], tc.preds[h:]); err != nil {
				t.Fatal(err)
			}
			if got := l.Value(); math.Abs(got-tc.want) > 1e-6 {
				t.Errorf("log loss %v, want %v", got, tc.want)
			}
		})
	}
	var l LogLoss
	if l.Value() != 0 {
		t.Errorf("empty log loss %v", l.Value())
	}
	if err := l.Update([]float32{1}, nil); err == nil || !strings.Contains(err.Error(), "1 labels for 0 predictions") {
		t.Errorf("mismatched lengths: %v", err)
	}
}

func TestAUC(t *testing.T) {
	tests := []struct {
		name          string
		labels, preds []float32
		want          float64
	}{
		{"perfect", []float32{0, 0, 1, 1}, []float32{0.1, 0.2, 0.8, 0.9}, 1},
		{"reversed", []float32{1, 1, 0, 0}, []float32{0.1, 0.2, 0.8, 0.9}, 0},
		{"three of four pairs ordered", []float32{0, 1, 0, 1}, []float32{0.1, 0.3, 0.6, 0.8}, 0.75},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAUC()
			if err := a.Update(tc.labels, tc.preds); err != nil {
				t.Fatal(err)
			}
			if got := a.Value(); math.Abs(got-tc.want) > 0.01 {
				t.Errorf("AUC %v, want %v", got, tc.want)
			}
		})
	}
	if err := NewAUC().Update([]float32{1}, []float32{1.5}); err == nil {
		t.Error("a prediction above 1 accepted")
	}
}
