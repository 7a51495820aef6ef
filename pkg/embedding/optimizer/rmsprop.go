package optimizer

import (
	"fmt"

	optimizerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/optimizer"
)

// rmsprop is the reference's RMSprop (v1) and RMSpropV2. State: n (dim floats, starting at 0).
// Per value, in double except where the reference stores to float32:
// dx = grad + weight_decay*w; v1: n = momentum*n + (1-momentum)*dx*dx, v2: n = momentum*n + dx*dx
// (n rounded to float32); eta = lr / (sqrt(n) + 1) (the sqrt and +1 in float32); w -= eta*dx.
// v1 takes lr from its config's learning_rate and ignores the per-step rate; v2 uses the per-step
// rate, as the reference does.
type rmsprop struct {
	v2          bool
	d           int
	configLR    float32
	weightDecay float32
	momentum    float32
}

func newRmsprop(c *optimizerpb.RmspropOptimizerConfig, d int) single {
	return &rmsprop{d: d, configLR: c.GetLearningRate(), weightDecay: c.GetWeightDecayFactor(), momentum: c.GetMomentum()}
}

func newRmspropV2(c *optimizerpb.RmspropV2OptimizerConfig, d int) single {
	return &rmsprop{v2: true, d: d, configLR: c.GetLearningRate(), weightDecay: c.GetWeightDecayFactor(), momentum: c.GetMomentum()}
}

func (o *rmsprop) dim() int         { return o.d }
func (o *rmsprop) stateSize() int   { return o.d }
func (o *rmsprop) init(n []float32) { clear(n) }

func (o *rmsprop) String() string {
	if o.v2 {
		return fmt.Sprintf("RmspropV2(D=%d)", o.d)
	}
	return fmt.Sprintf("Rmsprop(D=%d)", o.d)
}

func (o *rmsprop) apply(w, n, grad []float32, lr float32, _ int64) {
	mom := float64(o.momentum)
	rate := float64(o.configLR)
	if o.v2 {
		rate = float64(lr)
	}
	wd := float64(o.weightDecay)
	for i := range w {
		// float64(...) around each product keeps it from being fused into the sum.
		dx := float64(grad[i]) + float64(wd*float64(w[i]))
		var newN float32
		if o.v2 {
			newN = float32(float64(mom*float64(n[i])) + float64(dx*dx))
		} else {
			newN = float32(float64(mom*float64(n[i])) + float64((1-mom)*dx*dx))
		}
		eta := rate / float64(sqrt32(newN)+1)
		w[i] = float32(float64(w[i]) - float64(eta*dx))
		n[i] = newN
	}
}

func (o *rmsprop) save(n []float32) *optimizerpb.SingleOptimizerDump {
	vals := append([]float32(nil), n...)
	if o.v2 {
		return &optimizerpb.SingleOptimizerDump{Type: &optimizerpb.SingleOptimizerDump_Rmspropv2{
			Rmspropv2: &optimizerpb.RmspropV2OptimizerDump{N: vals}}}
	}
	return &optimizerpb.SingleOptimizerDump{Type: &optimizerpb.SingleOptimizerDump_Rmsprop{
		Rmsprop: &optimizerpb.RmspropOptimizerDump{N: vals}}}
}

func (o *rmsprop) restore(n []float32, d *optimizerpb.SingleOptimizerDump) error {
	var vals []float32
	name := "rmsprop"
	if o.v2 {
		name = "rmspropv2"
		r := d.GetRmspropv2()
		if r == nil {
			return wrongDump(name, d)
		}
		vals = r.N
	} else {
		r := d.GetRmsprop()
		if r == nil {
			return wrongDump(name, d)
		}
		vals = r.N
	}
	if err := checkLen(name+".n", len(vals), o.d); err != nil {
		return err
	}
	copy(n, vals)
	return nil
}
