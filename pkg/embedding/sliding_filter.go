package embedding

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/protobuf/proto"

	hashtablepb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// hashFilter is the reference's HashFilter<uint16_t>: an open-addressing array of 16-bit cells,
// each a 12-bit signature of an id and a 4-bit saturating count. Different ids with the same
// signature that probe to the same cell share a count; that is the price of its size (2 bytes
// per id).
type hashFilter struct {
	cells        []uint16
	failureCount uint64
	totalSize    uint64
	numElements  uint64
	capacity     uint64
	fillRate     float64
}

// hashFilterMaxStep is HashFilter's own probe limit (and the slack after totalSize cells).
const hashFilterMaxStep = 64

// kMaxNumPerTfRecord: cells per data record of a filter dump.
const filterCellsPerRecord = 10000

// signMask keeps the signature bits of a cell.
const signMask = (1<<16 - 1) >> countBits

func newHashFilter(capacity uint64, fillRate float64) *hashFilter {
	total := uint64(float64(capacity) * fillRate)
	return &hashFilter{
		cells:     make([]uint16, total+hashFilterMaxStep),
		totalSize: total,
		capacity:  capacity,
		fillRate:  fillRate,
	}
}

// signature is HashFilter::signature.
func signature(fid uint64) uint16 { return uint16((fid>>17 | fid<<15) & signMask) }

// find returns the cell holding fid, or the empty cell where it would go, within maxStep cells
// of its home; -1 when there is none.
func (f *hashFilter) find(fid uint64, maxStep int) int {
	// The reference hashes with absl::Hash, which is seeded per process; any good hash will do
	// as long as save and restore agree, so this uses the table's.
	sign := signature(fid)
	p := int(mix(int64(fid)) % f.totalSize)
	for step := 0; step < maxStep; step++ {
		if v := f.cells[p]; v == 0 || v>>countBits == sign {
			return p
		}
		p++
		if p == len(f.cells) {
			p = 0
		}
	}
	return -1
}

// addAt adds count to cell p (HashFilterIterator::add) and returns the count before.
func (f *hashFilter) addAt(p int, sign uint16, count uint32) uint32 {
	count = min(count, MaxCount)
	v := f.cells[p]
	if v == 0 {
		f.numElements++
		if f.numElements > f.capacity {
			f.numElements = f.capacity
		}
		f.cells[p] = sign<<countBits + uint16(count)
		return 0
	}
	old := uint32(v & MaxCount)
	if old+count >= MaxCount {
		f.cells[p] |= MaxCount
	} else {
		f.cells[p] += uint16(count)
	}
	return old
}

// getAt is the count of cell p, MaxCount when there is no cell (p < 0).
func (f *hashFilter) getAt(p int) uint32 {
	if p < 0 {
		return MaxCount
	}
	return uint32(f.cells[p] & MaxCount)
}

func (f *hashFilter) full() bool { return f.numElements >= f.capacity-1 }

func (f *hashFilter) clear() {
	clear(f.cells)
	f.numElements = 0
	f.failureCount = 0
}

// save writes the meta record and the data records of the filter (HashFilter<uint16_t>::Save),
// until ctx ends.
func (f *hashFilter) save(ctx context.Context, meta *hashtablepb.SlidingHashFilterMetaDump, write func(proto.Message) error) error {
	if err := write(&hashtablepb.HashFilterSplitMetaDump{
		FailureCount:          proto.Uint64(f.failureCount),
		TotalSize:             proto.Uint64(f.totalSize),
		NumElements:           proto.Uint64(f.numElements),
		FillRate:              proto.Float64(f.fillRate),
		SlidingHashFilterMeta: meta,
	}); err != nil {
		return err
	}
	for start := 0; start < len(f.cells); start += filterCellsPerRecord {
		if err := ctx.Err(); err != nil {
			return err
		}
		end := min(start+filterCellsPerRecord, len(f.cells))
		data := make([]uint32, end-start)
		for i, v := range f.cells[start:end] {
			data[i] = uint32(v)
		}
		if err := write(&hashtablepb.HashFilterSplitDataDump{Offset: proto.Uint32(uint32(start)), Data: data}); err != nil {
			return err
		}
	}
	return nil
}

