package optimizer

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"

	optimizerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/optimizer"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/errkind"
)

func TestNewErrors(t *testing.T) {
	for _, tc := range []struct {
		config string
		dim    int
		want   string
	}{
		{"adagrad {}", 0, "optimizer: dimension 0: want > 0"},
		{"adagrad { dim_size: 8 }", 4, "optimizer: adagrad.dim_size 8 does not match the embedding dimension 4"},
		{"ftrl { dim_size: 1 }", 2, "optimizer: ftrl.dim_size 1 does not match the embedding dimension 2"},
		{"batch_softmax {}", 4, "optimizer: batch_softmax.dim_size 4: want 1"},
		// The reference's factory: the sub-config for the two declared-but-unimplemented ones,
		// the whole config otherwise.
		{"dynamic_wd_adagrad { dim_size: 4 weight_decay_factor: 0.01 }", 4, "optimizer is not implemented yet. dim_size: 4 weight_decay_factor: 0.01"},
		{"group_ftrl { dim_size: 4 l1_regularization_strength: 0.1 }", 4, "optimizer is not implemented yet. dim_size: 4 l1_regularization_strength: 0.1"},
		{"group_ftrl {}", 4, "optimizer is not implemented yet. "},
		{"dc { dim_size: 4 }", 4, "optimizer is not implemented yet. dc { dim_size: 4 }"},
		{"", 4, "optimizer is not implemented yet. "},
		{"stochastic_rounding_float16: true", 4, "optimizer is not implemented yet. stochastic_rounding_float16: true"},
	} {
		t.Run(tc.config, func(t *testing.T) {
			o, err := New(parseConfig(t, tc.config), tc.dim)
			if err == nil || err.Error() != tc.want || errkind.Of(err) != errkind.Value {
				t.Fatalf("New = %v, %v (kind %s); want %q of kind Value", o, err, errkind.Of(err), tc.want)
			}
		})
	}
	if _, err := New(nil, 4); errkind.Of(err) != errkind.Value {
		t.Errorf("New(nil) = %v, want a Value error", err)
	}
}

func TestShapes(t *testing.T) {
	for _, tc := range []struct {
		config string
		dim    int
		name   string
		init   []float32
	}{
		{"sgd {}", 4, "Sgd(D=4)", nil},
		{"adagrad { initial_accumulator_value: 0.5 dim_size: 3 }", 3, "Adagrad(D=3)", []float32{0.5, 0.5, 0.5}},
		{"ftrl {}", 2, "Ftrl(D=2)", []float32{0.1, 0.1, 0, 0}},
		{"adam {}", 2, "Adam(D=2)", []float32{0, 0, 0, 0, 0.9, 0.99}},
		{"amsgrad { beta1: 0.5 beta2: 0.25 }", 1, "Amsgrad(D=1)", []float32{0, 0, 0, 0.5, 0.25}},
		{"momentum {}", 2, "Momentum(D=2)", []float32{0, 0}},
		{"rmsprop {}", 2, "Rmsprop(D=2)", []float32{0, 0}},
		{"rmspropv2 {}", 2, "RmspropV2(D=2)", []float32{0, 0}},
		{"adadelta {}", 2, "Adadelta(D=2)", []float32{0, 0, 0, 0}},
		{"group_adagrad {}", 5, "GroupAdaGrad(D=5)", []float32{0.1}},
		{"batch_softmax {}", 1, "BatchSoftmax(D=1)", []float32{0, 0}},
		{"moving_average {}", 3, "MovingAverage(D=3)", nil},
	} {
		t.Run(tc.config, func(t *testing.T) {
			o := mustNew(t, tc.config, tc.dim)
			if o.Dim() != tc.dim || o.StateSize() != len(tc.init) || describe(o) != tc.name {
				t.Fatalf("Dim %d StateSize %d name %s; want %d %d %s", o.Dim(), o.StateSize(), describe(o), tc.dim, len(tc.init), tc.name)
			}
			state := make([]float32, o.StateSize())
			for i := range state {
				state[i] = 42
			}
			o.Init(state)
			if !slices.Equal(state, tc.init) && !(len(state) == 0 && len(tc.init) == 0) {
				t.Errorf("Init wrote %v, want %v", state, tc.init)
			}
		})
	}
}

