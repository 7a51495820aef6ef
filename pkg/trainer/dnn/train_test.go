package dnn

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/dataset"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/estimator"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
	"github.com/monolith-go/monolith/pkg/trainer/hashbucket"
	"github.com/monolith-go/monolith/pkg/trainer/logreg"
	"github.com/monolith-go/monolith/pkg/trainer/synth"
)

// latentLog is the click log of the training tests: 4 slots of 100 ids with 4-dimensional latent
// factors, 4 dense values.
var latentLog = synth.Config{Seed: 42, NumDense: 4, NumSlots: 4, Vocab: 100, LatentDim: 4}

// slotFeatures are one feature (and table) per slot of g.
func slotFeatures(g *synth.Generator, dim int) []Feature {
	var fs []Feature
	for s := 1; s <= g.Config().NumSlots; s++ {
		fs = append(fs, Feature{Name: synth.SlotFeature(s), Slot: s, Dim: dim})
	}
	return fs
}

// streamBatches draws count batches of size examples from stream n of g.
func streamBatches(t testing.TB, g *synth.Generator, n uint64, count, size int) []*batch.Batch {
	t.Helper()
	s := g.Stream(n)
	schema := g.Schema()
	var bs []*batch.Batch
	for range count {
		b := &batch.Batch{}
		for range size {
			ex, _ := s.Next()
			if err := schema.Append(b, ex); err != nil {
				t.Fatal(err)
			}
		}
		bs = append(bs, b)
	}
	return bs
}