// restore sets the filter from a meta record and then data records from next (false at the end).
func (f *hashFilter) restore(meta *hashtablepb.HashFilterSplitMetaDump, next func() (*hashtablepb.HashFilterSplitDataDump, error)) error {
	// The split keeps its size: a dump of another size is of a filter of another capacity (and
	// its size, read from a file, must not decide an allocation).
	if meta.GetTotalSize() != f.totalSize {
		return errkind.New(errkind.Value, "hash filter meta: total size %d, this filter's splits have %d cells (was the filter's capacity changed?)",
			meta.GetTotalSize(), f.totalSize)
	}
	f.failureCount = meta.GetFailureCount()
	f.numElements = meta.GetNumElements()
	f.fillRate = meta.GetFillRate()
	clear(f.cells)
	for {
		d, err := next()
		if err != nil {
			return err
		}
		if d == nil {
			return nil
		}
		off := int(d.GetOffset())
		if off+len(d.GetData()) > len(f.cells) {
			return errkind.New(errkind.Value, "hash filter data: %d cells at offset %d, the filter has %d", len(d.GetData()), off, len(f.cells))
		}
		for i, v := range d.GetData() {
			f.cells[off+i] = uint16(v)
		}
	}
}

// Sliding filter constants (SlidingHashFilter): an id is looked for in the head split and the one
// after it, and its old count in the splits behind the head.
const (
	slidingMaxForwardStep = 2
	slidingMaxStep        = 16
	// minSlidingSplits and minSlidingCapacity are the floors the reference's constructor applies.
	minSlidingSplits   = 5
	minSlidingCapacity = 300
)

// SlidingHashFilter is the reference's sliding hash filter (sliding_hash_filter.cc): a ring of
// hash filters of which the head takes new ids; when it is full the head moves on and the oldest
// split is cleared, so ids not seen for a while are forgotten while recent counts carry over to
// the new head. Safe for concurrent use (the reference's was not).
type SlidingHashFilter struct {
	mu              sync.Mutex
	capacity        uint64
	maxBackwardStep int
	filters         []*hashFilter
	head            int
	headIncrement   int
	failureCount    uint64
}

// Bounds of a sliding filter's shape.
const (
	// MaxFilterSplitNum is the most splits a sliding filter may have. An id seen for the first
	// time in the head split is looked for in up to split_num-2 splits behind it
	// (max_backward_step), so every split more slows down each new id, and each split is a file of
	// the dump; the reference's default is 7 (HASH_FILTER_SPLIT_NUM), its floor 5.
	MaxFilterSplitNum = 64
	// MaxFilterSplitCapacity is the most ids one split may be sized for: its cells (1.2 per id,
	// plus the probe's slack) are addressed by the uint32 offsets of its dump's data records
	// (HashFilterSplitDataDump.offset), so a split has at most 1<<32 cells. A filter's capacity is
	// shared by split_num-1 splits: see MaxFilterCapacity.
	MaxFilterSplitCapacity = uint64((1<<32 - hashFilterMaxStep) / slidingFillRate)
)

// slidingFillRate is the cells per id of a split (the reference's fill rate).
const slidingFillRate = 1.2

// slidingShape is the capacity and split count a sliding filter of capacity and splitNum gets
// (the reference's floors), and the capacity of each split.
func slidingShape(capacity uint64, splitNum int) (uint64, int, uint64) {
	capacity = max(capacity, minSlidingCapacity)
	splitNum = max(splitNum, minSlidingSplits)
	// max_forward_step - 1 splits are kept empty for looking forward.
	return capacity, splitNum, capacity / uint64(splitNum-slidingMaxForwardStep+1)
}

// MaxFilterCapacity is the largest capacity of a sliding filter of splitNum splits (after the
// floor of 5; at most MaxFilterSplitNum): split_num-1 splits of MaxFilterSplitCapacity ids.
func MaxFilterCapacity(splitNum int) uint64 {
	_, splitNum, _ = slidingShape(0, min(splitNum, MaxFilterSplitNum))
	return MaxFilterSplitCapacity * uint64(splitNum-slidingMaxForwardStep+1)
}

