package optimizer

import (
	"strings"

	optimizerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/optimizer"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// Combine returns one optimizer over the concatenation of the parts' embeddings, as the reference's
// CombineOptimizers does for an entry whose slices have different optimizers: the embedding, the
// gradient and the state are the parts' ones one after another, each part takes as many learning
// rates as it has parts (one for an optimizer from New), and the dump lists the parts' dump entries
// in order. Combine of one optimizer returns it. Parts must come from New or Combine.
func Combine(parts ...Optimizer) (Optimizer, error) {
	if len(parts) == 0 {
		return nil, errkind.New(errkind.Value, "optimizer: Combine of no optimizers")
	}
	ps := make([]part, len(parts))
	for i, o := range parts {
		p, ok := o.(part)
		if !ok {
			return nil, errkind.New(errkind.Value, "optimizer: Combine: part %d (%T) is not from optimizer.New", i, o)
		}
		ps[i] = p
	}
	if len(ps) == 1 {
		return ps[0], nil
	}
	c := &combined{parts: ps}
	for _, p := range ps {
		c.dim += p.Dim()
		c.state += p.StateSize()
		c.nSlices += p.slices()
		c.nDumps += p.dumps()
	}
	return c, nil
}

type combined struct {
	parts                       []part
	dim, state, nSlices, nDumps int
}

func (c *combined) Dim() int       { return c.dim }
func (c *combined) StateSize() int { return c.state }
func (c *combined) slices() int    { return c.nSlices }
func (c *combined) dumps() int     { return c.nDumps }

func (c *combined) String() string {
	names := make([]string, len(c.parts))
	for i, p := range c.parts {
		names[i] = describe(p)
	}
	return strings.Join(names, "|")
}

func (c *combined) Init(state []float32) {
	for _, p := range c.parts {
		p.Init(state[:p.StateSize()])
		state = state[p.StateSize():]
	}
}

func (c *combined) Apply(emb, state, grad []float32, learningRates []float32, globalStep int64) {
	for _, p := range c.parts {
		d, s, n := p.Dim(), p.StateSize(), p.slices()
		p.Apply(emb[:d], state[:s], grad[:d], learningRates[:n], globalStep)
		emb, state, grad, learningRates = emb[d:], state[s:], grad[d:], learningRates[n:]
	}
}

func (c *combined) Dump(state []float32) *optimizerpb.OptimizerDump {
	out := &optimizerpb.OptimizerDump{}
	for _, p := range c.parts {
		out.Dump = append(out.Dump, p.Dump(state[:p.StateSize()]).Dump...)
		state = state[p.StateSize():]
	}
	return out
}

func (c *combined) Load(state []float32, d *optimizerpb.OptimizerDump) error {
	if got := len(d.GetDump()); got != c.nDumps {
		return errkind.New(errkind.Value, "optimizer %s: dump has %d entries, want %d", c, got, c.nDumps)
	}
	if len(state) < c.state {
		return errkind.New(errkind.Value, "optimizer %s: state of %d floats, want %d", c, len(state), c.state)
	}
	entries := d.GetDump()
	for _, p := range c.parts {
		n := p.dumps()
		if err := p.Load(state[:p.StateSize()], &optimizerpb.OptimizerDump{Dump: entries[:n]}); err != nil {
			return err
		}
		entries, state = entries[n:], state[p.StateSize():]
	}
	return nil
}

// describe is an optimizer's reference DebugString ("Adagrad(D=16)").
func describe(o Optimizer) string {
	if s, ok := o.(interface{ String() string }); ok {
		return s.String()
	}
	return "?"
}