// Trained by the estimator in-process (pkg/embedding tables with Adagrad through a TableStore) on the latent-factor click
// log, three passes over 100000 examples, the model's eval AUC comes within 0.02 of the AUC of the
// generator's true probabilities on the same eval set, while a logistic regression (per-id
// weights, no embeddings) trained on the same passes stays far below: the task needs the
// embeddings' interactions.
func TestLearnsLatentFactorClickLog(t *testing.T) {
	leakcheck.Check(t)
	ctx := context.Background()
	g, err := synth.New(latentLog)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	train, err := g.Write(synth.WriteOptions{Dir: dir, Name: "train", Files: 2, Examples: 100000, Stream: 1})
	if err != nil {
		t.Fatal(err)
	}
	eval, err := g.Write(synth.WriteOptions{Dir: dir, Name: "eval", Examples: 10000, Stream: 2})
	if err != nil {
		t.Fatal(err)
	}
	best, bestLoss, err := g.BestAUC(ctx, eval, dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	input := func(files []string, size int) estimator.InputFn[*batch.Batch] {
		return func(context.Context, estimator.Mode) (estimator.Input[*batch.Batch], error) {
			return batch.Open(files, dataset.Options{}, g.Schema(), size)
		}
	}
	run := func(model estimator.Model[*batch.Batch], size int) estimator.EvalResult {
		t.Helper()
		e, err := estimator.New(model, estimator.Config{Checkpointer: &estimator.MemoryCheckpointer{}, Log: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		res, err := e.TrainAndEvaluate(ctx, estimator.TrainSpec[*batch.Batch]{Input: input(slices.Repeat(train, 3), size)},
			estimator.EvalSpec[*batch.Batch]{Input: input(eval, 1024)})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	features := slotFeatures(g, 8)
	m, err := New(Config{Features: features, DenseDim: g.Schema().DenseDim(), LearningRate: 0.01,
		EmbeddingLearningRates: []float32{0.2}, Seed: 1}, newTableStore(t, features))
	if err != nil {
		t.Fatal(err)
	}
	res := run(m, 256)
	lr, err := logreg.New(logreg.Config{DenseDim: g.Schema().DenseDim(), HashBuckets: 1 << 14})
	if err != nil {
		t.Fatal(err)
	}
	lrRes := run(lr, 128)
	got, lrAUC := res.Metrics["auc"], lrRes.Metrics["auc"]
	st := m.Stats()
	t.Logf("eval auc %.4f (best %.4f, logreg %.4f), log loss %.4f (best %.4f, logreg %.4f); %d steps; train loss %.4f, train auc %.4f; %.0f examples/s of step time (input %v, lookup %v, layout %v, dense %v, apply %v)",
		got, best, lrAUC, res.Metrics["log_loss"], bestLoss, lrRes.Metrics["log_loss"], res.GlobalStep, st.MeanLoss(), st.AUC,
		float64(st.Examples)/st.StepTime().Seconds(), st.Input, st.Lookup, st.Layout, st.Dense, st.Apply)
	if got < best-0.02 || got > best+0.01 {
		t.Errorf("eval AUC %v, want within 0.02 below the best %v", got, best)
	}
	if lrAUC > got-0.05 {
		t.Errorf("logistic regression's eval AUC %v, want at least 0.05 below the model's %v", lrAUC, got)
	}
	steps := int64((3*100000 + 255) / 256) // the passes are one input, read across file ends
	if res.GlobalStep != steps || m.GlobalStep() != steps || st.Steps != steps || st.Examples != 300000 || st.EvalExamples != 10000 {
		t.Errorf("global step %d, model step %d, stats %d steps %d examples %d eval examples; want %d steps, 300000 and 10000 examples",
			res.GlobalStep, m.GlobalStep(), st.Steps, st.Examples, st.EvalExamples, steps)
	}
	// One lookup per table and batch, train and eval (every batch has ids of every slot).
	if want := (steps + 10) * 4; st.Lookups != want || st.Applies != steps*4 {
		t.Errorf("%d lookups and %d applies, want %d and %d", st.Lookups, st.Applies, want, steps*4)
	}
}

// trainSteps trains a model of cfg over a fresh in-memory store on bs and returns the losses, the
// model and the store.
func trainSteps(t *testing.T, cfg Config, bs []*batch.Batch) ([]float64, *Model, *memStore) {
	t.Helper()
	store := newMemStore(9)
	m, err := New(cfg, store)
	if err != nil {
		t.Fatal(err)
	}
	var losses []float64
	for _, b := range bs {
		l, err := m.Step(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		losses = append(losses, l)
	}
	return losses, m, store
}

func sameTensors(a, b []estimator.Tensor) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || !slices.Equal(a[i].Shape, b[i].Shape) || !slices.Equal(a[i].Int64, b[i].Int64) ||
			len(a[i].Float64) != len(b[i].Float64) {
			return false
		}
		for j, v := range a[i].Float64 {
			if math.Float64bits(v) != math.Float64bits(b[i].Float64[j]) {
				return false
			}
		}
	}
	return true
}

func sameStores(a, b map[string]map[int64][]float32) bool {
	if len(a) != len(b) {
		return false
	}
	for name, t := range a {
		if len(t) != len(b[name]) {
			return false
		}
		for id, v := range t {
			w, ok := b[name][id]
			if !ok || !slices.EqualFunc(v, w, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) }) {
				return false
			}
		}
	}
	return true
}

// Training is a function of the seeds and the data: two runs give the same losses, dense tensors
// and embeddings bit for bit, also with the layout kernel on several threads; another seed gives
// other ones.
func TestDeterministic(t *testing.T) {
	g, err := synth.New(latentLog)
	if err != nil {
		t.Fatal(err)
	}
	bs := streamBatches(t, g, 1, 20, 64)
	base := Config{Features: slotFeatures(g, 4), DenseDim: 4, Seed: 3, LearningRate: 0.01}
	refLoss, ref, refStore := trainSteps(t, base, bs)
	tests := []struct {
		name string
		edit func(*Config)
		same bool
	}{
		{"same seed", func(*Config) {}, true},
		{"layout kernel on 3 threads", func(c *Config) { c.LayoutThreads = 3 }, true},
		{"other seed", func(c *Config) { c.Seed = 4 }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			tc.edit(&cfg)
			loss, m, store := trainSteps(t, cfg, bs)
			same := slices.Equal(loss, refLoss) && sameTensors(m.Tensors(), ref.Tensors()) && sameStores(store.snapshot(), refStore.snapshot())
			if same != tc.same {
				t.Errorf("same losses, tensors and embeddings as the reference run: %v, want %v", same, tc.same)
			}
		})
	}
}