// CheckSlidingFilter reports what is wrong with the shape of a sliding filter of capacity ids in
// splitNum splits (0 or less: the reference's floors), an error of kind Value naming the field
// and its bound, and otherwise returns the memory the filter takes, in bytes (2 per cell).
func CheckSlidingFilter(capacity uint64, splitNum int) (int64, error) {
	if splitNum > MaxFilterSplitNum {
		return 0, errkind.New(errkind.Value, "sliding hash filter: split_num %d, want at most %d (MaxFilterSplitNum)", splitNum, MaxFilterSplitNum)
	}
	capacity, splitNum, splitCapacity := slidingShape(capacity, splitNum)
	if splitCapacity > MaxFilterSplitCapacity {
		return 0, errkind.New(errkind.Value, "sliding hash filter: capacity %d in %d splits, want at most %d (a split's cells are addressed by 32-bit offsets in its dump)",
			capacity, splitNum, MaxFilterCapacity(splitNum))
	}
	cells := uint64(float64(splitCapacity)*slidingFillRate) + hashFilterMaxStep
	return int64(cells) * 2 * int64(splitNum), nil
}

// NewSlidingHashFilter returns a sliding filter for about capacity ids in splitNum splits
// (hash_filter_ops.create_hash_filter; HASH_FILTER_CAPACITY and HASH_FILTER_SPLIT_NUM are its
// Python defaults). Below the reference's floors, capacity is 300 and splitNum 5. It panics past
// the bounds CheckSlidingFilter checks (NewFilter returns them as errors).
func NewSlidingHashFilter(capacity uint64, splitNum int) *SlidingHashFilter {
	if _, err := CheckSlidingFilter(capacity, splitNum); err != nil {
		panic(err)
	}
	capacity, splitNum, splitCapacity := slidingShape(capacity, splitNum)
	f := &SlidingHashFilter{
		capacity:        capacity,
		maxBackwardStep: splitNum - slidingMaxForwardStep,
		filters:         make([]*hashFilter, splitNum),
	}
	for i := range f.filters {
		f.filters[i] = newHashFilter(splitCapacity, slidingFillRate)
	}
	return f
}

// Default sliding filter size (hash_filter_ops.HASH_FILTER_CAPACITY, HASH_FILTER_SPLIT_NUM).
const (
	HashFilterCapacity = 300000000
	HashFilterSplitNum = 7
)

func (f *SlidingHashFilter) next(i int) int {
	if i == len(f.filters)-1 {
		return 0
	}
	return i + 1
}

func (f *SlidingHashFilter) prev(i int) int {
	if i == 0 {
		return len(f.filters) - 1
	}
	return i - 1
}

// slidingPos is a cell of one split, or none (split < 0).
type slidingPos struct{ split, cell int }

// bidirectionalFind looks at up to maxLook splits from begin, moving with step, for a cell of
// fid: any usable cell when looking forward, a non-empty one (exhaust) when looking back.
func (f *SlidingHashFilter) bidirectionalFind(begin, maxLook int, fid uint64, exhaust bool, step func(int) int) slidingPos {
	idx := begin
	for i := 0; i < maxLook; i++ {
		if c := f.filters[idx].find(fid, slidingMaxStep); c >= 0 && (!exhaust || f.filters[idx].cells[c] != 0) {
			return slidingPos{idx, c}
		}
		idx = step(idx)
	}
	return slidingPos{split: -1}
}

// Add counts count more occurrences of fid and returns its count before them (MaxCount when the
// filter has no room for it).
func (f *SlidingHashFilter) Add(fid uint64, count uint32) uint32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur := f.bidirectionalFind(f.head, slidingMaxForwardStep, fid, false, f.next)
	if cur.split < 0 {
		f.failureCount++
		return MaxCount
	}
	sign := signature(fid)
	curF := f.filters[cur.split]
	if curF.cells[cur.cell] != 0 {
		return curF.addAt(cur.cell, sign, count)
	}
	var old uint32
	back := f.bidirectionalFind(f.prev(f.head), min(f.headIncrement, f.maxBackwardStep), fid, true, f.prev)
	if back.split >= 0 {
		old = f.filters[back.split].getAt(back.cell)
		curF.addAt(cur.cell, sign, old+count)
	} else {
		curF.addAt(cur.cell, sign, count)
	}
	if f.filters[f.head].full() {
		f.head = f.next(f.head)
		f.headIncrement++
		f.filters[(f.head+slidingMaxForwardStep-1)%len(f.filters)].clear()
	}
	return old
}

