package embedding

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	hashtablepb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/errkind"
)

func thresholds(def uint32, perSlot map[uint32]uint32) *hashtablepb.SlotOccurrenceThresholdConfig {
	c := &hashtablepb.SlotOccurrenceThresholdConfig{DefaultOccurrenceThreshold: proto.Uint32(def)}
	for slot, th := range perSlot {
		c.SlotOccurrenceThresholds = append(c.SlotOccurrenceThresholds, &hashtablepb.SlotOccurrenceThresholdConfig_SlotOccurrenceThreshold{Slot: proto.Uint32(slot), OccurrenceThreshold: proto.Uint32(th)})
	}
	return c
}

func slotFilter(t *testing.T, f Filter, cfg *hashtablepb.SlotOccurrenceThresholdConfig) *SlotFilter {
	t.Helper()
	sf, err := NewSlotFilter(f, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return sf
}

// fidV2 is a v2 feature id of slot.
func fidV2(slot int, sig int64) int64 { return int64(slot)<<48 | sig }

// TestHashFilterCounts: the count before each add, saturating at 15, as HashFilterIterator does.
func TestHashFilterCounts(t *testing.T) {
	tests := []struct {
		name  string
		adds  []uint32
		wants []uint32
	}{
		{name: "ones", adds: []uint32{1, 1, 1, 1}, wants: []uint32{0, 1, 2, 3}},
		{name: "a batch count then one", adds: []uint32{3, 1}, wants: []uint32{0, 3}},
		{name: "saturates at 15", adds: []uint32{10, 10, 1, 100}, wants: []uint32{0, 10, 15, 15}},
		{name: "an add above 15 counts 15", adds: []uint32{40, 0}, wants: []uint32{0, 15}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newHashFilter(1000, 1.5)
			for i, a := range tc.adds {
				p := f.find(12345, hashFilterMaxStep)
				if got := f.addAt(p, signature(12345), a); got != tc.wants[i] {
					t.Fatalf("add %d: count before %d, want %d", i, got, tc.wants[i])
				}
			}
			if f.numElements != 1 {
				t.Fatalf("%d elements, want 1", f.numElements)
			}
		})
	}
}

// TestSlotFilterAdmitsAfterThreshold: with threshold k an id stays out of the table while the
// count before its occurrences is below k, so it gets an entry at its (k+1)-th occurrence; the
// threshold is its slot's, 0 lets everything in; an entry, once made, is not filtered.
func TestSlotFilterAdmitsAfterThreshold(t *testing.T) {
	tests := []struct {
		name      string
		id        int64
		perBatch  int
		wantBatch int // the first batch (1-based) after which the id has an entry
	}{
		{name: "default threshold 3, one occurrence a batch", id: fidV2(1, 7), perBatch: 1, wantBatch: 4},
		{name: "default threshold 3, three occurrences in one batch count together", id: fidV2(1, 8), perBatch: 3, wantBatch: 2},
		{name: "slot 5's threshold 1", id: fidV2(5, 9), perBatch: 1, wantBatch: 2},
		{name: "slot 6's threshold 0 lets it in at once", id: fidV2(6, 9), perBatch: 1, wantBatch: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := slotFilter(t, NewSlidingHashFilter(10000, 7), thresholds(3, map[uint32]uint32{5: 1, 6: 0}))
			tb := newTable(t, Config{Dim: 1, Optimizer: testSGD{dim: 1}, Initializer: constInit(0), Filter: f})
			for batch := 1; batch <= 6; batch++ {
				ids := make([]int64, tc.perBatch)
				for i := range ids {
					ids[i] = tc.id
				}
				if err := tb.Apply(ids, make([]float32, len(ids)), lr(1), 0, int64(batch)); err != nil {
					t.Fatal(err)
				}
				if got, want := tb.Contains(tc.id), batch >= tc.wantBatch; got != want {
					t.Fatalf("after batch %d: contains %v, want %v", batch, got, want)
				}
			}
		})
	}
}

// TestFilteredIDsAreNotCountedOnceAdmitted: the filter is asked about ids without an entry only,
// as the reference's bridge does (so an entry's later occurrences do not fill the filter).
func TestFilteredIDsAreNotCountedOnceAdmitted(t *testing.T) {
	sf := NewSlidingHashFilter(10000, 7)
	tb := newTable(t, Config{Dim: 1, Optimizer: testSGD{dim: 1}, Initializer: constInit(0), Filter: slotFilter(t, sf, thresholds(1, nil))})
	for i := 0; i < 5; i++ {
		if err := tb.Apply([]int64{77}, []float32{0}, lr(1), 0, 1); err != nil {
			t.Fatal(err)
		}
	}
	// Counted at the first apply (filtered) and the second (admitted), not after.
	if got := sf.Get(77); got != 2 {
		t.Fatalf("filter count %d, want 2", got)
	}
}