// TestDumpLoadRoundTrip: an entry's state survives Dump and Load exactly, and the restored entry
// goes on as the original (for Adam this covers both powers, which the reference's restore mixes up).
func TestDumpLoadRoundTrip(t *testing.T) {
	for _, tc := range float64Cases {
		dim := tc.dims[len(tc.dims)-1]
		t.Run(tc.config, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, uint64(dim)))
			o := mustNew(t, tc.config, dim)
			w, state := randomFloats(rng, dim), make([]float32, o.StateSize())
			o.Init(state)
			for step := range int64(3) {
				o.Apply(w, state, randomFloats(rng, dim), []float32{0.05}, 10+step)
			}
			d := o.Dump(state)
			b, err := proto.Marshal(d) // through the wire format, as a checkpoint stores it
			if err != nil {
				t.Fatal(err)
			}
			var back optimizerpb.OptimizerDump
			if err := proto.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			restored := make([]float32, o.StateSize())
			if err := o.Load(restored, &back); err != nil {
				t.Fatal(err)
			}
			if !sameFloats(restored, state) {
				t.Fatalf("restored state %v, want %v", restored, state)
			}
			w2 := slices.Clone(w)
			g := randomFloats(rng, dim)
			o.Apply(w, state, g, []float32{0.05}, 20)
			o.Apply(w2, restored, g, []float32{0.05}, 20)
			if !sameFloats(w, w2) || !sameFloats(state, restored) {
				t.Errorf("after restore the entry diverged: %v vs %v", w2, w)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	adagrad := mustNew(t, "adagrad {}", 4)
	adamDump := mustNew(t, "adam {}", 4).Dump(make([]float32, 10))
	short := &optimizerpb.OptimizerDump{Dump: []*optimizerpb.SingleOptimizerDump{{Type: &optimizerpb.SingleOptimizerDump_Adagrad{
		Adagrad: &optimizerpb.AdagradOptimizerDump{Norm: []float32{1, 2, 3}}}}}}
	two := &optimizerpb.OptimizerDump{Dump: append(slices.Clone(short.Dump), short.Dump...)}
	for _, tc := range []struct {
		name  string
		o     Optimizer
		state int
		d     *optimizerpb.OptimizerDump
		want  string
	}{
		{"none", adagrad, 4, nil, "optimizer Adagrad(D=4): dump has 0 entries, want 1"},
		{"two", adagrad, 4, two, "optimizer Adagrad(D=4): dump has 2 entries, want 1"},
		{"other optimizer", adagrad, 4, adamDump, "optimizer Adagrad(D=4): dump entry is adam, want adagrad"},
		{"short field", adagrad, 4, short, "optimizer Adagrad(D=4): dump field adagrad.norm has 3 values, want 4"},
		{"short state", adagrad, 3, short, "optimizer Adagrad(D=4): state of 3 floats, want 4"},
		{"moving average has none", mustNew(t, "moving_average {}", 3), 0, short, "optimizer MovingAverage(D=3): dump has 1 entries, want 0"},
		{"empty entry", mustNew(t, "sgd {}", 3), 0, &optimizerpb.OptimizerDump{Dump: []*optimizerpb.SingleOptimizerDump{{}}}, "optimizer Sgd(D=3): dump entry is empty, want sgd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Load(make([]float32, tc.state), tc.d)
			if err == nil || err.Error() != tc.want || errkind.Of(err) != errkind.Value {
				t.Fatalf("Load = %v (kind %s), want %q of kind Value", err, errkind.Of(err), tc.want)
			}
		})
	}
}

