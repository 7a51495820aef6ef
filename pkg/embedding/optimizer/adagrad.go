package optimizer

import (
	"fmt"

	optimizerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/optimizer"
)

// adagrad: norm += g*g; w -= lr / sqrt(norm) * g, with g = grad + weight_decay * w. State: norm.
//
// The reference runs its AVX2 kernel (avx_utils.h, Avx256AdagradOptimize) on each full block of 8
// values and the scalar loop on the rest, and the two differ: the AVX block computes the decayed
// gradient and the accumulator with fused multiply-adds and updates the weight with the raw
// gradient (one fused w - lr/sqrt(norm)*grad), while the scalar loop rounds every operation and
// uses the decayed gradient for both. Both are reproduced so that values match bit for bit.
type adagrad struct {
	d            int
	initialAccum float32
	weightDecay  float32
}

func newAdagrad(c *optimizerpb.AdagradOptimizerConfig, d int) single {
	return &adagrad{d: d, initialAccum: c.GetInitialAccumulatorValue(), weightDecay: c.GetWeightDecayFactor()}
}

func (o *adagrad) dim() int       { return o.d }
func (o *adagrad) stateSize() int { return o.d }
func (o *adagrad) String() string { return fmt.Sprintf("Adagrad(D=%d)", o.d) }

func (o *adagrad) init(norm []float32) {
	for i := range norm {
		norm[i] = o.initialAccum
	}
}

func (o *adagrad) apply(emb, norm, grad []float32, lr float32, _ int64) {
	adagradBlocks(emb, norm, grad, lr, o.weightDecay)
}

// adagradBlocks is the reference's AdagradOptimize (AVX build): full blocks of 8 as the AVX
// kernel computes them (on amd64 with AVX and FMA, by the same instructions in
// adagrad_amd64.s; elsewhere in Go with fma32), then the scalar loop.
func adagradBlocks(w, norm, grad []float32, lr, wd float32) {
	n := len(w) &^ 7
	norm, grad = norm[:len(w)], grad[:len(w)]
	if adagradBlocksFast(w, norm, grad, n, lr, wd) {
		adagradTail(w[n:], norm[n:], grad[n:], lr, wd)
		return
	}
	for i := 0; i < n; i++ {
		g := fma32(wd, w[i], grad[i])
		nn := fma32(g, g, norm[i])
		norm[i] = nn
		eff := lr / sqrt32(nn)
		w[i] = fma32(-eff, grad[i], w[i])
	}
	adagradTail(w[n:], norm[n:], grad[n:], lr, wd)
}

// adagradTail is the reference's scalar loop (BaselineAdagradOptimize).
func adagradTail(w, norm, grad []float32, lr, wd float32) {
	for i := range w {
		g := grad[i] + float32(wd*w[i])
		norm[i] += float32(g * g)
		eff := lr / sqrt32(norm[i])
		w[i] -= float32(eff * g)
	}
}

func (o *adagrad) save(norm []float32) *optimizerpb.SingleOptimizerDump {
	return &optimizerpb.SingleOptimizerDump{Type: &optimizerpb.SingleOptimizerDump_Adagrad{
		Adagrad: &optimizerpb.AdagradOptimizerDump{Norm: append([]float32(nil), norm...)}}}
}

func (o *adagrad) restore(norm []float32, d *optimizerpb.SingleOptimizerDump) error {
	a := d.GetAdagrad()
	if a == nil {
		return wrongDump("adagrad", d)
	}
	if err := checkLen("adagrad.norm", len(a.Norm), o.d); err != nil {
		return err
	}
	copy(norm, a.Norm)
	return nil
}