// TestSlidingFilterSlides fills a small sliding filter with distinct ids so that its head moves
// on: recent counts carry over into the new head, and ids not seen for a whole turn are forgotten.
func TestSlidingFilterSlides(t *testing.T) {
	f := NewSlidingHashFilter(300, 5) // 5 splits of 75 ids each
	// Ids with distinct signatures (all ids below 2^17 share signature 0, as in the reference,
	// so tests use feature-id-like values).
	rng := rand.New(rand.NewPCG(8, 9))
	seen := map[uint16]bool{}
	next := func() uint64 {
		for {
			id := rng.Uint64()
			if s := signature(id); !seen[s] {
				seen[s] = true
				return id
			}
		}
	}
	id1, id2 := next(), next()
	f.Add(id1, 3)
	f.Add(id2, 2)
	// Enough other ids to move the head twice: the ids above are now behind the head.
	for f.headIncrement < 2 {
		f.Add(next(), 1)
	}
	if got := f.Get(id1); got != 3 {
		t.Fatalf("count of an id behind the head %d, want 3", got)
	}
	// Adding to it copies its old count into the head.
	if got := f.Add(id1, 1); got != 3 {
		t.Fatalf("count before add %d, want 3", got)
	}
	if got := f.Get(id1); got != 4 {
		t.Fatalf("count after add %d, want 4", got)
	}
	// A full turn later, id2 (not seen since) is gone (the other ids avoid its signature).
	for f.headIncrement < 2+5 {
		id := rng.Uint64()
		if signature(id) != signature(id2) {
			f.Add(id, 1)
		}
	}
	if got := f.Get(id2); got != 0 {
		t.Fatalf("count of a forgotten id %d, want 0", got)
	}
	if f.EstimatedTotalElement() == 0 || f.FailureCount() != 0 {
		t.Fatalf("elements %d failures %d", f.EstimatedTotalElement(), f.FailureCount())
	}
}

func TestSlidingFilterFloors(t *testing.T) {
	f := NewSlidingHashFilter(10, 2)
	if f.SplitNum() != 5 || f.capacity != 300 || f.maxBackwardStep != 3 {
		t.Fatalf("splits %d capacity %d backward %d, want the reference's floors 5, 300, 3", f.SplitNum(), f.capacity, f.maxBackwardStep)
	}
	// 300 / (5 - 2 + 1) ids per split, 1.2 cells per id.
	if got := f.filters[0].totalSize; got != 90 {
		t.Fatalf("cells per split %d, want 90", got)
	}
}

// TestProbabilisticFilter checks the admission rates against the reference's formulas, with a
// seeded generator: count/threshold, and 1 - (1-p)^count with p = 1 - 0.05^(1/threshold).
func TestProbabilisticFilter(t *testing.T) {
	tests := []struct {
		name  string
		equal bool
		count int64
		th    int64
		want  float64
	}{
		{name: "unequal 1 of 4", count: 1, th: 4, want: 0.25},
		{name: "unequal 3 of 4", count: 3, th: 4, want: 0.75},
		{name: "unequal at threshold", count: 4, th: 4, want: 1},
		{name: "equal 1 of 5", equal: true, count: 1, th: 5, want: 1 - math.Pow(0.05, 1.0/5)},
		{name: "equal 5 of 5", equal: true, count: 5, th: 5, want: 0.95},
		{name: "equal 2 of 10", equal: true, count: 2, th: 10, want: 1 - math.Pow(math.Pow(0.05, 0.1), 2)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := NewProbabilisticFilter(tc.equal, rand.New(rand.NewPCG(1, 2)))
			const n = 20000
			admitted := 0
			for i := 0; i < n; i++ {
				if !f.ShouldBeFiltered(int64(i), tc.count, tc.th, absent{}) {
					admitted++
				}
			}
			got := float64(admitted) / n
			// Four standard deviations of a binomial proportion.
			if tol := 4*math.Sqrt(tc.want*(1-tc.want)/n) + 1e-9; math.Abs(got-tc.want) > tol {
				t.Fatalf("admitted %.4f, want %.4f ± %.4f", got, tc.want, tol)
			}
		})
	}
	// Ids in the table, and asks without a table, are never filtered.
	f := NewProbabilisticFilter(false, rand.New(rand.NewPCG(1, 2)))
	tb := newTable(t, Config{Dim: 1, Optimizer: testSGD{dim: 1}, Initializer: constInit(0)})
	if err := tb.Assign([]int64{5}, []float32{1}, 0); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		if f.ShouldBeFiltered(5, 1, 1000, tb) || f.ShouldBeFiltered(6, 1, 1000, nil) {
			t.Fatal("filtered an id in the table, or without a table")
		}
	}
}

func TestDummyFilterLetsAllIn(t *testing.T) {
	tb := newTable(t, Config{Dim: 1, Optimizer: testSGD{dim: 1}, Initializer: constInit(0), Filter: slotFilter(t, DummyFilter{}, thresholds(100, nil))})
	if err := tb.Apply([]int64{1, 2}, []float32{1, 1}, lr(1), 0, 1); err != nil {
		t.Fatal(err)
	}
	if tb.Size() != 2 {
		t.Fatalf("size %d, want 2", tb.Size())
	}
}

