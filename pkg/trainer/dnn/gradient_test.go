package dnn

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/monolith-go/monolith/pkg/trainer/batch"
	"github.com/monolith-go/monolith/pkg/trainer/synth"
)

// meanLoss is the mean log loss of logits for labels.
func meanLoss(logits []float64, labels []float32) float64 {
	var l float64
	for i, z := range logits {
		l += logLoss(z, float64(labels[i]))
	}
	return l / float64(len(logits))
}

// closeEnough compares an analytic derivative with a finite difference.
func closeEnough(analytic, numeric, abs, rel float64) bool {
	return math.Abs(analytic-numeric) <= abs+rel*math.Abs(numeric)
}

// The MLP's backward pass (float64 throughout) matches central finite differences of the mean
// log loss for every kernel and bias value and every input value.
func TestMLPGradientMatchesFiniteDifferences(t *testing.T) {
	tests := []struct {
		name   string
		widths []int
	}{
		{"two hidden layers", []int{6, 5, 3, 1}},
		{"one hidden layer", []int{4, 7, 1}},
		{"no hidden layer", []int{5, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			net := newMLP(tc.widths, rng)
			for l := range net.b { // non-zero biases, so they matter
				for j := range net.b[l] {
					net.b[l][j] = rng.NormFloat64() * 0.3
				}
			}
			const n = 7
			x := mat.NewDense(n, tc.widths[0], nil)
			labels := make([]float32, n)
			for i := range n {
				labels[i] = float32(rng.IntN(2))
				for j := range tc.widths[0] {
					x.Set(i, j, rng.NormFloat64())
				}
			}
			loss := func() float64 { return meanLoss(net.forward(x), labels) }
			logits := net.forward(x)
			dLogits := make([]float64, n)
			for i, z := range logits {
				dLogits[i] = (sigmoid(z) - float64(labels[i])) / n
			}
			dx := mat.DenseCopyOf(net.backward(dLogits))
			const eps = 1e-6
			fd := func(v *float64) float64 {
				old := *v
				*v = old + eps
				up := loss()
				*v = old - eps
				down := loss()
				*v = old
				return (up - down) / (2 * eps)
			}
			for _, p := range net.params() {
				grad := slices.Clone(p.grad)
				for i := range p.value {
					if num := fd(&p.value[i]); !closeEnough(grad[i], num, 1e-8, 1e-5) {
						t.Errorf("%s[%d]: gradient %v, finite difference %v", p.name, i, grad[i], num)
					}
				}
			}
			raw := x.RawMatrix()
			for i := range n {
				for j := range tc.widths[0] {
					if num := fd(&raw.Data[i*raw.Stride+j]); !closeEnough(dx.At(i, j), num, 1e-8, 1e-5) {
						t.Errorf("input (%d, %d): gradient %v, finite difference %v", i, j, dx.At(i, j), num)
					}
				}
			}
		})
	}
}

// gradFeatures are features that exercise the input path: two slots sharing a table (one summed,
// one averaged) and a table of its own.
func gradFeatures(dim int) []Feature {
	return []Feature{
		{Name: "a", Slot: 1, Table: "shared", Dim: dim},
		{Name: "b", Slot: 2, Table: "shared", Dim: dim, Pooling: Mean},
		{Name: "c", Slot: 3, Dim: dim},
	}
}

// gradBatch repeats ids inside an example and across examples, leaves an example without ids of
// slot 3 and one without any, and has an id (slot 3, id 9) the store has no entry for.
func gradBatch() *batch.Batch {
	f := synth.FID
	return &batch.Batch{
		Labels:   []float32{1, 0, 1, 0, 0},
		DenseDim: 2,
		Dense:    []float32{0.5, -1, 1.5, 0.2, -0.3, 0.8, 0, 0, 1, 1},
		Fids: [][]uint64{
			{f(1, 1), f(1, 1), f(2, 1), f(2, 2), f(3, 1)},
			{f(1, 2), f(2, 2), f(2, 2), f(2, 3), f(3, 9)},
			{f(2, 1), f(1, 3)},
			{},
			{f(3, 1), f(1, 2), f(3, 2), f(2, 3)},
		},
	}
}

// fillStore gives every id of gradBatch but (3, 9) a random embedding.
func fillStore(s *memStore, b *batch.Batch, dim int, rng *rand.Rand) {
	for _, fids := range b.Fids {
		for _, fid := range fids {
			table := "shared"
			if synth.SlotOf(fid) == 3 {
				table = "c"
			}
			if fid == synth.FID(3, 9) || s.get(table, int64(fid)) != nil {
				continue
			}
			emb := make([]float32, dim)
			for k := range emb {
				emb[k] = float32(rng.NormFloat64() * 0.5)
			}
			s.set(table, int64(fid), emb)
		}
	}
}

