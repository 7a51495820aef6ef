package optimizer

import (
	"fmt"
	"math"

	optimizerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/optimizer"
)

// adam (Kingma & Ba) and, with amsgrad set, AMSGrad (Reddi et al.): the reference's two optimizers
// share one formula. State: m, v (and vhat for AMSGrad), dim floats each starting at 0, then
// beta1_power and beta2_power starting at beta1 and beta2.
//
// Per step: lr_t = lr * sqrt(1 - beta2_power) / (1 - beta1_power); per value, with
// g = grad + weight_decay*w: m' = m + (g - m)*(1-beta1); v' = v + (g*g - v)*(1-beta2);
// vhat' = max(vhat, v') (AMSGrad; Adam uses v'); w -= step*lr_t / (sqrt(vhat') + epsilon) with
// step = m', or g*(1-beta1) + beta1*m' under Nesterov. Then beta1_power *= beta1, beta2_power *= beta2.
//
// The reference calls the double sqrt: lr_t and the weight's update are computed in double and
// rounded to float32 on assignment; everything else is float32.
type adam struct {
	name         string
	amsgrad      bool
	d            int
	beta1, beta2 float32
	weightDecay  float32
	nesterov     bool
	epsilon      float32
}

func newAdam(c *optimizerpb.AdamOptimizerConfig, d int) single {
	return &adam{name: "Adam", d: d, beta1: c.GetBeta1(), beta2: c.GetBeta2(), weightDecay: c.GetWeightDecayFactor(),
		nesterov: c.GetUseNesterov(), epsilon: c.GetEpsilon()}
}

func newAmsgrad(c *optimizerpb.AmsgradOptimizerConfig, d int) single {
	return &adam{name: "Amsgrad", amsgrad: true, d: d, beta1: c.GetBeta1(), beta2: c.GetBeta2(),
		weightDecay: c.GetWeightDecayFactor(), nesterov: c.GetUseNesterov(), epsilon: c.GetEpsilon()}
}

func (o *adam) dim() int { return o.d }

// vectors is the number of dim-float vectors of state: m, v (, vhat).
func (o *adam) vectors() int {
	if o.amsgrad {
		return 3
	}
	return 2
}

func (o *adam) stateSize() int { return o.vectors()*o.d + 2 }
func (o *adam) String() string { return fmt.Sprintf("%s(D=%d)", o.name, o.d) }

func (o *adam) init(state []float32) {
	n := o.vectors() * o.d
	clear(state[:n])
	state[n], state[n+1] = o.beta1, o.beta2
}

func (o *adam) apply(w, state, grad []float32, lr float32, _ int64) {
	d := o.d
	m, v := state[:d], state[d:2*d]
	vhat := v
	if o.amsgrad {
		vhat = state[2*d : 3*d]
	}
	powers := state[o.vectors()*d:]
	beta1Power, beta2Power := powers[0], powers[1]
	lrT := float32(float64(lr) * math.Sqrt(float64(1-beta2Power)) / float64(1-beta1Power))
	keep1, keep2 := 1-o.beta1, 1-o.beta2
	for i := range w {
		g := grad[i] + float32(o.weightDecay*w[i])
		newM := m[i] + float32((g-m[i])*keep1)
		newV := v[i] + float32((float32(g*g)-v[i])*keep2)
		newVhat := newV
		if o.amsgrad && !(vhat[i] < newV) {
			newVhat = vhat[i] // std::max(vhat, v'): the first unless it is less
		}
		step := newM
		if o.nesterov {
			step = float32(g*keep1) + float32(o.beta1*newM)
		}
		w[i] = float32(float64(w[i]) - float64(float32(step*lrT))/(math.Sqrt(float64(newVhat))+float64(o.epsilon)))
		m[i], v[i] = newM, newV
		if o.amsgrad {
			vhat[i] = newVhat
		}
	}
	powers[0] = beta1Power * o.beta1
	powers[1] = beta2Power * o.beta2
}

func (o *adam) save(state []float32) *optimizerpb.SingleOptimizerDump {
	d := o.d
	n := o.vectors() * d
	m := append([]float32(nil), state[:d]...)
	v := append([]float32(nil), state[d:2*d]...)
	b1, b2 := state[n], state[n+1]
	if o.amsgrad {
		return &optimizerpb.SingleOptimizerDump{Type: &optimizerpb.SingleOptimizerDump_Amsgrad{Amsgrad: &optimizerpb.AmsgradOptimizerDump{
			M: m, V: v, Vhat: append([]float32(nil), state[2*d:3*d]...), Beta1Power: &b1, Beta2Power: &b2}}}
	}
	return &optimizerpb.SingleOptimizerDump{Type: &optimizerpb.SingleOptimizerDump_Adam{Adam: &optimizerpb.AdamOptimizerDump{
		M: m, V: v, Beta1Power: &b1, Beta2Power: &b2}}}
}

// restore sets both powers. The reference's Adam restore writes beta2_power over beta1_power's
// slot and leaves beta2_power as it was (a reference bug); AMSGrad's restores both, as this does.
func (o *adam) restore(state []float32, d *optimizerpb.SingleOptimizerDump) error {
	var (
		prefix     string
		m, v, vhat []float32
		b1, b2     *float32
	)
	if o.amsgrad {
		a := d.GetAmsgrad()
		if a == nil {
			return wrongDump("amsgrad", d)
		}
		prefix, m, v, vhat, b1, b2 = "amsgrad", a.M, a.V, a.Vhat, a.Beta1Power, a.Beta2Power
	} else {
		a := d.GetAdam()
		if a == nil {
			return wrongDump("adam", d)
		}
		prefix, m, v, b1, b2 = "adam", a.M, a.V, a.Beta1Power, a.Beta2Power
	}
	n := o.d
	if err := checkLen(prefix+".m", len(m), n); err != nil {
		return err
	}
	if err := checkLen(prefix+".v", len(v), n); err != nil {
		return err
	}
	copy(state[:n], m)
	copy(state[n:2*n], v)
	if o.amsgrad {
		if err := checkLen(prefix+".vhat", len(vhat), n); err != nil {
			return err
		}
		copy(state[2*n:3*n], vhat)
	}
	// An unset power reads as 0, as the reference's proto getter returns.
	k := o.vectors() * n
	state[k], state[k+1] = valueOr0(b1), valueOr0(b2)
	return nil
}

func valueOr0(p *float32) float32 {
	if p == nil {
		return 0
	}
	return *p
}