func TestInterceptGradient(t *testing.T) {
	f := slotFilter(t, NewSlidingHashFilter(10000, 7), thresholds(2, map[uint32]uint32{3: 0}))
	ids := []int64{fidV2(1, 1), fidV2(3, 1), fidV2(1, 1), fidV2(1, 1)}
	grads := []float32{1, 1, 2, 2, 3, 3, 4, 4}
	if err := f.InterceptGradient(ids, grads); err != nil {
		t.Fatal(err)
	}
	// Slot 1's id is counted once per row: counts before 0, 1 (filtered), then 2 (kept); slot 3
	// has threshold 0.
	want := []float32{0, 0, 2, 2, 0, 0, 4, 4}
	for i := range want {
		if grads[i] != want[i] {
			t.Fatalf("gradients %v, want %v", grads, want)
		}
	}
	if err := f.InterceptGradient([]int64{1, 2}, []float32{1, 2, 3}); errkind.Of(err) != errkind.Value {
		t.Fatalf("uneven gradients: %v, want a Value error", err)
	}
}

func TestFilterSaveRestore(t *testing.T) {
	leakcheck.Check(t)
	f := NewSlidingHashFilter(3000, 6)
	rng := rand.New(rand.NewPCG(4, 5))
	for i := 0; i < 4000; i++ {
		f.Add(uint64(rng.IntN(1500)), uint32(rng.IntN(3)+1))
	}
	base := filepath.Join(t.TempDir(), "assets", "hash_filter_0")
	if err := SaveFilter(context.Background(), f, base); err != nil {
		t.Fatal(err)
	}
	g := NewSlidingHashFilter(3000, 6)
	if err := RestoreFilter(context.Background(), g, base); err != nil {
		t.Fatal(err)
	}
	if f.head != g.head || f.headIncrement != g.headIncrement || f.failureCount != g.failureCount {
		t.Fatalf("meta head %d/%d inc %d/%d failures %d/%d", g.head, f.head, g.headIncrement, f.headIncrement, g.failureCount, f.failureCount)
	}
	for i := range f.filters {
		a, b := f.filters[i], g.filters[i]
		if a.numElements != b.numElements || a.totalSize != b.totalSize || a.fillRate != b.fillRate || string(u16bytes(a.cells)) != string(u16bytes(b.cells)) {
			t.Fatalf("split %d differs after restore", i)
		}
	}
	for id := uint64(0); id < 1500; id++ {
		if f.Get(id) != g.Get(id) {
			t.Fatalf("id %d: count %d, want %d", id, g.Get(id), f.Get(id))
		}
	}
	// A filter of another shape refuses the dump.
	if err := RestoreFilter(context.Background(), NewSlidingHashFilter(3000, 7), base); errkind.Of(err) != errkind.Value {
		t.Fatalf("restore into 7 splits: %v, want a Value error", err)
	}
	// A corrupt split file names itself.
	bad := ShardedFileName(base, 2, 6)
	data, err := os.ReadFile(bad)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-10] ^= 1
	if err := os.WriteFile(bad, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := RestoreFilter(context.Background(), g, base); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "offset") {
		t.Fatalf("corrupt split: %v, want an error naming %s and the offset", err, bad)
	}
}

func u16bytes(v []uint16) []byte {
	b := make([]byte, 2*len(v))
	for i, x := range v {
		b[2*i], b[2*i+1] = byte(x), byte(x>>8)
	}
	return b
}

func TestNewFilter(t *testing.T) {
	tests := []struct {
		name    string
		opts    FilterOptions
		want    string
		wantErr bool
	}{
		{name: "disabled", opts: FilterOptions{Type: SlidingHashFilterType}, want: "embedding.DummyFilter"},
		{name: "sliding", opts: FilterOptions{Enable: true, Type: SlidingHashFilterType, Capacity: 1000, SplitNum: 5}, want: "*embedding.SlidingHashFilter"},
		{name: "probabilistic", opts: FilterOptions{Enable: true, Type: ProbabilisticFilterType}, want: "*embedding.ProbabilisticFilter"},
		{name: "no filter", opts: FilterOptions{Enable: true, Type: NoFilterType}, want: "embedding.DummyFilter"},
		{name: "unknown", opts: FilterOptions{Enable: true, Type: "bloom"}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs, err := NewFilters(2, tc.opts)
			if tc.wantErr {
				if errkind.Of(err) != errkind.Value {
					t.Fatalf("error %v, want a Value error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(fs) != 2 || fs[0] == fs[1] {
				t.Fatalf("%d filters, want 2 distinct ones", len(fs))
			}
			if got := fmt.Sprintf("%T", fs[0].Filter()); got != tc.want {
				t.Fatalf("filter %s, want %s", got, tc.want)
			}
		})
	}
	if fs, err := NewFilters(0, FilterOptions{}); err != nil || len(fs) != 1 {
		t.Fatalf("no parameter servers: %d filters, %v; want one", len(fs), err)
	}
}
