package optimizer

import (
	"fmt"

	optimizerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/optimizer"
)

// adadelta (Zeiler 2012) with rho = averaging_ratio. State: accum then accum_update (dim floats
// each, starting at 0). Per value, with g = grad + weight_decay*w:
// accum' = accum*rho + g*g*(1-rho); update = sqrt(accum_update+eps) / sqrt(accum'+eps) * g;
// w -= update*lr; accum_update' = accum_update*rho + update*update*(1-rho).
type adadelta struct {
	d                int
	weightDecay, rho float32
	epsilon          float32
}

func newAdadelta(c *optimizerpb.AdadeltaOptimizerConfig, d int) single {
	return &adadelta{d: d, weightDecay: c.GetWeightDecayFactor(), rho: c.GetAveragingRatio(), epsilon: c.GetEpsilon()}
}

func (o *adadelta) dim() int       { return o.d }
func (o *adadelta) stateSize() int { return 2 * o.d }
func (o *adadelta) String() string { return fmt.Sprintf("Adadelta(D=%d)", o.d) }

func (o *adadelta) init(state []float32) { clear(state) }

func (o *adadelta) apply(w, state, grad []float32, lr float32, _ int64) {
	accum, accumUpdate := state[:o.d], state[o.d:2*o.d]
	keep := 1 - o.rho
	for i := range w {
		g := grad[i] + float32(o.weightDecay*w[i])
		newAccum := float32(accum[i]*o.rho) + float32(float32(g*g)*keep)
		update := float32(sqrt32(accumUpdate[i]+o.epsilon)/sqrt32(newAccum+o.epsilon)) * g
		w[i] -= float32(update * lr)
		accumUpdate[i] = float32(accumUpdate[i]*o.rho) + float32(float32(update*update)*keep)
		accum[i] = newAccum
	}
}

func (o *adadelta) save(state []float32) *optimizerpb.SingleOptimizerDump {
	return &optimizerpb.SingleOptimizerDump{Type: &optimizerpb.SingleOptimizerDump_Adadelta{Adadelta: &optimizerpb.AdadeltaOptimizerDump{
		Accum:       append([]float32(nil), state[:o.d]...),
		AccumUpdate: append([]float32(nil), state[o.d:2*o.d]...),
	}}}
}

func (o *adadelta) restore(state []float32, d *optimizerpb.SingleOptimizerDump) error {
	a := d.GetAdadelta()
	if a == nil {
		return wrongDump("adadelta", d)
	}
	if err := checkLen("adadelta.accum", len(a.Accum), o.d); err != nil {
		return err
	}
	if err := checkLen("adadelta.accum_update", len(a.AccumUpdate), o.d); err != nil {
		return err
	}
	copy(state[:o.d], a.Accum)
	copy(state[o.d:], a.AccumUpdate)
	return nil
}
