package auc

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkUpdate: one host call's worth of sampled examples (1024) into the 200-threshold metric.
func BenchmarkUpdate(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	labels, preds := make([]float32, 1024), make([]float32, 1024)
	for i := range labels {
		labels[i] = float32(rng.IntN(2))
		preds[i] = rng.Float32()
	}
	a, _ := New(DefaultThresholds)
	b.ReportAllocs()
	for b.Loop() {
		if err := a.Update(labels, preds); err != nil {
			b.Fatal(err)
		}
	}
}
