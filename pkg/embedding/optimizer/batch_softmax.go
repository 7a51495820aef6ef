package optimizer

import (
	"fmt"
	"math"

	optimizerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/optimizer"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// batchSoftmax estimates, for each item id, the number of steps between its occurrences (the
// sampling correction of batch softmax): B = (1-alpha)*B + alpha*(global_step - A); A = global_step,
// with alpha the learning rate and B the entry's only number. State: A, the int64 global step of the
// last update, kept in the bits of two float32 slots (low word first).
type batchSoftmax struct{}

func newBatchSoftmax(dim int) (single, error) {
	// The reference DCHECKs dim_size == 1 and reads num[0] only.
	if dim != 1 {
		return nil, errkind.New(errkind.Value, "optimizer: batch_softmax.dim_size %d: want 1", dim)
	}
	return batchSoftmax{}, nil
}

func (batchSoftmax) dim() int       { return 1 }
func (batchSoftmax) stateSize() int { return 2 }
func (batchSoftmax) String() string { return "BatchSoftmax(D=1)" }

func (batchSoftmax) init(state []float32) { putInt64(state, 0) }

// apply panics on a negative global step, where the reference LOG(FATAL)s: callers check steps.
func (batchSoftmax) apply(w, state, _ []float32, alpha float32, globalStep int64) {
	if globalStep < 0 {
		panic(fmt.Sprintf("optimizer: BatchSoftmax: global_step=%d is negative", globalStep))
	}
	last := getInt64(state)
	w[0] = float32((1-alpha)*w[0]) + float32(alpha*float32(globalStep-last))
	putInt64(state, globalStep)
}

func (batchSoftmax) save(state []float32) *optimizerpb.SingleOptimizerDump {
	a := getInt64(state)
	return &optimizerpb.SingleOptimizerDump{Type: &optimizerpb.SingleOptimizerDump_BatchSoftmax{
		BatchSoftmax: &optimizerpb.BatchSoftmaxOptimizerDump{GlobalStep: &a}}}
}

func (batchSoftmax) restore(state []float32, d *optimizerpb.SingleOptimizerDump) error {
	b := d.GetBatchSoftmax()
	if b == nil {
		return wrongDump("batch_softmax", d)
	}
	putInt64(state, b.GetGlobalStep())
	return nil
}

func putInt64(state []float32, v int64) {
	state[0] = math.Float32frombits(uint32(uint64(v)))
	state[1] = math.Float32frombits(uint32(uint64(v) >> 32))
}

func getInt64(state []float32) int64 {
	return int64(uint64(math.Float32bits(state[0])) | uint64(math.Float32bits(state[1]))<<32)
}
