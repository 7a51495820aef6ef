package optimizer

import (
	"math"

	optimizerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/optimizer"
)

// refOptimizer is a straightforward float64 implementation of one reference formula, written from
// the C++ sources independently of the float32 code under test: it keeps its own state and
// applies one step to w.
type refOptimizer func(w, grad []float64, lr float64, step int64)

// newRef returns the float64 reference of cfg's optimizer for embeddings of dim values.
func newRef(cfg *optimizerpb.OptimizerConfig, dim int) refOptimizer {
	f := func(v float32) float64 { return float64(v) }
	switch t := cfg.Type.(type) {
	case *optimizerpb.OptimizerConfig_Sgd:
		return func(w, g []float64, lr float64, _ int64) {
			for i := range w {
				w[i] -= lr * g[i]
			}
		}
	case *optimizerpb.OptimizerConfig_Adagrad:
		c := t.Adagrad
		norm := filled(dim, f(c.GetInitialAccumulatorValue()))
		wd := f(c.GetWeightDecayFactor())
		return func(w, g []float64, lr float64, _ int64) {
			for i := range w {
				gd := g[i] + wd*w[i]
				norm[i] += gd * gd
				// The AVX kernel (full blocks of 8) moves the weight along the raw gradient.
				step := gd
				if i < dim/8*8 {
					step = g[i]
				}
				w[i] -= lr / math.Sqrt(norm[i]) * step
			}
		}
	case *optimizerpb.OptimizerConfig_Ftrl:
		c := t.Ftrl
		norm, z := filled(dim, f(c.GetInitialAccumulatorValue())), make([]float64, dim)
		l1, l2, beta := f(c.GetL1RegularizationStrength()), f(c.GetL2RegularizationStrength()), f(c.GetBeta())
		return func(w, g []float64, lr float64, _ int64) {
			for i := range w {
				n := norm[i] + g[i]*g[i]
				sigma := (math.Sqrt(n) - math.Sqrt(norm[i])) / lr
				z[i] += g[i] - sigma*w[i]
				norm[i] = n
				if math.Abs(z[i]) <= l1 {
					w[i] = 0
					continue
				}
				s := 0.0
				if z[i] < 0 {
					s = 1 // the reference's signbit, not the sign
				}
				w[i] = lr * (s*l1 - z[i]) / (math.Sqrt(n) + beta + l2*lr)
			}
		}
	case *optimizerpb.OptimizerConfig_Adam:
		c := t.Adam
		return refAdam(dim, false, f(c.GetBeta1()), f(c.GetBeta2()), f(c.GetWeightDecayFactor()), f(c.GetEpsilon()), c.GetUseNesterov())
	case *optimizerpb.OptimizerConfig_Amsgrad:
		c := t.Amsgrad
		return refAdam(dim, true, f(c.GetBeta1()), f(c.GetBeta2()), f(c.GetWeightDecayFactor()), f(c.GetEpsilon()), c.GetUseNesterov())
	case *optimizerpb.OptimizerConfig_Momentum:
		c := t.Momentum
		n := make([]float64, dim)
		mu, wd := f(c.GetMomentum()), f(c.GetWeightDecayFactor())
		return func(w, g []float64, lr float64, _ int64) {
			for i := range w {
				dx := lr * (g[i] + wd*w[i])
				prev := n[i]
				n[i] = mu*prev - dx
				if c.GetUseNesterov() {
					w[i] += -mu*prev + (1+mu)*n[i]
				} else {
					w[i] += n[i]
				}
			}
		}
	case *optimizerpb.OptimizerConfig_Rmsprop:
		c := t.Rmsprop
		return refRmsprop(dim, false, f(c.GetLearningRate()), f(c.GetMomentum()), f(c.GetWeightDecayFactor()))
	case *optimizerpb.OptimizerConfig_Rmspropv2:
		c := t.Rmspropv2
		return refRmsprop(dim, true, 0, f(c.GetMomentum()), f(c.GetWeightDecayFactor()))
	case *optimizerpb.OptimizerConfig_Adadelta:
		c := t.Adadelta
		acc, accUpd := make([]float64, dim), make([]float64, dim)
		rho, eps, wd := f(c.GetAveragingRatio()), f(c.GetEpsilon()), f(c.GetWeightDecayFactor())
		return func(w, g []float64, lr float64, _ int64) {
			for i := range w {
				gd := g[i] + wd*w[i]
				acc[i] = rho*acc[i] + (1-rho)*gd*gd
				upd := math.Sqrt(accUpd[i]+eps) / math.Sqrt(acc[i]+eps) * gd
				w[i] -= upd * lr
				accUpd[i] = rho*accUpd[i] + (1-rho)*upd*upd
			}
		}
	case *optimizerpb.OptimizerConfig_GroupAdagrad:
		c := t.GroupAdagrad
		sum := f(c.GetInitialAccumulatorValue())
		beta, l2, wd := f(c.GetBeta()), f(c.GetL2RegularizationStrength()), f(c.GetWeightDecayFactor())
		return func(w, g []float64, lr float64, _ int64) {
			gd := make([]float64, dim)
			maxSq := 0.0
			for i := range w {
				gd[i] = g[i] + wd*w[i]
				maxSq = math.Max(maxSq, gd[i]*gd[i])
			}
			sum += maxSq
			rate := lr / (beta + math.Sqrt(sum))
			z := make([]float64, dim)
			norm := 0.0
			for i := range w {
				z[i] = gd[i] - w[i]/rate
				norm += z[i] * z[i]
			}
			norm = math.Sqrt(norm)
			for i := range w {
				if norm < l2 {
					w[i] = 0
				} else {
					w[i] = -rate * (norm - l2) / norm * z[i]
				}
			}
		}
	case *optimizerpb.OptimizerConfig_BatchSoftmax:
		var last int64
		return func(w, _ []float64, alpha float64, step int64) {
			w[0] = (1-alpha)*w[0] + alpha*float64(step-last)
			last = step
		}
	case *optimizerpb.OptimizerConfig_MovingAverage:
		mu := f(t.MovingAverage.GetMomentum())
		return func(w, g []float64, _ float64, _ int64) {
			for i := range w {
				w[i] = mu*w[i] + (1-mu)*g[i]
			}
		}
	}
	panic("no float64 reference for this config")
}

