package dnn

import (
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"
)

// mlp is a multilayer perceptron with ReLU hidden layers and one linear output (the logit), in
// float64 on gonum matrices. Its buffers are reused from batch to batch; it is not safe for
// concurrent use.
type mlp struct {
	// w[l] is layer l's kernel (inputs x outputs), b[l] its bias; gw and gb their gradients after
	// backward.
	w, gw []*mat.Dense
	b, gb [][]float64
	// a[0] is the input of the last forward, a[l+1] the output of layer l (after the ReLU; the
	// last is the logits). d and dPrev are backward's buffers.
	a        []*mat.Dense
	d, dPrev *mat.Dense
}

// newMLP returns a perceptron of the given widths (the input's first, then each layer's output;
// the last must be 1), with Glorot-uniform kernels drawn from rng and zero biases (the defaults
// of Keras's Dense layer).
func newMLP(widths []int, rng *rand.Rand) *mlp {
	n := &mlp{d: &mat.Dense{}, dPrev: &mat.Dense{}}
	for l := 0; l+1 < len(widths); l++ {
		in, out := widths[l], widths[l+1]
		limit := math.Sqrt(6 / float64(in+out))
		w := make([]float64, in*out)
		for i := range w {
			w[i] = (2*rng.Float64() - 1) * limit
		}
		n.w = append(n.w, mat.NewDense(in, out, w))
		n.gw = append(n.gw, mat.NewDense(in, out, nil))
		n.b = append(n.b, make([]float64, out))
		n.gb = append(n.gb, make([]float64, out))
	}
	n.a = make([]*mat.Dense, len(n.w)+1)
	for l := 1; l < len(n.a); l++ {
		n.a[l] = &mat.Dense{}
	}
	return n
}

// forward computes the logits of the rows of x (which it keeps for backward) and returns them
// (valid until the next forward).
func (n *mlp) forward(x *mat.Dense) []float64 {
	n.a[0] = x
	last := len(n.w) - 1
	for l, w := range n.w {
		z := n.a[l+1]
		z.Reset()
		z.Mul(n.a[l], w)
		raw := z.RawMatrix()
		for i := range raw.Rows {
			row := raw.Data[i*raw.Stride : i*raw.Stride+raw.Cols]
			for j, bj := range n.b[l] {
				v := row[j] + bj
				if l < last && v < 0 {
					v = 0
				}
				row[j] = v
			}
		}
	}
	return n.a[len(n.w)].RawMatrix().Data
}

// backward takes the gradient of the loss with respect to the last forward's logits, leaves the
// parameters' gradients in gw and gb and returns the gradient with respect to its input (valid
// until the next backward).
func (n *mlp) backward(dLogits []float64) *mat.Dense {
	d := n.d
	d.Reset()
	d.ReuseAs(len(dLogits), 1)
	copy(d.RawMatrix().Data, dLogits)
	for l := len(n.w) - 1; l >= 0; l-- {
		n.gw[l].Mul(n.a[l].T(), d)
		raw := d.RawMatrix()
		gb := n.gb[l]
		clear(gb)
		for i := range raw.Rows {
			for j, v := range raw.Data[i*raw.Stride : i*raw.Stride+raw.Cols] {
				gb[j] += v
			}
		}
		prev := n.dPrev
		prev.Reset()
		prev.Mul(d, n.w[l].T())
		if l > 0 {
			// Through layer l-1's ReLU: no gradient where its output was clamped to 0.
			pr, ar := prev.RawMatrix(), n.a[l].RawMatrix()
			for i := range pr.Rows {
				p, a := pr.Data[i*pr.Stride:i*pr.Stride+pr.Cols], ar.Data[i*ar.Stride:i*ar.Stride+ar.Cols]
				for j := range p {
					if a[j] <= 0 {
						p[j] = 0
					}
				}
			}
		}
		n.d, n.dPrev = prev, d
		d = prev
	}
	return d
}

// params lists the parameters with their gradients, layer by layer (kernel, then bias).
func (n *mlp) params() []param {
	var ps []param
	for l := range n.w {
		in, out := n.w[l].Dims()
		ps = append(ps,
			param{name: layerName(l) + "/kernel", shape: []int64{int64(in), int64(out)}, value: n.w[l].RawMatrix().Data, grad: n.gw[l].RawMatrix().Data},
			param{name: layerName(l) + "/bias", shape: []int64{int64(out)}, value: n.b[l], grad: n.gb[l]})
	}
	return ps
}

// param is a dense parameter: its values and its gradient, row-major.
type param struct {
	name  string
	shape []int64
	value []float64
	grad  []float64
}
