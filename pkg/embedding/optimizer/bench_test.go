package optimizer

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkAdagradApply updates entries of a pool larger than the L1 cache, one Apply per entry, as
// the table does; it reports entries/s and values/s.
func BenchmarkAdagradApply(b *testing.B) {
	for _, dim := range []int{16, 64} {
		b.Run(fmt.Sprintf("dim=%d", dim), func(b *testing.B) {
			const entries = 4096
			o := mustNew(b, "adagrad { weight_decay_factor: 0.01 }", dim)
			rng := rand.New(rand.NewPCG(1, 1))
			slot := dim + o.StateSize()
			pool := make([]float32, entries*slot)
			for e := range entries {
				s := pool[e*slot : (e+1)*slot]
				copy(s, randomFloats(rng, dim))
				o.Init(s[dim:])
			}
			grad := randomFloats(rng, dim)
			lr := []float32{0.01}
			b.SetBytes(int64(slot * 4))
			b.ResetTimer()
			for i := range b.N {
				s := pool[(i%entries)*slot : (i%entries+1)*slot]
				o.Apply(s[:dim], s[dim:], grad, lr, 1)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
		})
	}
}