func refAdam(dim int, amsgrad bool, beta1, beta2, wd, eps float64, nesterov bool) refOptimizer {
	m, v, vhat := make([]float64, dim), make([]float64, dim), make([]float64, dim)
	p1, p2 := beta1, beta2
	return func(w, g []float64, lr float64, _ int64) {
		rate := lr * math.Sqrt(1-p2) / (1 - p1)
		for i := range w {
			gd := g[i] + wd*w[i]
			m[i] += (gd - m[i]) * (1 - beta1)
			v[i] += (gd*gd - v[i]) * (1 - beta2)
			denom := v[i]
			if amsgrad {
				vhat[i] = math.Max(vhat[i], v[i])
				denom = vhat[i]
			}
			step := m[i]
			if nesterov {
				step = gd*(1-beta1) + beta1*m[i]
			}
			w[i] -= step * rate / (math.Sqrt(denom) + eps)
		}
		p1 *= beta1
		p2 *= beta2
	}
}

func refRmsprop(dim int, v2 bool, configLR, mu, wd float64) refOptimizer {
	n := make([]float64, dim)
	return func(w, g []float64, lr float64, _ int64) {
		if !v2 {
			lr = configLR
		}
		for i := range w {
			dx := g[i] + wd*w[i]
			if v2 {
				n[i] = mu*n[i] + dx*dx
			} else {
				n[i] = mu*n[i] + (1-mu)*dx*dx
			}
			w[i] -= lr / (math.Sqrt(n[i]) + 1) * dx
		}
	}
}

func filled(n int, v float64) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = v
	}
	return s
}
