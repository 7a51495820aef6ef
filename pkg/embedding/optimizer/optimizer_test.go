package optimizer

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"

	optimizerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/optimizer"
)

func parseConfig(t testing.TB, text string) *optimizerpb.OptimizerConfig {
	t.Helper()
	var c optimizerpb.OptimizerConfig
	if err := prototext.Unmarshal([]byte(text), &c); err != nil {
		t.Fatalf("config %q: %v", text, err)
	}
	return &c
}

func mustNew(t testing.TB, text string, dim int) Optimizer {
	t.Helper()
	o, err := New(parseConfig(t, text), dim)
	if err != nil {
		t.Fatalf("New(%s, %d): %v", text, dim, err)
	}
	return o
}

// float64Cases are the configs checked against the float64 references, with the dimensions to
// check (12 and 16 cover Adagrad's 8-wide blocks with and without a scalar tail).
var float64Cases = []struct {
	config string
	dims   []int
}{
	{"sgd {}", []int{1, 4, 12}},
	{"adagrad {}", []int{1, 4, 12, 16}},
	{"adagrad { weight_decay_factor: 0.1 initial_accumulator_value: 0.5 }", []int{1, 12, 16}},
	{"ftrl {}", []int{1, 4}},
	{"ftrl { l1_regularization_strength: 0.05 l2_regularization_strength: 1 beta: 0.5 }", []int{4, 16}},
	{"adam {}", []int{1, 4}},
	{"adam { beta1: 0.8 beta2: 0.999 epsilon: 1e-3 use_nesterov: true weight_decay_factor: 0.01 }", []int{4, 16}},
	{"amsgrad {}", []int{1, 4}},
	{"amsgrad { use_nesterov: true weight_decay_factor: 0.1 }", []int{4, 12}},
	{"momentum {}", []int{1, 4}},
	{"momentum { use_nesterov: true momentum: 0.5 weight_decay_factor: 0.01 }", []int{4, 12}},
	{"rmsprop {}", []int{1, 4}},
	{"rmsprop { momentum: 0.5 weight_decay_factor: 0.2 learning_rate: 0.1 }", []int{4, 16}},
	{"rmspropv2 {}", []int{1, 4}},
	{"rmspropv2 { momentum: 0.5 weight_decay_factor: 0.2 }", []int{4, 16}},
	{"adadelta {}", []int{1, 4}},
	{"adadelta { averaging_ratio: 0.5 epsilon: 1e-6 weight_decay_factor: 0.1 }", []int{4, 16}},
	{"group_adagrad {}", []int{1, 4}},
	{"group_adagrad { l2_regularization_strength: 0.5 beta: 1 weight_decay_factor: 0.1 }", []int{4, 16}},
	{"group_adagrad { l2_regularization_strength: 1000 }", []int{4}}, // the group is zeroed
	{"batch_softmax {}", []int{1}},
	{"moving_average { momentum: 0.8 }", []int{1, 4}},
}

// TestAgainstFloat64Reference runs each optimizer several steps and compares every value with a
// straightforward float64 implementation of the reference's formula, within float32 tolerance.
func TestAgainstFloat64Reference(t *testing.T) {
	const steps = 6
	rates := []float32{0.01, 0.05, 0.1, 0.02, 0.3, 0.2}
	for ci, tc := range float64Cases {
		for _, dim := range tc.dims {
			t.Run(fmt.Sprintf("%s/d%d", tc.config, dim), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(ci), uint64(dim)))
				cfg := parseConfig(t, tc.config)
				o := mustNew(t, tc.config, dim)
				ref := newRef(cfg, dim)
				w := make([]float32, dim)
				w64 := make([]float64, dim)
				for i := range w {
					w[i] = float32(rng.Float64()*2 - 1)
					w64[i] = float64(w[i])
				}
				state := make([]float32, o.StateSize())
				o.Init(state)
				step := int64(0)
				for s := range steps {
					grad := make([]float32, dim)
					grad64 := make([]float64, dim)
					for i := range grad {
						grad[i] = float32(rng.Float64()*2 - 1)
						grad64[i] = float64(grad[i])
					}
					step += 1 + rng.Int64N(5)
					lr := rates[s]
					o.Apply(w, state, grad, []float32{lr}, step)
					ref(w64, grad64, float64(lr), step)
					for i := range w {
						if !closeTo(w[i], w64[i]) {
							t.Fatalf("step %d value %d: got %.9g, float64 reference %.9g", s+1, i, w[i], w64[i])
						}
					}
				}
			})
		}
	}
}

// closeTo is float32 tolerance for a few steps of float32 arithmetic.
func closeTo(got float32, want float64) bool {
	return math.Abs(float64(got)-want) <= 1e-6+2e-5*math.Abs(want)
}
