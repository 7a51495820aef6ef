package logreg

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/dataset"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/estimator"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
	"github.com/monolith-go/monolith/pkg/trainer/synth"
)

// randomBatch draws n examples with dim dense values and up to 4 fids among 12 (so examples share
// fids, an example may repeat one, and with few buckets fids collide).
func randomBatch(rng *rand.Rand, n, dim int) *batch.Batch {
	b := &batch.Batch{DenseDim: dim}
	for range n {
		b.Labels = append(b.Labels, float32(rng.IntN(2)))
		for range dim {
			b.Dense = append(b.Dense, float32(rng.NormFloat64()))
		}
		var f []uint64
		for range rng.IntN(5) {
			f = append(f, synth.FID(1+rng.IntN(3), uint64(rng.IntN(4))))
		}
		b.Fids = append(b.Fids, f)
	}
	return b
}

// randomize gives every weight a random value, so the check is not at the zero point.
func randomize(m *Model, rng *rand.Rand) {
	m.bias = rng.NormFloat64()
	for i := range m.cfg.DenseDim {
		m.dense.SetVec(i, rng.NormFloat64())
	}
	for i := range m.hashed {
		m.hashed[i] = rng.NormFloat64()
	}
}

// The analytic gradient matches central finite differences of the loss, for every weight: the
// bias, each dense weight and each hash bucket (zero for the buckets no fid of the batch is in).
func TestGradientMatchesFiniteDifferences(t *testing.T) {
	tests := []struct {
		name    string
		dim     int
		buckets int
	}{
		{"dense and colliding fids", 3, 5},
		{"dense and many buckets", 4, 1000},
		{"fids only", 0, 7},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			m, err := New(Config{DenseDim: tc.dim, HashBuckets: tc.buckets})
			if err != nil {
				t.Fatal(err)
			}
			randomize(m, rng)
			b := randomBatch(rng, 17, tc.dim)
			_, g, err := m.LossAndGradient(b)
			if err != nil {
				t.Fatal(err)
			}
			loss := func() float64 {
				l, _, err := m.LossAndGradient(b)
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			const h = 1e-6
			// numeric is the central difference of the loss in the weight that get reads and set writes.
			numeric := func(get func() float64, set func(float64)) float64 {
				old := get()
				set(old + h)
				up := loss()
				set(old - h)
				down := loss()
				set(old)
				return (up - down) / (2 * h)
			}
			check := func(what string, analytic, num float64) {
				if math.Abs(analytic-num) > 1e-6*math.Max(1, math.Abs(num)) {
					t.Errorf("%s: gradient %v, finite differences %v", what, analytic, num)
				}
			}
			check("bias", g.Bias, numeric(func() float64 { return m.bias }, func(v float64) { m.bias = v }))
			for i := range tc.dim {
				num := numeric(func() float64 { return m.dense.AtVec(i) }, func(v float64) { m.dense.SetVec(i, v) })
				check(fmt.Sprintf("dense %d", i), g.Dense[i], num)
			}
			nonzero := 0
			for k := range m.hashed {
				num := numeric(func() float64 { return m.hashed[k] }, func(v float64) { m.hashed[k] = v })
				check(fmt.Sprintf("bucket %d", k), g.Hashed[k], num)
				if num != 0 {
					nonzero++
				}
			}
			if nonzero == 0 || nonzero != len(g.Hashed) {
				t.Errorf("%d buckets with a numeric gradient, %d in the analytic one", nonzero, len(g.Hashed))
			}
		})
	}
}

// A step moves every weight against its gradient: SGD by lr*g, Adagrad by lr*g/sqrt(acc+g^2).
func TestStepUpdates(t *testing.T) {
	for _, opt := range []Optimizer{SGD, Adagrad} {
		t.Run(string(opt), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 4))
			m, err := New(Config{DenseDim: 2, HashBuckets: 11, Optimizer: opt, LearningRate: 0.3, InitialAccumulator: 0.2})
			if err != nil {
				t.Fatal(err)
			}
			randomize(m, rng)
			b := randomBatch(rng, 9, 2)
			wantLoss, g, err := m.LossAndGradient(b)
			if err != nil {
				t.Fatal(err)
			}
			step := func(w, g float64) float64 {
				if opt == SGD {
					return w - 0.3*g
				}
				return w - 0.3*g/math.Sqrt(0.2+g*g)
			}
			wantBias, wantDense0 := step(m.bias, g.Bias), step(m.dense.AtVec(0), g.Dense[0])
			wantHashed := map[int]float64{}
			for k, gk := range g.Hashed {
				wantHashed[k] = step(m.hashed[k], gk)
			}
			loss, err := m.Step(b)
			if err != nil || loss != wantLoss {
				t.Fatalf("Step: loss %v, %v; want %v", loss, err, wantLoss)
			}
			if math.Abs(m.bias-wantBias) > 1e-12 || math.Abs(m.dense.AtVec(0)-wantDense0) > 1e-12 {
				t.Errorf("bias %v, dense[0] %v; want %v, %v", m.bias, m.dense.AtVec(0), wantBias, wantDense0)
			}
			for k, w := range wantHashed {
				if math.Abs(m.hashed[k]-w) > 1e-12 {
					t.Errorf("bucket %d: %v, want %v", k, m.hashed[k], w)
				}
			}
		})
	}
}

func TestTensorsRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	m, err := New(Config{DenseDim: 3, HashBuckets: 13})
	if err != nil {
		t.Fatal(err)
	}
	randomize(m, rng)
	if _, err := m.Step(randomBatch(rng, 8, 3)); err != nil {
		t.Fatal(err)
	}
	ts := m.Tensors()
	names := []string{}
	for _, tn := range ts {
		names = append(names, tn.Name)
	}
	if got := strings.Join(names, ","); got != "logreg/bias,logreg/dense,logreg/hashed,logreg/bias/Adagrad,logreg/dense/Adagrad,logreg/hashed/Adagrad" {
		t.Errorf("tensors %s", got)
	}
	m2, err := New(Config{DenseDim: 3, HashBuckets: 13})
	if err != nil {
		t.Fatal(err)
	}
	if err := m2.Assign(append(ts, estimator.Tensor{Name: "unrelated", Int64: []int64{1}})); err != nil {
		t.Fatal(err)
	}
	b := randomBatch(rng, 5, 3)
	p1, _ := m.Predict(b)
	p2, _ := m2.Predict(b)
	for i := range p1 {
		// The tensors hold float64: the restored model predicts exactly as the saved one.
		if p1[i] != p2[i] {
			t.Errorf("prediction %d: %v before, %v restored", i, p1[i], p2[i])
		}
	}
	if m2.accHashed[0] != m.accHashed[0] {
		t.Errorf("accumulator not restored: %v, want %v", m2.accHashed[0], m.accHashed[0])
	}

	bad := []struct {
		name string
		edit func([]estimator.Tensor) []estimator.Tensor
		kind errkind.Kind
		want string
	}{
		{"missing", func(ts []estimator.Tensor) []estimator.Tensor { return ts[1:] }, errkind.NotFound, "no tensor logreg/bias"},
		{"wrong shape", func(ts []estimator.Tensor) []estimator.Tensor {
			ts[2] = estimator.Tensor{Name: HashedName, Shape: []int64{12}, Float32: make([]float32, 12)}
			return ts
		}, errkind.Value, "logreg/hashed has shape [12]"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			before := m2.Tensors()
			err := m2.Assign(tc.edit(m.Tensors()))
			if err == nil || !strings.Contains(err.Error(), tc.want) || errkind.Of(err) != tc.kind {
				t.Fatalf("err = %v, want a %v error containing %q", err, tc.kind, tc.want)
			}
			if after := m2.Tensors(); after[0].Float64[0] != before[0].Float64[0] {
				t.Error("a failed Assign changed the model")
			}
		})
	}
}

func TestBadBatchesAndConfig(t *testing.T) {
	m, err := New(Config{DenseDim: 2, HashBuckets: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Step(&batch.Batch{}); err == nil || !strings.Contains(err.Error(), "empty batch") {
		t.Errorf("empty batch: %v", err)
	}
	if _, err := m.Step(&batch.Batch{Labels: []float32{1}, Dense: []float32{1, 2, 3}, DenseDim: 3, Fids: [][]uint64{nil}}); err == nil || !strings.Contains(err.Error(), "takes 2 dense values") {
		t.Errorf("wrong dense dim: %v", err)
	}
	for _, cfg := range []Config{{DenseDim: -1}, {Optimizer: "adam"}, {LearningRate: -1}, {HashBuckets: -2}} {
		if _, err := New(cfg); err == nil || errkind.Of(err) != errkind.Value {
			t.Errorf("New(%+v): %v, want a Value error", cfg, err)
		}
	}
}

// Trained by the estimator on a synthetic click log (three passes over 40000 examples), the model's
// eval AUC comes within 0.03 of the best AUC the generator's true probabilities reach on the same
// eval set.
func TestLearnsSyntheticClickLog(t *testing.T) {
	leakcheck.Check(t)
	ctx := context.Background()
	g, err := synth.New(synth.Config{Seed: 42, NumDense: 8, NumSlots: 4, Vocab: 100})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	train, err := g.Write(synth.WriteOptions{Dir: dir, Name: "train", Files: 4, Examples: 40000, Stream: 1})
	if err != nil {
		t.Fatal(err)
	}
	eval, err := g.Write(synth.WriteOptions{Dir: dir, Name: "eval", Files: 1, Examples: 10000, Stream: 2})
	if err != nil {
		t.Fatal(err)
	}
	best, bestLoss, err := g.BestAUC(ctx, eval, dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(Config{DenseDim: g.Schema().DenseDim(), HashBuckets: 1 << 14})
	if err != nil {
		t.Fatal(err)
	}
	input := func(files []string) estimator.InputFn[*batch.Batch] {
		return func(context.Context, estimator.Mode) (estimator.Input[*batch.Batch], error) {
			return batch.Open(files, dataset.Options{}, g.Schema(), 128)
		}
	}
	e, err := estimator.New[*batch.Batch](m, estimator.Config{Checkpointer: &estimator.MemoryCheckpointer{}, SaveCheckpointsSteps: 100, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.TrainAndEvaluate(ctx, estimator.TrainSpec[*batch.Batch]{Input: input(slices.Repeat(train, 3))}, estimator.EvalSpec[*batch.Batch]{Input: input(eval)})
	if err != nil {
		t.Fatal(err)
	}
	got := res.Metrics["auc"]
	t.Logf("eval auc %.4f (best %.4f), log loss %.4f (best %.4f), %d steps", got, best, res.Metrics["log_loss"], bestLoss, res.GlobalStep)
	if want := int64(3*40000/128 + 1); res.GlobalStep != want || res.Examples != 10000 {
		t.Errorf("trained %d steps, evaluated %d examples; want %d, 10000", res.GlobalStep, res.Examples, want)
	}
	if got < best-0.03 || got > best+0.01 {
		t.Errorf("eval AUC %v, want within 0.03 below the best %v", got, best)
	}
	if res.Metrics["log_loss"] > bestLoss+0.05 {
		t.Errorf("eval log loss %v, best %v", res.Metrics["log_loss"], bestLoss)
	}
}
