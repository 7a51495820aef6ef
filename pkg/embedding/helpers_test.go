package embedding

import (
	"fmt"
	"math"
	"sync"
	"testing"

	optimizerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/optimizer"
)

// The tests use small optimizers and initializers of their own so that an oracle can compute
// the same float32 results independently of the table.

// testSGD is plain SGD: emb -= lr * grad. No state.
type testSGD struct{ dim int }

func (o testSGD) Dim() int       { return o.dim }
func (o testSGD) StateSize() int { return 0 }
func (o testSGD) Init([]float32) {}
func (o testSGD) String() string { return "sgd" }
func (o testSGD) Apply(emb, _, grad, lr []float32, _ int64) {
	for i := range emb {
		emb[i] -= lr[0] * grad[i]
	}
}
func (o testSGD) Dump([]float32) *optimizerpb.OptimizerDump {
	return &optimizerpb.OptimizerDump{Dump: []*optimizerpb.SingleOptimizerDump{{Type: &optimizerpb.SingleOptimizerDump_Sgd{Sgd: &optimizerpb.SgdOptimizerDump{}}}}}
}
func (o testSGD) Load(_ []float32, d *optimizerpb.OptimizerDump) error {
	if len(d.GetDump()) != 1 || d.GetDump()[0].GetSgd() == nil {
		return fmt.Errorf("not an sgd dump")
	}
	return nil
}

// testAdagrad is the reference's baseline Adagrad without weight decay:
// norm += g*g; emb -= lr / sqrt(norm) * g.
type testAdagrad struct {
	dim  int
	init float32
}

func (o testAdagrad) Dim() int       { return o.dim }
func (o testAdagrad) StateSize() int { return o.dim }
func (o testAdagrad) String() string { return "adagrad" }
func (o testAdagrad) Init(state []float32) {
	for i := range state {
		state[i] = o.init
	}
}
func (o testAdagrad) Apply(emb, norm, grad, lr []float32, _ int64) {
	for i := range emb {
		g := grad[i]
		norm[i] += g * g
		emb[i] -= lr[0] / float32(math.Sqrt(float64(norm[i]))) * g
	}
}
func (o testAdagrad) Dump(state []float32) *optimizerpb.OptimizerDump {
	return &optimizerpb.OptimizerDump{Dump: []*optimizerpb.SingleOptimizerDump{{Type: &optimizerpb.SingleOptimizerDump_Adagrad{Adagrad: &optimizerpb.AdagradOptimizerDump{Norm: append([]float32(nil), state...)}}}}}
}
func (o testAdagrad) Load(state []float32, d *optimizerpb.OptimizerDump) error {
	if len(d.GetDump()) != 1 || len(d.GetDump()[0].GetAdagrad().GetNorm()) != o.dim {
		return fmt.Errorf("not an adagrad dump of dimension %d", o.dim)
	}
	copy(state, d.GetDump()[0].GetAdagrad().GetNorm())
	return nil
}

// constInit sets every value to c.
type constInit float32

func (c constInit) Initialize(emb []float32) {
	for i := range emb {
		emb[i] = float32(c)
	}
}

// seqInit hands out 1, 2, 3, ... in order (safe for concurrent use), so tests can tell entries
// apart and see that a new entry was initialized.
type seqInit struct {
	mu sync.Mutex
	n  float32
}

func (s *seqInit) Initialize(emb []float32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range emb {
		s.n++
		emb[i] = s.n
	}
}

// newTable builds a table or fails the test.
func newTable(t testing.TB, cfg Config) *Table {
	t.Helper()
	tb, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return tb
}

// mustLookup looks ids up or fails the test.
func mustLookup(t testing.TB, tb *Table, ids []int64) ([]float32, int) {
	t.Helper()
	out := make([]float32, len(ids)*tb.Dim())
	// Not zeros: a lookup must write the zeros of ids without an entry itself.
	for i := range out {
		out[i] = -7
	}
	hits, err := tb.Lookup(ids, out)
	if err != nil {
		t.Fatalf("Lookup: %v", err)
	}
	return out, hits
}

// lr1 is a learning rate slice for Apply.
func lr(v float32) []float32 { return []float32{v} }