// A model restored from another's tensors (and a copy of its store) continues exactly as the
// original: the same losses, tensors and embeddings, bit for bit, with either optimizer.
func TestTensorsRoundTrip(t *testing.T) {
	g, err := synth.New(latentLog)
	if err != nil {
		t.Fatal(err)
	}
	bs := streamBatches(t, g, 1, 16, 32)
	for _, opt := range []Optimizer{Adam, Adagrad} {
		t.Run(string(opt), func(t *testing.T) {
			cfg := Config{Features: slotFeatures(g, 4), DenseDim: 4, Optimizer: opt, Seed: 1}
			_, a, storeA := trainSteps(t, cfg, bs[:8])
			saved := a.Tensors()
			cfg.Seed = 2 // other initial values, all overwritten by Assign
			b, err := New(cfg, storeA.clone())
			if err != nil {
				t.Fatal(err)
			}
			if sameTensors(b.Tensors(), saved) {
				t.Fatal("a fresh model already has the trained tensors")
			}
			if err := b.Assign(saved); err != nil {
				t.Fatal(err)
			}
			if !sameTensors(b.Tensors(), saved) || b.GlobalStep() != 8 {
				t.Fatalf("after Assign: tensors differ or step %d, want 8", b.GlobalStep())
			}
			storeB := b.store.(*memStore)
			for i, batch := range bs[8:] {
				la, err := a.Step(context.Background(), batch)
				if err != nil {
					t.Fatal(err)
				}
				lb, err := b.Step(context.Background(), batch)
				if err != nil {
					t.Fatal(err)
				}
				if la != lb {
					t.Fatalf("step %d: loss %v after restore, %v without", 9+i, lb, la)
				}
			}
			if !sameTensors(a.Tensors(), b.Tensors()) || !sameStores(storeA.snapshot(), storeB.snapshot()) {
				t.Error("the restored model's tensors or embeddings differ from the original's")
			}
		})
	}
}

func TestAssignErrors(t *testing.T) {
	g, err := synth.New(latentLog)
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(Config{Features: slotFeatures(g, 4), DenseDim: 4}, newMemStore(1))
	if err != nil {
		t.Fatal(err)
	}
	good := m.Tensors()
	edit := func(fn func([]estimator.Tensor) []estimator.Tensor) []estimator.Tensor {
		ts := make([]estimator.Tensor, len(good))
		for i, t := range good {
			ts[i] = estimator.Tensor{Name: t.Name, Shape: slices.Clone(t.Shape), Float64: slices.Clone(t.Float64), Int64: slices.Clone(t.Int64)}
		}
		return fn(ts)
	}
	idx := func(ts []estimator.Tensor, name string) int {
		return slices.IndexFunc(ts, func(t estimator.Tensor) bool { return t.Name == name })
	}
	tests := []struct {
		name string
		ts   []estimator.Tensor
		kind errkind.Kind
		want string
	}{
		{"missing kernel", edit(func(ts []estimator.Tensor) []estimator.Tensor {
			return slices.Delete(ts, idx(ts, "dnn/layer_1/kernel"), idx(ts, "dnn/layer_1/kernel")+1)
		}), errkind.NotFound, "dnn/layer_1/kernel"},
		{"missing step", edit(func(ts []estimator.Tensor) []estimator.Tensor { return ts[1:] }), errkind.NotFound, StepName},
		{"wrong shape", edit(func(ts []estimator.Tensor) []estimator.Tensor {
			ts[idx(ts, "dnn/layer_0/bias")].Shape = []int64{2, 32}
			return ts
		}), errkind.Value, "dnn/layer_0/bias"},
		{"missing Adam slot", edit(func(ts []estimator.Tensor) []estimator.Tensor {
			i := idx(ts, "dnn/layer_2/bias/Adam_1")
			return slices.Delete(ts, i, i+1)
		}), errkind.NotFound, "dnn/layer_2/bias/Adam_1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// A changed model, to see that a failed Assign leaves it as it was.
			changed := edit(func(ts []estimator.Tensor) []estimator.Tensor {
				for i := range ts {
					for j := range ts[i].Float64 {
						ts[i].Float64[j] += 1
					}
				}
				ts[0].Int64[0] = 77
				return ts
			})
			if err := m.Assign(changed); err != nil {
				t.Fatal(err)
			}
			before := m.Tensors()
			err := m.Assign(tc.ts)
			if err == nil || errkind.Of(err) != tc.kind || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Assign: %v, want a %v error naming %s", err, tc.kind, tc.want)
			}
			if !sameTensors(m.Tensors(), before) {
				t.Error("a failed Assign changed the model")
			}
		})
	}
	// Float32 tensors (a warm start from another model's checkpoint) are taken.
	f32 := edit(func(ts []estimator.Tensor) []estimator.Tensor {
		for i := range ts {
			if ts[i].Float64 != nil {
				ts[i].Float32 = make([]float32, len(ts[i].Float64))
				for j, v := range ts[i].Float64 {
					ts[i].Float32[j] = float32(v)
				}
				ts[i].Float64 = nil
			}
		}
		return ts
	})
	if err := m.Assign(f32); err != nil {
		t.Fatalf("Assign of float32 tensors: %v", err)
	}
	w := m.Tensors()[idx(m.Tensors(), "dnn/layer_0/kernel")].Float64[0]
	if want := float64(float32(good[idx(good, "dnn/layer_0/kernel")].Float64[0])); w != want {
		t.Errorf("kernel value %v after a float32 Assign, want %v", w, want)
	}
}

