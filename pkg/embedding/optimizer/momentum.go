package optimizer

import (
	"fmt"

	optimizerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/optimizer"
)

// momentum is SGD with momentum. State: n (dim floats, starting at 0). Per value:
// dx = lr * (grad + weight_decay*w); n' = momentum*n - dx; w += n', or under Nesterov
// w += -momentum*n + (1+momentum)*n'.
type momentum struct {
	d                     int
	weightDecay, momentum float32
	nesterov              bool
}

func newMomentum(c *optimizerpb.MomentumOptimizerConfig, d int) single {
	return &momentum{d: d, weightDecay: c.GetWeightDecayFactor(), momentum: c.GetMomentum(), nesterov: c.GetUseNesterov()}
}

func (o *momentum) dim() int         { return o.d }
func (o *momentum) stateSize() int   { return o.d }
func (o *momentum) String() string   { return fmt.Sprintf("Momentum(D=%d)", o.d) }
func (o *momentum) init(n []float32) { clear(n) }

func (o *momentum) apply(w, n, grad []float32, lr float32, _ int64) {
	onePlus := 1 + o.momentum
	for i := range w {
		dx := lr * (grad[i] + float32(o.weightDecay*w[i]))
		prev := n[i]
		newN := float32(o.momentum*prev) - dx
		if o.nesterov {
			w[i] += float32(-o.momentum*prev) + float32(onePlus*newN)
		} else {
			w[i] += newN
		}
		n[i] = newN
	}
}

func (o *momentum) save(n []float32) *optimizerpb.SingleOptimizerDump {
	return &optimizerpb.SingleOptimizerDump{Type: &optimizerpb.SingleOptimizerDump_Momentum{
		Momentum: &optimizerpb.MomentumOptimizerDump{N: append([]float32(nil), n...)}}}
}

func (o *momentum) restore(n []float32, d *optimizerpb.SingleOptimizerDump) error {
	m := d.GetMomentum()
	if m == nil {
		return wrongDump("momentum", d)
	}
	if err := checkLen("momentum.n", len(m.N), o.d); err != nil {
		return err
	}
	copy(n, m.N)
	return nil
}
