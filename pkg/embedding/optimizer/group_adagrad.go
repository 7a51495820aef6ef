package optimizer

import (
	"fmt"

	optimizerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/optimizer"
)

// groupAdagrad is the reference's group-lasso Adagrad: one accumulator per entry. State:
// grad_square_sum (one float, starting at initial_accumulator_value). Per step, with
// g = grad + weight_decay*w: grad_square_sum += max(g_i^2); lr' = lr / (beta + sqrt(grad_square_sum));
// z_i = g_i - w_i/lr'; w = 0 if |z| < l2, else w = -lr' * (|z| - l2) / |z| * z.
type groupAdagrad struct {
	d                  int
	initialAccum, beta float32
	l2, weightDecay    float32
}

func newGroupAdagrad(c *optimizerpb.GroupAdaGradOptimizerConfig, d int) single {
	return &groupAdagrad{d: d, initialAccum: c.GetInitialAccumulatorValue(), beta: c.GetBeta(),
		l2: c.GetL2RegularizationStrength(), weightDecay: c.GetWeightDecayFactor()}
}

func (o *groupAdagrad) dim() int             { return o.d }
func (o *groupAdagrad) stateSize() int       { return 1 }
func (o *groupAdagrad) String() string       { return fmt.Sprintf("GroupAdaGrad(D=%d)", o.d) }
func (o *groupAdagrad) init(state []float32) { state[0] = o.initialAccum }

func (o *groupAdagrad) apply(w, state, grad []float32, lr float32, _ int64) {
	// The decayed gradient is computed twice (for its maximum, then for z) rather than kept in a
	// vector as the reference does: the values are the same and Apply allocates nothing.
	var maxSq float32
	for i := range w {
		g := grad[i] + float32(o.weightDecay*w[i])
		if sq := g * g; sq > maxSq {
			maxSq = sq
		}
	}
	state[0] += maxSq
	lrT := lr / (o.beta + sqrt32(state[0]))
	var zNorm float32
	for i := range w {
		g := grad[i] + float32(o.weightDecay*w[i])
		w[i] = g - w[i]/lrT
		zNorm += float32(w[i] * w[i])
	}
	zNorm = sqrt32(zNorm)
	if zNorm < o.l2 {
		clear(w)
		return
	}
	coef := float32(-lrT*(zNorm-o.l2)) / zNorm
	for i := range w {
		w[i] = coef * w[i]
	}
}

func (o *groupAdagrad) save(state []float32) *optimizerpb.SingleOptimizerDump {
	s := state[0]
	return &optimizerpb.SingleOptimizerDump{Type: &optimizerpb.SingleOptimizerDump_GroupAdagrad{
		GroupAdagrad: &optimizerpb.GroupAdaGradOptimizerDump{GradSquareSum: &s}}}
}

func (o *groupAdagrad) restore(state []float32, d *optimizerpb.SingleOptimizerDump) error {
	g := d.GetGroupAdagrad()
	if g == nil {
		return wrongDump("group_adagrad", d)
	}
	state[0] = g.GetGradSquareSum()
	return nil
}