// One step creates entries for exactly the batch's ids, changes the dense parameters and counts
// the calls in Stats; Predict changes nothing.
func TestStepUpdatesAndStats(t *testing.T) {
	leakcheck.Check(t)
	ctx := context.Background()
	g, err := synth.New(synth.Config{Seed: 1, NumDense: 2, NumSlots: 3, Vocab: 20, IDsPerSlot: 2, LatentDim: 2})
	if err != nil {
		t.Fatal(err)
	}
	b := streamBatches(t, g, 1, 1, 50)[0]
	store := newMemStore(1)
	m, err := New(Config{Features: slotFeatures(g, 4), DenseDim: 2}, store)
	if err != nil {
		t.Fatal(err)
	}
	before := m.Tensors()
	if _, err := m.Predict(ctx, b); err != nil {
		t.Fatal(err)
	}
	if !sameTensors(m.Tensors(), before) || len(store.snapshot()) != 0 {
		t.Fatal("Predict changed the model or the store")
	}
	if _, err := m.Step(ctx, b); err != nil {
		t.Fatal(err)
	}
	ids := map[string]map[int64]bool{}
	for _, fids := range b.Fids {
		for _, fid := range fids {
			name := synth.SlotFeature(synth.SlotOf(fid))
			if ids[name] == nil {
				ids[name] = map[int64]bool{}
			}
			ids[name][int64(fid)] = true
		}
	}
	snap := store.snapshot()
	distinct := 0
	for name, want := range ids {
		distinct += len(want)
		if len(snap[name]) != len(want) {
			t.Errorf("table %s: %d entries, want the batch's %d distinct ids", name, len(snap[name]), len(want))
		}
		for id := range snap[name] {
			if !want[id] {
				t.Errorf("table %s: entry for id %#x, not in the batch", name, id)
			}
		}
	}
	after := m.Tensors()
	for i := range after {
		if after[i].Name != StepName && slices.Equal(after[i].Float64, before[i].Float64) {
			t.Errorf("tensor %s did not change", after[i].Name)
		}
	}
	st := m.Stats()
	if st.Steps != 1 || st.Examples != 50 || st.EvalExamples != 50 || st.Lookups != 6 || st.Applies != 3 ||
		st.LookupIDs != int64(2*distinct) || st.ApplyIDs != int64(distinct) || st.LossSum <= 0 || st.StepTime() <= 0 || st.LookupMax <= 0 {
		t.Errorf("stats %+v: want 1 step of 50 examples, 50 eval examples, 6 lookups of %d ids in all, 3 applies of %d", st, 2*distinct, distinct)
	}
	m.ResetStats()
	if st := m.Stats(); st != (Stats{}) {
		t.Errorf("stats after reset: %+v", st)
	}
}

