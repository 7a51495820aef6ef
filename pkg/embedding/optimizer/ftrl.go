package optimizer

import (
	"fmt"
	"math"

	optimizerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/optimizer"
)

// ftrl is FTRL-proximal (McMahan et al., "Ad Click Prediction"), as the reference writes it. State:
// norm (dim floats, starting at initial_accumulator_value) then zero (dim floats, starting at 0).
//
// Per value: norm' = norm + g*g; sigma = (sqrt(norm') - sqrt(norm)) / lr; z += g - sigma*w;
// w = |z| > l1 ? lr * (signbit(z)*l1 - z) / (sqrt(norm') + beta + l2*lr) : 0. The reference's
// numerator subtracts l1 only for a negative z (signbit is 0 or 1, not the sign), and this keeps it.
type ftrl struct {
	d                  int
	initialAccum, beta float32
	l1, l2             float32
}

func newFtrl(c *optimizerpb.FtrlOptimizerConfig, d int) single {
	return &ftrl{d: d, initialAccum: c.GetInitialAccumulatorValue(), beta: c.GetBeta(),
		l1: c.GetL1RegularizationStrength(), l2: c.GetL2RegularizationStrength()}
}

func (o *ftrl) dim() int       { return o.d }
func (o *ftrl) stateSize() int { return 2 * o.d }
func (o *ftrl) String() string { return fmt.Sprintf("Ftrl(D=%d)", o.d) }

func (o *ftrl) init(state []float32) {
	norm, zero := state[:o.d], state[o.d:]
	for i := range norm {
		norm[i] = o.initialAccum
		zero[i] = 0
	}
}

func (o *ftrl) apply(w, state, grad []float32, lr float32, _ int64) {
	norm, zero := state[:o.d], state[o.d:2*o.d]
	l2lr := o.l2 * lr
	for i := range w {
		g := grad[i]
		normNew := norm[i] + float32(g*g)
		sigma := (sqrt32(normNew) - sqrt32(norm[i])) / lr
		zero[i] += g - float32(sigma*w[i])
		norm[i] = normNew
		z := zero[i]
		if float32(math.Abs(float64(z))) > o.l1 {
			var signbit float32
			if math.Signbit(float64(z)) {
				signbit = 1
			}
			num := float32(lr * (float32(signbit*o.l1) - z))
			w[i] = num / ((sqrt32(norm[i]) + o.beta) + l2lr)
		} else {
			w[i] = 0
		}
	}
}

func (o *ftrl) save(state []float32) *optimizerpb.SingleOptimizerDump {
	return &optimizerpb.SingleOptimizerDump{Type: &optimizerpb.SingleOptimizerDump_Ftrl{Ftrl: &optimizerpb.FtrlOptimizerDump{
		Norm: append([]float32(nil), state[:o.d]...),
		Zero: append([]float32(nil), state[o.d:2*o.d]...),
	}}}
}

func (o *ftrl) restore(state []float32, d *optimizerpb.SingleOptimizerDump) error {
	f := d.GetFtrl()
	if f == nil {
		return wrongDump("ftrl", d)
	}
	if err := checkLen("ftrl.norm", len(f.Norm), o.d); err != nil {
		return err
	}
	if err := checkLen("ftrl.zero", len(f.Zero), o.d); err != nil {
		return err
	}
	copy(state[:o.d], f.Norm)
	copy(state[o.d:], f.Zero)
	return nil
}