// The per-id gradients the model sends to the store (through the MLP, the dot interaction and
// the layout op's backward, a repeated id's contributions summed) match central finite
// differences of the batch's loss with respect to every embedding value in the store, for ids
// repeated within and across examples, summed and averaged features sharing a table, and an id
// without an entry. Each table gets one Apply with every distinct id once, at step 1.
func TestEmbeddingGradientsMatchFiniteDifferences(t *testing.T) {
	tests := []struct {
		name        string
		interaction Interaction
		hidden      []int
	}{
		{"dot interaction", Dot, []int{5, 3}},
		{"no interaction", None, []int{4}},
		{"no hidden layer", Dot, []int{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			const dim = 3
			store := newMemStore(1)
			store.frozen = true
			b := gradBatch()
			fillStore(store, b, dim, rand.New(rand.NewPCG(3, 4)))
			m, err := New(Config{Features: gradFeatures(dim), DenseDim: 2, Hidden: tc.hidden, Interaction: tc.interaction, Seed: 5,
				EmbeddingLearningRates: []float32{0.25, 0.5}}, store)
			if err != nil {
				t.Fatal(err)
			}
			loss := func() float64 {
				var st stepTimes
				logits, err := m.forward(ctx, b, &st)
				if err != nil {
					t.Fatal(err)
				}
				return meanLoss(logits, b.Labels)
			}
			type key struct {
				table string
				id    int64
			}
			numeric := map[key][]float64{}
			for table, ids := range map[string][]int64{
				"shared": {int64(synth.FID(1, 1)), int64(synth.FID(1, 2)), int64(synth.FID(1, 3)), int64(synth.FID(2, 1)), int64(synth.FID(2, 2)), int64(synth.FID(2, 3))},
				"c":      {int64(synth.FID(3, 1)), int64(synth.FID(3, 2)), int64(synth.FID(3, 9))},
			} {
				for _, id := range ids {
					emb := store.get(table, id)
					if emb == nil {
						emb = make([]float32, dim)
					}
					g := make([]float64, dim)
					for k := range emb {
						const eps = 1e-3
						old := emb[k]
						up, down := slices.Clone(emb), slices.Clone(emb)
						up[k], down[k] = old+eps, old-eps
						store.set(table, id, up)
						lu := loss()
						store.set(table, id, down)
						ld := loss()
						g[k] = (lu - ld) / (float64(up[k]) - float64(down[k]))
						store.set(table, id, emb)
					}
					if id == int64(synth.FID(3, 9)) { // back to no entry
						delete(store.tables[table], id)
					}
					numeric[key{table, id}] = g
				}
			}
			lossBefore := loss()
			got, err := m.Step(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			if got != lossBefore {
				t.Errorf("Step's loss %v, the forward pass's %v", got, lossBefore)
			}
			if len(store.applied) != 2 {
				t.Fatalf("%d Apply calls, want one per table (2)", len(store.applied))
			}
			seen := map[key]bool{}
			for _, call := range store.applied {
				if call.step != 1 || !slices.Equal(call.lr, []float32{0.25, 0.5}) {
					t.Errorf("table %s: Apply at step %d with learning rates %v, want step 1 and [0.25 0.5]", call.table, call.step, call.lr)
				}
				for i, id := range call.ids {
					k := key{call.table, id}
					want, ok := numeric[k]
					if !ok {
						t.Errorf("table %s: gradient for id %#x, which the batch does not have", call.table, id)
						continue
					}
					seen[k] = true
					for j, w := range want {
						if g := float64(call.grads[i*dim+j]); !closeEnough(g, w, 2e-5, 2e-3) {
							t.Errorf("table %s id %#x [%d]: gradient %v, finite difference %v", call.table, id, j, g, w)
						}
					}
				}
			}
			if len(seen) != len(numeric) {
				t.Errorf("gradients for %d ids, want %d", len(seen), len(numeric))
			}
		})
	}
}

// The layout op's output is each example's sum (or mean) of its ids' embeddings per feature,
// zeros for an example without ids of the feature, and the MLP's input adds the dense values and
// the dot products of every two features, computed here directly.
func TestInputMatchesDirectPooling(t *testing.T) {
	ctx := context.Background()
	const dim = 4
	store := newMemStore(1)
	b := gradBatch()
	fillStore(store, b, dim, rand.New(rand.NewPCG(6, 7)))
	m, err := New(Config{Features: gradFeatures(dim), DenseDim: 2}, store)
	if err != nil {
		t.Fatal(err)
	}
	var st stepTimes
	if _, err := m.forward(ctx, b, &st); err != nil {
		t.Fatal(err)
	}
	width := 3*dim + 2 + 3
	x := m.in.x
	if len(x) != b.Size()*width {
		t.Fatalf("input of %d values, want %d", len(x), b.Size()*width)
	}
	for i, fids := range b.Fids {
		pooled := make([][]float64, 3) // features a, b, c (slots 1, 2, 3)
		counts := make([]int, 3)
		for f := range pooled {
			pooled[f] = make([]float64, dim)
		}
		for _, fid := range fids {
			slot := synth.SlotOf(fid)
			table := "shared"
			if slot == 3 {
				table = "c"
			}
			emb := store.get(table, int64(fid))
			for k := range dim {
				if emb != nil {
					pooled[slot-1][k] += float64(emb[k])
				}
			}
			counts[slot-1]++
		}
		for k := range dim {
			if counts[1] > 0 {
				pooled[1][k] /= float64(counts[1])
			}
		}
		want := slices.Concat(pooled[0], pooled[1], pooled[2], []float64{float64(b.Row(i)[0]), float64(b.Row(i)[1])})
		for _, pr := range [][2]int{{0, 1}, {0, 2}, {1, 2}} {
			var dot float64
			for k := range dim {
				dot += pooled[pr[0]][k] * pooled[pr[1]][k]
			}
			want = append(want, dot)
		}
		got := x[i*width : (i+1)*width]
		for j := range want {
			if !closeEnough(got[j], want[j], 1e-6, 1e-6) {
				t.Errorf("example %d input %d = %v, want %v (input %v, want %v)", i, j, got[j], want[j], got, want)
				break
			}
		}
	}
}

func TestConfigErrors(t *testing.T) {
	store := newMemStore(1)
	f := func(name string, slot, dim int) Feature { return Feature{Name: name, Slot: slot, Dim: dim} }
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no features", Config{}, "no sparse features"},
		{"unnamed feature", Config{Features: []Feature{f("", 1, 2)}}, "no name"},
		{"twice", Config{Features: []Feature{f("a", 1, 2), f("a", 2, 2)}}, `feature "a" is configured twice`},
		{"slot twice", Config{Features: []Feature{f("a", 1, 2), f("b", 1, 2)}}, "both take slot 1"},
		{"slot range", Config{Features: []Feature{f("a", 1<<15, 2)}}, "not a v2 fid slot"},
		{"dim", Config{Features: []Feature{f("a", 1, 0)}}, "dimension 0"},
		{"pooling", Config{Features: []Feature{{Name: "a", Slot: 1, Dim: 2, Pooling: "firstn"}}}, `unknown pooling "firstn"`},
		{"table dims", Config{Features: []Feature{{Name: "a", Slot: 1, Dim: 2, Table: "t"}, {Name: "b", Slot: 2, Dim: 3, Table: "t"}}, Interaction: None}, `table "t"`},
		{"dot dims", Config{Features: []Feature{f("a", 1, 2), f("b", 2, 3)}}, "one embedding dimension"},
		{"interaction", Config{Features: []Feature{f("a", 1, 2)}, Interaction: "cross"}, `unknown interaction "cross"`},
		{"hidden", Config{Features: []Feature{f("a", 1, 2)}, Hidden: []int{3, 0}}, "hidden layer widths"},
		{"optimizer", Config{Features: []Feature{f("a", 1, 2)}, Optimizer: "sgd"}, `unknown optimizer "sgd"`},
		{"learning rate", Config{Features: []Feature{f("a", 1, 2)}, LearningRate: -1}, "learning rate -1"},
		{"beta", Config{Features: []Feature{f("a", 1, 2)}, Beta2: 1}, "betas"},
		{"dense dim", Config{Features: []Feature{f("a", 1, 2)}, DenseDim: -1}, "dense dim -1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg, store)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error with %q", err, tc.want)
			}
		})
	}
	if _, err := New(Config{Features: []Feature{f("a", 1, 2)}}, nil); err == nil {
		t.Error("New without a store succeeded")
	}
	// Features of different dimensions in separate tables are fine without the dot interaction.
	if _, err := New(Config{Features: []Feature{f("a", 1, 2), f("b", 2, 3)}, Interaction: None}, store); err != nil {
		t.Errorf("different dimensions without interaction: %v", err)
	}
}
