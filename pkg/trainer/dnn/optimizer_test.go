package dnn

import (
	"math"
	"testing"
)

// The dense optimizers' updates over several steps match the textbook formulas computed here:
// Adam with bias-corrected moments (Kingma and Ba; TensorFlow's epsilon is the paper's epsilon
// times sqrt(1-beta2^t)) and Adagrad from the initial accumulator.
func TestDenseOptimizers(t *testing.T) {
	grads := [][]float64{{0.5, -1, 0}, {0.25, 2, -0.1}, {-0.75, 0.5, 0.3}, {1, 1, 1}}
	start := []float64{0.1, -0.2, 0.3}
	tests := []struct {
		name string
		cfg  Config
		want func() []float64
	}{
		{"adam", Config{Optimizer: Adam, LearningRate: 0.01, Beta1: 0.8, Beta2: 0.95, Epsilon: 1e-3}, func() []float64 {
			x, m, v := append([]float64(nil), start...), make([]float64, 3), make([]float64, 3)
			for step, g := range grads {
				t := float64(step + 1)
				for i := range x {
					m[i] = 0.8*m[i] + 0.2*g[i]
					v[i] = 0.95*v[i] + 0.05*g[i]*g[i]
					mHat, vHat := m[i]/(1-math.Pow(0.8, t)), v[i]/(1-math.Pow(0.95, t))
					x[i] -= 0.01 * mHat / (math.Sqrt(vHat) + 1e-3/math.Sqrt(1-math.Pow(0.95, t)))
				}
			}
			return x
		}},
		{"adagrad", Config{Optimizer: Adagrad, LearningRate: 0.1, InitialAccumulator: 0.2}, func() []float64 {
			x := append([]float64(nil), start...)
			for i := range x {
				acc := 0.2
				for _, g := range grads {
					acc += g[i] * g[i]
					x[i] -= 0.1 * g[i] / math.Sqrt(acc)
				}
			}
			return x
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Features = []Feature{{Name: "a", Slot: 1, Dim: 1}}
			cfg = cfg.withDefaults()
			p := param{name: "p", shape: []int64{3}, value: append([]float64(nil), start...), grad: make([]float64, 3)}
			o := newDenseOptimizer(cfg, []param{p})
			for _, g := range grads {
				copy(p.grad, g)
				o.apply([]param{p})
			}
			want := tc.want()
			for i := range want {
				if math.Abs(p.value[i]-want[i]) > 1e-12 {
					t.Errorf("value %d = %v after %d steps, want %v", i, p.value[i], len(grads), want[i])
				}
			}
		})
	}
}