// TestCombine: a combined optimizer is its parts side by side: each part sees its own slice of the
// embedding, state and gradient and its own learning rate, and the dump lists the parts' entries.
func TestCombine(t *testing.T) {
	parts := []struct {
		config string
		dim    int
	}{{"adagrad {}", 4}, {"sgd {}", 2}, {"moving_average { momentum: 0.5 }", 3}, {"adam {}", 2}}
	var opts []Optimizer
	for _, p := range parts {
		opts = append(opts, mustNew(t, p.config, p.dim))
	}
	// Nested, to check that learning rates and dumps are split by parts, not by position.
	inner, err := Combine(opts[1], opts[2])
	if err != nil {
		t.Fatal(err)
	}
	c, err := Combine(opts[0], inner, opts[3])
	if err != nil {
		t.Fatal(err)
	}
	if c.Dim() != 11 || c.StateSize() != 4+6 || describe(c) != "Adagrad(D=4)|Sgd(D=2)|MovingAverage(D=3)|Adam(D=2)" {
		t.Fatalf("combined: Dim %d StateSize %d %s", c.Dim(), c.StateSize(), describe(c))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	w, g := randomFloats(rng, 11), randomFloats(rng, 11)
	lrs := []float32{0.1, 0.2, 0.3, 0.4}
	state := make([]float32, c.StateSize())
	c.Init(state)
	want := slices.Clone(w)
	wantState := make([]float32, c.StateSize())
	e, s := 0, 0
	for i, o := range opts {
		o.Init(wantState[s : s+o.StateSize()])
		o.Apply(want[e:e+o.Dim()], wantState[s:s+o.StateSize()], g[e:e+o.Dim()], lrs[i:i+1], 5)
		e, s = e+o.Dim(), s+o.StateSize()
	}
	c.Apply(w, state, g, lrs, 5)
	if !sameFloats(w, want) || !sameFloats(state, wantState) {
		t.Fatalf("combined update %v %v, parts give %v %v", w, state, want, wantState)
	}
	d := c.Dump(state)
	var kinds []string
	for _, e := range d.Dump {
		m := e.ProtoReflect()
		kinds = append(kinds, string(m.WhichOneof(m.Descriptor().Oneofs().ByName("type")).Name()))
	}
	if strings.Join(kinds, ",") != "adagrad,sgd,adam" {
		t.Fatalf("combined dump entries %v, want adagrad, sgd, adam (moving_average writes none)", kinds)
	}
	restored := make([]float32, c.StateSize())
	if err := c.Load(restored, d); err != nil {
		t.Fatal(err)
	}
	if !sameFloats(restored, state) {
		t.Errorf("combined restore %v, want %v", restored, state)
	}
	if err := c.Load(restored, &optimizerpb.OptimizerDump{Dump: d.Dump[:2]}); err == nil {
		t.Error("combined Load of 2 entries succeeded, want an error")
	}
	if one, err := Combine(opts[0]); err != nil || one != opts[0] {
		t.Errorf("Combine(one) = %v, %v; want it back", one, err)
	}
	if _, err := Combine(); err == nil {
		t.Error("Combine() succeeded")
	}
	if _, err := Combine(opts[0], foreign{}); err == nil {
		t.Error("Combine of a foreign Optimizer succeeded")
	}
}

type foreign struct{ Optimizer }

// TestBatchSoftmaxStep: the int64 step kept in two floats' bits survives every value, NaN patterns
// included, and a negative step panics as the reference LOG(FATAL)s.
func TestBatchSoftmaxStep(t *testing.T) {
	o := mustNew(t, "batch_softmax {}", 1)
	for _, step := range []int64{0, 1, 0x7f800001, 0x7fc00001_7f800001, -0x007fffff_00000001, math.MaxInt64, math.MinInt64} {
		state := make([]float32, 2)
		d := &optimizerpb.OptimizerDump{Dump: []*optimizerpb.SingleOptimizerDump{{Type: &optimizerpb.SingleOptimizerDump_BatchSoftmax{
			BatchSoftmax: &optimizerpb.BatchSoftmaxOptimizerDump{GlobalStep: proto.Int64(step)}}}}}
		if err := o.Load(state, d); err != nil {
			t.Fatal(err)
		}
		state = slices.Clone(state) // entries are copied when a table grows
		if got := o.Dump(state).Dump[0].GetBatchSoftmax().GetGlobalStep(); got != step {
			t.Errorf("step %#x came back as %#x", step, got)
		}
	}
	state := make([]float32, 2)
	o.Init(state)
	w := []float32{2}
	o.Apply(w, state, []float32{0}, []float32{0.5}, 10)
	if w[0] != 6 { // 0.5*2 + 0.5*(10-0)
		t.Errorf("B = %g, want 6", w[0])
	}
	defer func() {
		if recover() == nil {
			t.Error("Apply with a negative global step did not panic")
		}
	}()
	o.Apply(w, state, []float32{0}, []float32{0.5}, -1)
}

func randomFloats(rng *rand.Rand, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(rng.Float64()*2 - 1)
	}
	return out
}

func sameFloats(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}

// TestApplyConcurrent: goroutines updating different entries with one optimizer get the values a
// single goroutine gets (the optimizer holds no per-entry data), stochastic rounding's shared
// generator included as far as the race detector can tell.
func TestApplyConcurrent(t *testing.T) {
	leakcheck.Check(t)
	const workers, entries, dim = 4, 64, 16
	for _, config := range []string{"adagrad { weight_decay_factor: 0.01 }", "adam {}", "ftrl {} stochastic_rounding_float16: true"} {
		t.Run(config, func(t *testing.T) {
			o := mustNew(t, config, dim)
			slot := dim + o.StateSize()
			rng := rand.New(rand.NewPCG(9, 9))
			pool := make([]float32, workers*entries*slot)
			grads := randomFloats(rng, len(pool))
			for e := range workers * entries {
				copy(pool[e*slot:], randomFloats(rng, dim))
				o.Init(pool[e*slot+dim : (e+1)*slot])
			}
			serial := slices.Clone(pool)
			update := func(p []float32, e int) {
				s := p[e*slot : (e+1)*slot]
				o.Apply(s[:dim], s[dim:], grads[e*slot:e*slot+dim], []float32{0.1}, 3)
			}
			var wg sync.WaitGroup
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for e := w * entries; e < (w+1)*entries; e++ {
						update(pool, e)
					}
				}()
			}
			wg.Wait()
			if strings.Contains(config, "stochastic") {
				return // the draws depend on the interleaving
			}
			for e := range workers * entries {
				update(serial, e)
			}
			if !sameFloats(pool, serial) {
				t.Fatal("concurrent updates differ from serial ones")
			}
		})
	}
}
