// Package optimizer holds the per-entry optimizers of the embedding hash table: Monolith's C++
// optimizers (native_training/runtime/hash_table/optimizer/), configured by its OptimizerConfig
// proto, with the reference's update formulas computed bit for bit in float32 (see
// float32ops.go) and its OptimizerDump format for checkpoints.
//
// An entry's slot holds Dim() floats of embedding followed by StateSize() floats of optimizer
// state. The table creates one Optimizer per table (or per slice group, through Combine) and calls
// Apply for each entry; an Optimizer holds no per-entry data, so Apply may run concurrently on
// different entries.
package optimizer

import (
	"fmt"

	optimizerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/optimizer"
	"github.com/monolith-go/monolith/pkg/embedding/optimizer/cctext"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// Optimizer updates one embedding entry in place. Slot layout per entry: Dim() floats of embedding
// followed by StateSize() floats of optimizer state (both float32, contiguous).
type Optimizer interface {
	// Dim is the number of embedding floats the optimizer updates.
	Dim() int
	// StateSize is the number of floats of state per entry. The state is opaque: copy it, never
	// compute with it (BatchSoftmax keeps an int64 in two floats' bits).
	StateSize() int
	// Init writes the initial state of a new entry (len StateSize()).
	Init(state []float32)
	// Apply updates emb (len Dim()) and state with grad (len Dim()) at the learning rate(s) and
	// global step. learningRates holds one rate per optimizer (one, or one per part of a Combine).
	Apply(emb, state, grad []float32, learningRates []float32, globalStep int64)
	// Dump returns the entry's state as the reference's OptimizerDump (EntryDump.opt).
	Dump(state []float32) *optimizerpb.OptimizerDump
	// Load sets the entry's state from an OptimizerDump written by Dump (or by the reference).
	Load(state []float32, d *optimizerpb.OptimizerDump) error
}

// part is what every optimizer of this package implements besides Optimizer, so that Combine can
// split learning rates and dumps as the reference's CombinedOptimizer does.
type part interface {
	Optimizer
	// slices is the number of learning rates the optimizer takes (the reference's SliceSize).
	slices() int
	// dumps is the number of SingleOptimizerDump entries Dump writes.
	dumps() int
}

// single is an optimizer with one learning rate and one SingleOptimizerDump entry (or none).
type single interface {
	dim() int
	stateSize() int
	init(state []float32)
	apply(emb, state, grad []float32, lr float32, globalStep int64)
	// save returns the entry's dump; nil for optimizers that write none (MovingAverage, which
	// also has a writesNoDump method).
	save(state []float32) *optimizerpb.SingleOptimizerDump
	restore(state []float32, d *optimizerpb.SingleOptimizerDump) error
	String() string
}

// New returns the optimizer cfg configures, for embeddings of dim floats. The config's dim_size
// must be dim, or unset (then dim is used). Optimizers the reference's factory does not implement
// (dynamic_wd_adagrad, group_ftrl, dc, none set) are an errkind.Value error with the reference's
// message: "optimizer is not implemented yet. " and the config in ShortDebugString form.
func New(cfg *optimizerpb.OptimizerConfig, dim int) (Optimizer, error) {
	if cfg == nil {
		return nil, errkind.New(errkind.Value, "optimizer: no OptimizerConfig")
	}
	if dim <= 0 {
		return nil, errkind.New(errkind.Value, "optimizer: dimension %d: want > 0", dim)
	}
	var s single
	switch t := cfg.GetType().(type) {
	case *optimizerpb.OptimizerConfig_DynamicWdAdagrad:
		// The reference declares these two but its constructors throw.
		return nil, notImplemented(cctext.ShortFormat(t.DynamicWdAdagrad))
	case *optimizerpb.OptimizerConfig_GroupFtrl:
		return nil, notImplemented(cctext.ShortFormat(t.GroupFtrl))
	case nil, *optimizerpb.OptimizerConfig_Dc:
		// dc is a decorator the factory does not build.
		return nil, notImplemented(cctext.ShortFormat(cfg))
	}
	if err := checkDim(cfg, dim); err != nil {
		return nil, err
	}
	switch t := cfg.GetType().(type) {
	case *optimizerpb.OptimizerConfig_Sgd:
		s = newSgd(t.Sgd, dim)
	case *optimizerpb.OptimizerConfig_Adagrad:
		s = newAdagrad(t.Adagrad, dim)
	case *optimizerpb.OptimizerConfig_Ftrl:
		s = newFtrl(t.Ftrl, dim)
	case *optimizerpb.OptimizerConfig_Adadelta:
		s = newAdadelta(t.Adadelta, dim)
	case *optimizerpb.OptimizerConfig_Adam:
		s = newAdam(t.Adam, dim)
	case *optimizerpb.OptimizerConfig_Amsgrad:
		s = newAmsgrad(t.Amsgrad, dim)
	case *optimizerpb.OptimizerConfig_Momentum:
		s = newMomentum(t.Momentum, dim)
	case *optimizerpb.OptimizerConfig_MovingAverage:
		s = newMovingAverage(t.MovingAverage, dim)
	case *optimizerpb.OptimizerConfig_Rmsprop:
		s = newRmsprop(t.Rmsprop, dim)
	case *optimizerpb.OptimizerConfig_Rmspropv2:
		s = newRmspropV2(t.Rmspropv2, dim)
	case *optimizerpb.OptimizerConfig_GroupAdagrad:
		s = newGroupAdagrad(t.GroupAdagrad, dim)
	case *optimizerpb.OptimizerConfig_BatchSoftmax:
		var err error
		if s, err = newBatchSoftmax(dim); err != nil {
			return nil, err
		}
	default:
		return nil, notImplemented(cctext.ShortFormat(cfg)) // a oneof case added to the proto later
	}
	var o part = &wrapped{s: s}
	if cfg.GetStochasticRoundingFloat16() {
		o = newStochasticRounding(o)
	}
	return o, nil
}

func notImplemented(config string) error {
	return errkind.New(errkind.Value, "optimizer is not implemented yet. %s", config)
}

// checkDim checks the set optimizer config's dim_size (when set) against the table's dimension.
func checkDim(cfg *optimizerpb.OptimizerConfig, dim int) error {
	m := cfg.ProtoReflect()
	fd := m.WhichOneof(m.Descriptor().Oneofs().ByName("type"))
	sub := m.Get(fd).Message()
	dimSize := sub.Descriptor().Fields().ByName("dim_size")
	if sub.Has(dimSize) && sub.Get(dimSize).Int() != int64(dim) {
		return errkind.New(errkind.Value, "optimizer: %s.dim_size %d does not match the embedding dimension %d", fd.Name(), sub.Get(dimSize).Int(), dim)
	}
	return nil
}

// wrapped adapts a single optimizer to Optimizer.
type wrapped struct{ s single }

func (w *wrapped) Dim() int             { return w.s.dim() }
func (w *wrapped) StateSize() int       { return w.s.stateSize() }
func (w *wrapped) Init(state []float32) { w.s.init(state[:w.s.stateSize()]) }
func (w *wrapped) String() string       { return w.s.String() }
func (w *wrapped) slices() int          { return 1 }

func (w *wrapped) dumps() int {
	if _, none := w.s.(interface{ writesNoDump() }); none {
		return 0
	}
	return 1
}

func (w *wrapped) Apply(emb, state, grad []float32, learningRates []float32, globalStep int64) {
	d := w.s.dim()
	w.s.apply(emb[:d], state[:w.s.stateSize()], grad[:d], learningRates[0], globalStep)
}

func (w *wrapped) Dump(state []float32) *optimizerpb.OptimizerDump {
	d := &optimizerpb.OptimizerDump{}
	if one := w.s.save(state[:w.s.stateSize()]); one != nil {
		d.Dump = append(d.Dump, one)
	}
	return d
}

func (w *wrapped) Load(state []float32, d *optimizerpb.OptimizerDump) error {
	if len(state) < w.s.stateSize() {
		return errkind.New(errkind.Value, "optimizer %s: state of %d floats, want %d", w.s, len(state), w.s.stateSize())
	}
	want := w.dumps()
	if got := len(d.GetDump()); got != want {
		return errkind.New(errkind.Value, "optimizer %s: dump has %d entries, want %d", w.s, got, want)
	}
	if want == 0 {
		return nil
	}
	if err := w.s.restore(state[:w.s.stateSize()], d.GetDump()[0]); err != nil {
		return fmt.Errorf("optimizer %s: %w", w.s, err)
	}
	return nil
}

// wrongDump is the error of a dump entry of another optimizer.
func wrongDump(want string, d *optimizerpb.SingleOptimizerDump) error {
	got := "empty"
	m := d.ProtoReflect()
	if fd := m.WhichOneof(m.Descriptor().Oneofs().ByName("type")); fd != nil {
		got = string(fd.Name())
	}
	return errkind.New(errkind.Value, "dump entry is %s, want %s", got, want)
}

// checkLen checks a repeated dump field's length.
func checkLen(field string, got, want int) error {
	if got != want {
		return errkind.New(errkind.Value, "dump field %s has %d values, want %d", field, got, want)
	}
	return nil
}
