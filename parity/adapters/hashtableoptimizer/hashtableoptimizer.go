// Package hashtableoptimizer adapts pkg/embedding/optimizer to the parity cases of the reference's
// C++ embedding-table optimizers (module native_training/hash_table_optimizer): an optimizer built
// from an OptimizerConfig text proto updates one entry over several steps, then saves its state.
package hashtableoptimizer

import (
	"encoding/json"
	"fmt"
	"strconv"

	"google.golang.org/protobuf/encoding/prototext"

	optimizerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/optimizer"
	"github.com/monolith-go/monolith/parity/harness"
	"github.com/monolith-go/monolith/pkg/embedding/optimizer"
	"github.com/monolith-go/monolith/pkg/embedding/optimizer/cctext"
)

// Call is the golden call this package replays.
const Call = "Optimizer(config).Init+Optimize(steps)+Save"

// Register adds the call.
func Register(r *harness.Registry) { r.Register(Call, Run) }

// step is one Optimize call of a case. Floats are the goldens' %.9g literals, read as float32.
type step struct {
	GlobalStep    int64         `json:"global_step"`
	Grad          []json.Number `json:"grad"`
	LearningRates []json.Number `json:"learning_rates"`
}

// Run builds the optimizer, initializes an entry with num_init, applies the steps and returns num
// after each step (as %.9g literals, the goldens' form) and the final dump in C++ TextFormat.
func Run(_ *harness.Ctx, in harness.Input) (any, error) {
	text, err := in.Str("config_text")
	if err != nil {
		return nil, err
	}
	var cfg optimizerpb.OptimizerConfig
	if err := prototext.Unmarshal([]byte(text), &cfg); err != nil {
		return nil, &harness.InputError{Key: "config_text", Msg: err.Error()}
	}
	dim, err := in.Int("dim")
	if err != nil {
		return nil, err
	}
	var rawNum []json.Number
	if err := in.Decode("num_init", &rawNum); err != nil {
		return nil, err
	}
	num, err := floats("num_init", rawNum)
	if err != nil {
		return nil, err
	}
	var steps []step
	if err := in.Decode("steps", &steps); err != nil {
		return nil, err
	}
	opt, err := optimizer.New(&cfg, dim)
	if err != nil {
		return nil, err
	}
	if len(num) != opt.Dim() {
		return nil, &harness.InputError{Key: "num_init", Msg: fmt.Sprintf("%d values, want %d", len(num), opt.Dim())}
	}
	state := make([]float32, opt.StateSize())
	opt.Init(state)
	after := make([][]json.Number, 0, len(steps))
	for i, s := range steps {
		key := fmt.Sprintf("steps[%d]", i)
		grad, err := floats(key+".grad", s.Grad)
		if err != nil {
			return nil, err
		}
		lrs, err := floats(key+".learning_rates", s.LearningRates)
		if err != nil {
			return nil, err
		}
		if len(grad) != opt.Dim() || len(lrs) == 0 {
			return nil, &harness.InputError{Key: key, Msg: fmt.Sprintf("%d gradients and %d rates, want %d and at least 1", len(grad), len(lrs), opt.Dim())}
		}
		opt.Apply(num, state, grad, lrs, s.GlobalStep)
		after = append(after, literals(num))
	}
	return map[string]any{
		"dump_text":      cctext.Format(opt.Dump(state)),
		"num_after_step": after,
	}, nil
}

func floats(key string, raw []json.Number) ([]float32, error) {
	out := make([]float32, len(raw))
	for i, r := range raw {
		f, err := strconv.ParseFloat(string(r), 32)
		if err != nil {
			return nil, &harness.InputError{Key: key, Msg: err.Error()}
		}
		out[i] = float32(f)
	}
	return out, nil
}

// literals writes floats as C's %.9g, the goldens' form (an integral value has no fraction).
func literals(v []float32) []json.Number {
	out := make([]json.Number, len(v))
	for i, f := range v {
		out[i] = json.Number(strconv.FormatFloat(float64(f), 'g', 9, 64))
	}
	return out
}
