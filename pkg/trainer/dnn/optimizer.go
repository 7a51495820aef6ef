package dnn

import "math"

// Optimizer names the update rule of the dense parameters.
type Optimizer string

// The dense optimizers.
const (
	// Adam is tf.compat.v1.train.AdamOptimizer: m and v moving averages, the learning rate
	// scaled by sqrt(1-beta2^t)/(1-beta1^t), epsilon added to sqrt(v).
	Adam Optimizer = "adam"
	// Adagrad is tf.compat.v1.train.AdagradOptimizer: accumulated squared gradients, starting
	// at InitialAccumulator.
	Adagrad Optimizer = "adagrad"
)

// denseOptimizer updates the dense parameters in place and keeps its slots (named as TensorFlow's
// slot variables, for checkpoints).
type denseOptimizer struct {
	kind              Optimizer
	lr                float64
	beta1, beta2, eps float64
	// slots[k][p] is slot k of parameter p (Adam: m and v; Adagrad: the accumulator), named by
	// the parameter and slotSuffixes[k].
	slots        [][][]float64
	slotSuffixes []string
	// beta1Pow and beta2Pow are Adam's beta1^(t+1) and beta2^(t+1) after t steps (TensorFlow's
	// beta1_power and beta2_power variables).
	beta1Pow, beta2Pow float64
}

func newDenseOptimizer(cfg Config, params []param) *denseOptimizer {
	o := &denseOptimizer{kind: cfg.Optimizer, lr: cfg.LearningRate, beta1: cfg.Beta1, beta2: cfg.Beta2, eps: cfg.Epsilon}
	var initial []float64
	switch cfg.Optimizer {
	case Adam:
		o.slotSuffixes, initial = []string{"/Adam", "/Adam_1"}, []float64{0, 0}
		o.beta1Pow, o.beta2Pow = cfg.Beta1, cfg.Beta2
	case Adagrad:
		o.slotSuffixes, initial = []string{"/Adagrad"}, []float64{cfg.InitialAccumulator}
	}
	o.slots = make([][][]float64, len(o.slotSuffixes))
	for k, init := range initial {
		o.slots[k] = make([][]float64, len(params))
		for p, pa := range params {
			s := make([]float64, len(pa.value))
			for i := range s {
				s[i] = init
			}
			o.slots[k][p] = s
		}
	}
	return o
}

// apply updates every parameter by its gradient.
func (o *denseOptimizer) apply(params []param) {
	switch o.kind {
	case Adam:
		lr := o.lr * math.Sqrt(1-o.beta2Pow) / (1 - o.beta1Pow)
		for p, pa := range params {
			m, v := o.slots[0][p], o.slots[1][p]
			for i, g := range pa.grad {
				m[i] = o.beta1*m[i] + (1-o.beta1)*g
				v[i] = o.beta2*v[i] + (1-o.beta2)*g*g
				pa.value[i] -= lr * m[i] / (math.Sqrt(v[i]) + o.eps)
			}
		}
		o.beta1Pow *= o.beta1
		o.beta2Pow *= o.beta2
	case Adagrad:
		for p, pa := range params {
			acc := o.slots[0][p]
			for i, g := range pa.grad {
				acc[i] += g * g
				pa.value[i] -= o.lr * g / math.Sqrt(acc[i])
			}
		}
	}
}