// A store or batch error fails the step with the table or the problem named, and leaves the dense
// parameters and the step count as they were.
func TestStepErrors(t *testing.T) {
	ctx := context.Background()
	g, err := synth.New(latentLog)
	if err != nil {
		t.Fatal(err)
	}
	good := streamBatches(t, g, 1, 1, 16)[0]
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	tests := []struct {
		name  string
		ctx   context.Context
		store func(*memStore)
		batch func() *batch.Batch
		kind  errkind.Kind
		want  string
	}{
		{"lookup fails", ctx, func(s *memStore) { s.failLookup = "slot_3" }, nil, errkind.Unknown, `lookup of`},
		{"apply fails", ctx, func(s *memStore) { s.failApply = "slot_2" }, nil, errkind.Unknown, `apply of`},
		{"canceled", canceled, nil, nil, errkind.Unknown, "context canceled"},
		{"empty batch", ctx, nil, func() *batch.Batch { return &batch.Batch{DenseDim: 4} }, errkind.Value, "empty batch"},
		{"dense dim", ctx, nil, func() *batch.Batch {
			return &batch.Batch{Labels: []float32{1}, DenseDim: 3, Dense: []float32{1, 2, 3}, Fids: [][]uint64{{synth.FID(1, 1)}}}
		}, errkind.Value, "3 dense values each"},
		{"unknown slot", ctx, nil, func() *batch.Batch {
			return &batch.Batch{Labels: []float32{1}, DenseDim: 4, Dense: make([]float32, 4), Fids: [][]uint64{{synth.FID(9, 1)}}}
		}, errkind.Value, "slot 9"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			store := newMemStore(1)
			if tc.store != nil {
				tc.store(store)
			}
			m, err := New(Config{Features: slotFeatures(g, 4), DenseDim: 4}, store)
			if err != nil {
				t.Fatal(err)
			}
			before := m.Tensors()
			b := good
			if tc.batch != nil {
				b = tc.batch()
			}
			_, err = m.Step(tc.ctx, b)
			if err == nil || !strings.Contains(err.Error(), tc.want) || (tc.kind != errkind.Unknown && errkind.Of(err) != tc.kind) {
				t.Fatalf("Step: %v, want an error with %q", err, tc.want)
			}
			if tc.store != nil {
				if table := store.failLookup + store.failApply; !strings.Contains(err.Error(), table) {
					t.Errorf("error %q does not name table %s", err, table)
				}
			}
			if !sameTensors(m.Tensors(), before) || m.GlobalStep() != 0 {
				t.Error("a failed step changed the dense parameters or the step count")
			}
		})
	}
}

// meanOfTwo is an in-test allreduce of two workers: each worker's call waits for the other's,
// and both leave with the mean of their gradients.
type meanOfTwo struct {
	mu      sync.Mutex
	waiting [][]float64 // the first arrival's gradients, flattened
	done    chan []float64
}

