package optimizer

import (
	"fmt"

	optimizerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/optimizer"
)

// sgd is plain gradient descent: w -= lr * g. No state.
type sgd struct{ d int }

func newSgd(_ *optimizerpb.SgdOptimizerConfig, d int) single {
	return &sgd{d: d}
}

func (o *sgd) dim() int             { return o.d }
func (o *sgd) stateSize() int       { return 0 }
func (o *sgd) init(state []float32) {}
func (o *sgd) String() string       { return fmt.Sprintf("Sgd(D=%d)", o.d) }

func (o *sgd) apply(emb, _, grad []float32, lr float32, _ int64) {
	for i := range emb {
		emb[i] -= float32(lr * grad[i])
	}
}

func (o *sgd) save([]float32) *optimizerpb.SingleOptimizerDump {
	return &optimizerpb.SingleOptimizerDump{Type: &optimizerpb.SingleOptimizerDump_Sgd{Sgd: &optimizerpb.SgdOptimizerDump{}}}
}

func (o *sgd) restore(_ []float32, d *optimizerpb.SingleOptimizerDump) error {
	if d.GetSgd() == nil {
		return wrongDump("sgd", d)
	}
	return nil
}

// movingAverage keeps an exponential moving average of the "gradients" it is given:
// w = momentum*w + (1-momentum)*g. No state, and no dump entry (as the reference).
type movingAverage struct {
	d        int
	momentum float32
}

func newMovingAverage(c *optimizerpb.MovingAverageOptimizerConfig, d int) single {
	return &movingAverage{d: d, momentum: c.GetMomentum()}
}

func (o *movingAverage) dim() int             { return o.d }
func (o *movingAverage) stateSize() int       { return 0 }
func (o *movingAverage) init(state []float32) {}
func (o *movingAverage) writesNoDump()        {}
func (o *movingAverage) String() string       { return fmt.Sprintf("MovingAverage(D=%d)", o.d) }

func (o *movingAverage) apply(emb, _, grad []float32, _ float32, _ int64) {
	keep := 1 - o.momentum
	for i := range emb {
		emb[i] = float32(o.momentum*emb[i]) + float32(keep*grad[i])
	}
}

func (o *movingAverage) save([]float32) *optimizerpb.SingleOptimizerDump { return nil }

func (o *movingAverage) restore([]float32, *optimizerpb.SingleOptimizerDump) error { return nil }