// Get returns fid's count.
func (f *SlidingHashFilter) Get(fid uint64) uint32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur := f.bidirectionalFind(f.head, slidingMaxForwardStep, fid, false, f.next)
	if cur.split < 0 {
		return MaxCount
	}
	if f.filters[cur.split].cells[cur.cell] != 0 {
		return f.filters[cur.split].getAt(cur.cell)
	}
	back := f.bidirectionalFind(f.prev(f.head), min(f.headIncrement, f.maxBackwardStep), fid, true, f.prev)
	if back.split >= 0 {
		return f.filters[back.split].getAt(back.cell)
	}
	return 0
}

// ShouldBeFiltered counts count occurrences of fid and holds it back while its count before them
// is below threshold.
func (f *SlidingHashFilter) ShouldBeFiltered(fid int64, count, threshold int64, _ Container) bool {
	if threshold <= 0 {
		return false
	}
	return int64(f.Add(uint64(fid), uint32(count))) < threshold
}

// SplitNum is the number of splits, each saved to a file of its own.
func (f *SlidingHashFilter) SplitNum() int { return len(f.filters) }

// FailureCount is how many ids found no room.
func (f *SlidingHashFilter) FailureCount() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failureCount
}

// EstimatedTotalElement is the number of ids the splits hold.
func (f *SlidingHashFilter) EstimatedTotalElement() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var n uint64
	for _, s := range f.filters {
		n += s.numElements
	}
	return n
}

func (f *SlidingHashFilter) metaDump() *hashtablepb.SlidingHashFilterMetaDump {
	return &hashtablepb.SlidingHashFilterMetaDump{
		SplitNum:        proto.Uint32(uint32(len(f.filters))),
		MaxForwardStep:  proto.Uint32(slidingMaxForwardStep),
		MaxBackwardStep: proto.Uint32(uint32(f.maxBackwardStep)),
		MaxStep:         proto.Uint32(slidingMaxStep),
		Head:            proto.Uint32(uint32(f.head)),
		HeadIncrement:   proto.Uint32(uint32(f.headIncrement)),
		FailureCount:    proto.Uint64(f.failureCount),
	}
}

// saveSplit writes split i's records (its meta, carrying the shared sliding meta, then its data),
// until ctx ends.
func (f *SlidingHashFilter) saveSplit(ctx context.Context, i int, write func(proto.Message) error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.filters[i].save(ctx, f.metaDump(), write)
}

// restoreSplit restores split i from its meta record and data records, checking that the sliding
// meta matches this filter's shape.
func (f *SlidingHashFilter) restoreSplit(i int, meta *hashtablepb.HashFilterSplitMetaDump, next func() (*hashtablepb.HashFilterSplitDataDump, error)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	sm := meta.GetSlidingHashFilterMeta()
	for _, c := range []struct {
		name      string
		want, got uint32
	}{
		{"split_num", uint32(len(f.filters)), sm.GetSplitNum()},
		{"max_forward_step", slidingMaxForwardStep, sm.GetMaxForwardStep()},
		{"max_backward_step", uint32(f.maxBackwardStep), sm.GetMaxBackwardStep()},
		{"max_step", slidingMaxStep, sm.GetMaxStep()},
	} {
		if c.want != c.got {
			return errkind.New(errkind.Value, "%s: %d doesn't match with : %d read from hash filter checkpoint file", c.name, c.want, c.got)
		}
	}
	if int(sm.GetHead()) >= len(f.filters) {
		return errkind.New(errkind.Value, "hash filter meta: head %d of %d splits", sm.GetHead(), len(f.filters))
	}
	f.head = int(sm.GetHead())
	f.headIncrement = int(sm.GetHeadIncrement())
	f.failureCount = sm.GetFailureCount()
	if err := f.filters[i].restore(meta, next); err != nil {
		return fmt.Errorf("split %d: %w", i, err)
	}
	return nil
}
