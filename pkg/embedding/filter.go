package embedding

import (
	"math"
	"math/rand/v2"
	"sync"

	hashtablepb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// Container is the view of a table a filter may consult.
type Container interface {
	Contains(id int64) bool
}

// EntryFilter decides whether an id that has no entry yet may get one. The table asks it once
// per batch for each such id, with the id's number of occurrences in the batch.
type EntryFilter interface {
	ShouldBeFiltered(id int64, count int64, table Container) bool
}

// Filter is one of the reference's hash filters (runtime/hash_filter/filter.h): it counts how
// often ids are seen, saturating at MaxCount, and holds an id back while its count is below the
// occurrence threshold of its slot.
type Filter interface {
	// Add counts count more occurrences of fid and returns its count before them.
	Add(fid uint64, count uint32) uint32
	// Get returns fid's count.
	Get(fid uint64) uint32
	// ShouldBeFiltered counts count occurrences of fid and reports whether it stays out of table
	// with this threshold (a threshold <= 0 never filters, for the counting filters).
	ShouldBeFiltered(fid int64, count, threshold int64, table Container) bool
	// SplitNum is how many parts the filter saves (0: nothing to save).
	SplitNum() int
}

// countBits is how many low bits of a filter cell hold the count; the rest hold a signature of
// the id.
const countBits = 4

// MaxCount is the count at which the counting filters saturate (Filter::max_count).
const MaxCount = 1<<countBits - 1

// SlotFilter is a Filter with per-slot occurrence thresholds (the reference's HashFilterTfBridge):
// the threshold of an id is its v2 slot's, from a SlotOccurrenceThresholdConfig.
type SlotFilter struct {
	filter     Filter
	thresholds []int32
}

// NewSlotFilter returns filter with the thresholds of cfg (nil: every slot's is 0, which lets
// every id through the counting filters).
func NewSlotFilter(filter Filter, cfg *hashtablepb.SlotOccurrenceThresholdConfig) (*SlotFilter, error) {
	th := make([]int32, maxSlotNumber)
	def := int32(cfg.GetDefaultOccurrenceThreshold())
	for i := range th {
		th[i] = def
	}
	for _, so := range cfg.GetSlotOccurrenceThresholds() {
		if so.GetSlot() >= maxSlotNumber {
			return nil, errkind.New(errkind.Value, "slot occurrence threshold: slot %d, want < %d", so.GetSlot(), maxSlotNumber)
		}
		th[so.GetSlot()] = int32(so.GetOccurrenceThreshold())
	}
	return &SlotFilter{filter: filter, thresholds: th}, nil
}

// Threshold is id's occurrence threshold.
func (f *SlotFilter) Threshold(id int64) int64 { return int64(f.thresholds[SlotIDv2(id)]) }

// ShouldBeFiltered counts count occurrences of id and reports whether it stays out of table.
func (f *SlotFilter) ShouldBeFiltered(id int64, count int64, table Container) bool {
	return f.filter.ShouldBeFiltered(id, count, f.Threshold(id), table)
}

// InterceptGradient zeroes the gradient rows (grads[i*dim:(i+1)*dim]) of the ids the filter holds
// back, counting one occurrence of each (MonolithHashFilterInterceptGradientGradient, behind
// hash_filter_ops.intercept_gradient). It asks the filter without a table, as the reference does,
// so the probabilistic filter lets everything through here.
func (f *SlotFilter) InterceptGradient(ids []int64, grads []float32) error {
	if len(ids) == 0 {
		return nil
	}
	if len(grads)%len(ids) != 0 {
		return errkind.New(errkind.Value, "intercept gradient: %d gradient values for %d ids", len(grads), len(ids))
	}
	dim := len(grads) / len(ids)
	for i, id := range ids {
		if f.ShouldBeFiltered(id, 1, nil) {
			clear(grads[i*dim : (i+1)*dim])
		}
	}
	return nil
}

// Filter is the underlying filter.
func (f *SlotFilter) Filter() Filter { return f.filter }

// DummyFilter lets every id through (DummyHashFilter, for enable_hash_filter=False).
type DummyFilter struct{}

func (DummyFilter) Add(uint64, uint32) uint32                            { return MaxCount }
func (DummyFilter) Get(uint64) uint32                                    { return MaxCount }
func (DummyFilter) ShouldBeFiltered(int64, int64, int64, Container) bool { return false }
func (DummyFilter) SplitNum() int                                        { return 0 }

// ProbabilisticFilter admits an id at random with a probability growing with its count, keeping
// no state (ProbabilisticFilter). With equalProbability each occurrence has the same chance
// p = 1 - 0.05^(1/threshold), so an id seen threshold times is admitted with probability 0.95;
// otherwise the chance is count/threshold.
type ProbabilisticFilter struct {
	equalProbability bool
	mu               sync.Mutex
	rand32           func() uint32
}

// NewProbabilisticFilter returns a probabilistic filter drawing from rng (nil: a randomly seeded
// generator, as the reference seeds from the clock).
func NewProbabilisticFilter(equalProbability bool, rng *rand.Rand) *ProbabilisticFilter {
	if rng == nil {
		rng = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	return &ProbabilisticFilter{equalProbability: equalProbability, rand32: rng.Uint32}
}

func (*ProbabilisticFilter) Add(uint64, uint32) uint32 { return MaxCount }
func (*ProbabilisticFilter) Get(uint64) uint32         { return MaxCount }
func (*ProbabilisticFilter) SplitNum() int             { return 0 }

func (f *ProbabilisticFilter) draw() uint32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rand32()
}

// ShouldBeFiltered decides only for ids the table does not hold; without a table it never
// filters.
func (f *ProbabilisticFilter) ShouldBeFiltered(fid int64, count, threshold int64, table Container) bool {
	if table == nil || table.Contains(fid) {
		return false
	}
	if f.equalProbability {
		return !f.insertedEqualProbability(count, threshold)
	}
	return !f.insertedUnequalProbability(count, threshold)
}

// insertedUnequalProbability: rand32 * threshold < UINT32_MAX * count, in int64 as the reference
// computes it.
func (f *ProbabilisticFilter) insertedUnequalProbability(count, threshold int64) bool {
	return int64(f.draw())*threshold < int64(math.MaxUint32)*count
}

// insertedEqualProbability: p is computed in float32 (powf), the chance of count tries in double,
// as the reference's overloads of std::pow do.
func (f *ProbabilisticFilter) insertedEqualProbability(count, threshold int64) bool {
	const epsilon float32 = 0.05
	p := 1 - float32(math.Pow(float64(epsilon), float64(1/float32(threshold))))
	chance := 1 - math.Pow(float64(1-p), float64(count))
	return float64(f.draw()) < float64(math.MaxUint32)*chance
}

// FilterType names a hash filter (hash_filter_ops.FilterType).
type FilterType string

// The filter types of hash_filter_ops.FilterType.
const (
	SlidingHashFilterType   FilterType = "sliding_hash_filter"
	ProbabilisticFilterType FilterType = "probabilistic_filter"
	NoFilterType            FilterType = "no_filter"
)

// FilterOptions configures NewFilter (hash_filter_ops._create_hash_filter's arguments).
type FilterOptions struct {
	// Enable off gives the dummy filter whatever Type says (enable_hash_filter).
	Enable bool
	Type   FilterType
	// Capacity and SplitNum size the sliding filter (0: HashFilterCapacity, HashFilterSplitNum;
	// bounds: CheckSlidingFilter).
	Capacity uint64
	SplitNum int
	// EqualProbability picks the probabilistic filter's rule.
	EqualProbability bool
	// Thresholds are the per-slot occurrence thresholds (the serialized config of the ops).
	Thresholds *hashtablepb.SlotOccurrenceThresholdConfig
}

// NewFilter returns the filter opts describe with its thresholds (_create_hash_filter): a
// sliding hash filter, a probabilistic filter or the dummy filter; an unknown type is an error
// of kind Value, as the reference's ValueError, and so is a sliding filter's shape past its
// bounds (CheckSlidingFilter: at most MaxFilterSplitNum splits of MaxFilterSplitCapacity ids).
func NewFilter(opts FilterOptions) (*SlotFilter, error) {
	var f Filter
	switch {
	case !opts.Enable || opts.Type == NoFilterType:
		f = DummyFilter{}
	case opts.Type == SlidingHashFilterType:
		capacity, split := opts.Capacity, opts.SplitNum
		if capacity == 0 {
			capacity = HashFilterCapacity
		}
		if split == 0 {
			split = HashFilterSplitNum
		}
		if split < 0 {
			return nil, errkind.New(errkind.Value, "sliding hash filter: split_num %d, want 0 (the default, %d) to %d", split, HashFilterSplitNum, MaxFilterSplitNum)
		}
		if _, err := CheckSlidingFilter(capacity, split); err != nil {
			return nil, err
		}
		f = NewSlidingHashFilter(capacity, split)
	case opts.Type == ProbabilisticFilterType:
		f = NewProbabilisticFilter(opts.EqualProbability, nil)
	default:
		return nil, errkind.New(errkind.Value, "Invalid filter type, please investigate and retry! (%q)", opts.Type)
	}
	return NewSlotFilter(f, opts.Thresholds)
}

// NewFilters returns one filter per parameter server, or one when psNum is 0
// (create_hash_filters).
func NewFilters(psNum int, opts FilterOptions) ([]*SlotFilter, error) {
	out := make([]*SlotFilter, max(psNum, 1))
	for i := range out {
		f, err := NewFilter(opts)
		if err != nil {
			return nil, err
		}
		out[i] = f
	}
	return out, nil
}