func (a *meanOfTwo) sync(ctx context.Context, _ int64, grads [][]float64) error {
	flat := slices.Concat(grads...)
	a.mu.Lock()
	if a.waiting == nil {
		a.waiting, a.done = [][]float64{flat}, make(chan []float64, 1)
		done := a.done
		a.mu.Unlock()
		select {
		case mean := <-done:
			unflatten(grads, mean)
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	mean := make([]float64, len(flat))
	for i := range flat {
		mean[i] = (a.waiting[0][i] + flat[i]) / 2
	}
	a.done <- mean
	a.waiting = nil
	a.mu.Unlock()
	unflatten(grads, mean)
	return nil
}

func unflatten(grads [][]float64, flat []float64) {
	for _, g := range grads {
		flat = flat[copy(g, flat):]
	}
}

// Two workers with the same initial dense parameters, training on different batches over one
// store, keep identical dense parameters when SyncGradients averages their gradients, and drift
// apart without it. A failing sync fails the step before the dense update.
func TestSyncGradients(t *testing.T) {
	leakcheck.Check(t)
	g, err := synth.New(latentLog)
	if err != nil {
		t.Fatal(err)
	}
	bs := [2][]*batch.Batch{streamBatches(t, g, 1, 10, 32), streamBatches(t, g, 2, 10, 32)}
	train := func(syncGrads func(context.Context, int64, [][]float64) error) [2]*Model {
		store := newMemStore(1)
		var ms [2]*Model
		for w := range ms {
			m, err := New(Config{Features: slotFeatures(g, 4), DenseDim: 4, Seed: 1, LearningRate: 0.01, SyncGradients: syncGrads}, store)
			if err != nil {
				t.Fatal(err)
			}
			ms[w] = m
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for w, m := range ms {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, b := range bs[w] {
					if _, err := m.Step(ctx, b); err != nil {
						errs[w] = err
						return
					}
				}
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		return ms
	}
	synced := train((&meanOfTwo{}).sync)
	if !sameTensors(synced[0].Tensors(), synced[1].Tensors()) {
		t.Error("workers with averaged gradients have different dense parameters")
	}
	apart := train(nil)
	if sameTensors(apart[0].Tensors(), apart[1].Tensors()) {
		t.Error("workers without a sync have the same dense parameters: the check above shows nothing")
	}

	m, err := New(Config{Features: slotFeatures(g, 4), DenseDim: 4, SyncGradients: func(context.Context, int64, [][]float64) error {
		return errors.New("allreduce peer gone")
	}}, newMemStore(1))
	if err != nil {
		t.Fatal(err)
	}
	before := m.Tensors()
	if _, err := m.Step(context.Background(), bs[0][0]); err == nil || !strings.Contains(err.Error(), "allreduce peer gone") {
		t.Fatalf("Step with a failing sync: %v", err)
	}
	if !sameTensors(m.Tensors(), before) {
		t.Error("a failed sync changed the dense parameters")
	}
}

// TestBuckets: a feature with buckets reaches its table as slot<<48 | hashbucket.Bucket(id, n);
// the other features' ids pass through.
func TestBuckets(t *testing.T) {
	g, err := synth.New(latentLog)
	if err != nil {
		t.Fatal(err)
	}
	features := slotFeatures(g, 4)
	features[0].Buckets = 7
	cfg := Config{Features: features, DenseDim: 4, Seed: 1}
	bs := streamBatches(t, g, 1, 3, 64)
	_, _, store := trainSteps(t, cfg, bs)
	snap := store.snapshot()
	hashed := snap[features[0].Name]
	if len(hashed) == 0 || len(hashed) > 7 {
		t.Fatalf("table %s holds %d ids, want 1 to 7 buckets", features[0].Name, len(hashed))
	}
	for id := range hashed {
		if uint64(id)>>48 != 1 || uint64(id)&fidIDMask >= 7 {
			t.Fatalf("table %s holds id %#x, want slot 1 and a bucket below 7", features[0].Name, id)
		}
	}
	want := map[int64]bool{}
	for _, b := range bs {
		for _, fids := range b.Fids {
			for _, fid := range fids {
				if fid>>48 == 1 {
					want[int64(fid&^fidIDMask|hashbucket.Bucket(fid, 7))] = true
				}
			}
		}
	}
	if len(want) != len(hashed) {
		t.Fatalf("table holds %d buckets, the batches' ids fall into %d", len(hashed), len(want))
	}
	if n := len(snap[features[1].Name]); n <= 7 {
		t.Fatalf("table %s (no buckets) holds %d ids", features[1].Name, n)
	}
	if _, err := New(Config{Features: []Feature{{Name: "a", Slot: 1, Dim: 4, Buckets: hashbucket.MaxBuckets + 1}}}, store); err == nil ||
		!strings.Contains(err.Error(), "more than a fid's 48-bit id holds") {
		t.Fatalf("too many buckets: err = %v", err)
	}
}
