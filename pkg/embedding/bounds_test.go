package embedding

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	hashtablepb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table"
	initializerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/initializer"
	optimizerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/optimizer"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// TestFilterBounds: a sliding filter's shape past its bounds is a Value error naming the field
// and the bound, never a panic or an allocation of its size; the defaults are within them.
func TestFilterBounds(t *testing.T) {
	sliding := func(capacity uint64, split int) FilterOptions {
		return FilterOptions{Enable: true, Type: SlidingHashFilterType, Capacity: capacity, SplitNum: split}
	}
	tests := []struct {
		name string
		opts FilterOptions
		want string // "" when valid
	}{
		{name: "floors", opts: sliding(0, 0)},
		{name: "defaults", opts: sliding(HashFilterCapacity, HashFilterSplitNum)},
		{name: "largest capacity of 7 splits", opts: sliding(MaxFilterCapacity(7), 7)},
		{name: "capacity 1<<62", opts: sliding(1<<62, 0), want: "capacity 4611686018427387904 in 7 splits, want at most 21474836160"},
		{name: "capacity past 5 splits", opts: sliding(MaxFilterCapacity(5)+4, 5), want: "want at most 14316557440"},
		{name: "most splits", opts: sliding(1000, MaxFilterSplitNum)},
		{name: "too many splits", opts: sliding(1000, 1<<30), want: "split_num 1073741824, want at most 64"},
		{name: "negative splits", opts: sliding(1000, -1), want: "split_num -1, want 0 (the default, 7) to 64"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want == "" {
				if _, err := CheckSlidingFilter(tc.opts.Capacity, tc.opts.SplitNum); err != nil {
					t.Fatal(err)
				}
				return
			}
			_, err := NewFilter(tc.opts)
			if errkind.Of(err) != errkind.Value || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewFilter = %v, want a Value error with %q", err, tc.want)
			}
		})
	}
	// The memory CheckSlidingFilter reports is the filter's.
	b, err := CheckSlidingFilter(3000, 6)
	if err != nil {
		t.Fatal(err)
	}
	f := NewSlidingHashFilter(3000, 6)
	var cells int64
	for _, s := range f.filters {
		cells += int64(len(s.cells))
	}
	if b != 2*cells {
		t.Fatalf("CheckSlidingFilter says %d bytes, the filter has %d cells", b, cells)
	}
	if b, _ := CheckSlidingFilter(HashFilterCapacity, HashFilterSplitNum); b != 840000896 {
		t.Fatalf("the default filter takes %d bytes, want 840000896 (7 splits of 60000064 cells)", b)
	}
}

// TestFilterRestoreOtherSize: a filter dump whose splits have another size than the filter's
// (another capacity, or a corrupt size) is refused, not allocated.
func TestFilterRestoreOtherSize(t *testing.T) {
	leakcheck.Check(t)
	base := filepath.Join(t.TempDir(), "filter")
	if err := SaveFilter(context.Background(), NewSlidingHashFilter(3000, 6), base); err != nil {
		t.Fatal(err)
	}
	err := RestoreFilter(context.Background(), NewSlidingHashFilter(6000, 6), base)
	if errkind.Of(err) != errkind.Value || !strings.Contains(err.Error(), "total size 720, this filter's splits have 1440 cells") {
		t.Fatalf("restore into a filter of twice the capacity: %v", err)
	}
}

func TestFromProtoBounds(t *testing.T) {
	base := &hashtablepb.EmbeddingHashTableConfig{EntryConfig: &hashtablepb.EntryConfig{Segments: []*hashtablepb.EntryConfig_Segment{{
		DimSize:    proto.Int32(4),
		OptConfig:  &optimizerpb.OptimizerConfig{Type: &optimizerpb.OptimizerConfig_Sgd{Sgd: &optimizerpb.SgdOptimizerConfig{}}},
		InitConfig: &initializerpb.InitializerConfig{Type: &initializerpb.InitializerConfig_Zeros{Zeros: &initializerpb.ZerosInitializerConfig{}}},
	}}}}
	with := func(f func(c *hashtablepb.EmbeddingHashTableConfig)) *hashtablepb.EmbeddingHashTableConfig {
		c := proto.Clone(base).(*hashtablepb.EmbeddingHashTableConfig)
		f(c)
		return c
	}
	tests := []struct {
		name string
		cfg  *hashtablepb.EmbeddingHashTableConfig
		want string
	}{
		{name: "valid", cfg: with(func(c *hashtablepb.EmbeddingHashTableConfig) {
			c.EnableFeatureEviction, c.FeatureEvictEveryNHours = proto.Bool(true), proto.Int32(MaxEvictEveryHours)
			c.InitialCapacity = proto.Uint64(1000)
		})},
		{name: "eviction period overflows", cfg: with(func(c *hashtablepb.EmbeddingHashTableConfig) {
			c.EnableFeatureEviction, c.FeatureEvictEveryNHours = proto.Bool(true), proto.Int32(math.MaxInt32)
		}), want: "feature_evict_every_n_hours 2147483647, want 1 to 876000"},
		{name: "initial capacity", cfg: with(func(c *hashtablepb.EmbeddingHashTableConfig) { c.InitialCapacity = proto.Uint64(1 << 62) }),
			want: "initial_capacity 4611686018427387904, want at most 1099511627776"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, every, err := FromProto(tc.cfg)
			if tc.want == "" {
				if err != nil || every != MaxEvictEveryHours*time.Hour || cfg.InitialCapacity != 1000 {
					t.Fatalf("FromProto = %+v, %v, %v", cfg, every, err)
				}
				return
			}
			if errkind.Of(err) != errkind.Value || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("FromProto = %v, want a Value error with %q", err, tc.want)
			}
		})
	}
	if _, err := New(Config{Dim: 2, Optimizer: testSGD{2}, Initializer: constInit(0), InitialCapacity: MaxInitialCapacity + 1}); errkind.Of(err) != errkind.Value {
		t.Fatalf("New past MaxInitialCapacity: %v, want a Value error", err)
	}
}

// TestReserveBytes: ReserveBytes is the memory a new table has for its initial capacity.
func TestReserveBytes(t *testing.T) {
	for _, n := range []int{0, 1, 1000, 100000} {
		cfg := Config{Dim: 8, Optimizer: testAdagrad{dim: 8}, Initializer: constInit(0), InitialCapacity: n, Stripes: 16}
		tb := newTable(t, cfg)
		if got, want := cfg.ReserveBytes(), tb.MemoryBytes(); got != want {
			t.Errorf("initial capacity %d: ReserveBytes %d, the table has %d bytes", n, got, want)
		}
	}
	huge := Config{Dim: 1 << 16, Optimizer: testAdagrad{dim: 1 << 16}, InitialCapacity: MaxInitialCapacity}
	if b := huge.ReserveBytes(); b <= 0 {
		t.Fatalf("ReserveBytes of the largest table %d, want positive (no overflow)", b)
	}
}

// TestSaveCancelled: a save cut short by its context stops, removes what it wrote and leaves the
// dump that was there before as it was (no half-written dump that looks complete); so does a
// filter's.
func TestSaveCancelled(t *testing.T) {
	leakcheck.Check(t)
	tb := adagradTable(t, 8)
	ids := fillTable(t, tb, 50000, 1, 100)
	dir := t.TempDir()
	base := filepath.Join(dir, "emb")
	if err := tb.Save(context.Background(), base, 4); err != nil {
		t.Fatal(err)
	}
	before := newTable(t, Config{Dim: 8, Optimizer: testAdagrad{dim: 8, init: 0.1}, Initializer: constInit(0.5)})
	if _, err := before.Restore(context.Background(), []string{base}, ShardSpec{}); err != nil {
		t.Fatal(err)
	}
	fillTable(t, tb, 50000, 2, 200) // the table moves on

	// Cancelled once its first temporary file appears.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			if m, _ := filepath.Glob(base + "-*-tmp-*"); len(m) > 0 {
				cancel()
				return
			}
			time.Sleep(100 * time.Microsecond)
		}
	}()
	start := time.Now()
	err := tb.Save(ctx, base, 64)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Save = %v after %v, want it cancelled", err, time.Since(start))
	}
	left, _ := filepath.Glob(base + "*")
	if len(left) != 4 {
		t.Fatalf("files after the cancelled save: %v, want the 4 of the earlier dump", left)
	}
	after := newTable(t, Config{Dim: 8, Optimizer: testAdagrad{dim: 8, init: 0.1}, Initializer: constInit(0.5)})
	if _, err := after.Restore(context.Background(), []string{base}, ShardSpec{}); err != nil {
		t.Fatal(err)
	}
	sameEntries(t, before, after, ids)

	// A committed save of another shard count replaces the earlier dump whole.
	if err := tb.Save(context.Background(), base, 3); err != nil {
		t.Fatal(err)
	}
	if files, err := ShardedFiles(base); err != nil || len(files) != 3 {
		t.Fatalf("after a save of 3 shards over one of 4: %v, %v", files, err)
	}

	// The filter's save, cancelled, writes nothing.
	f := NewSlidingHashFilter(1<<20, 7)
	dead, stop := context.WithCancel(context.Background())
	stop()
	fbase := filepath.Join(dir, "filter")
	if err := SaveFilter(dead, f, fbase); !errors.Is(err, context.Canceled) {
		t.Fatalf("SaveFilter with a cancelled context = %v", err)
	}
	if m, _ := filepath.Glob(fbase + "*"); len(m) != 0 {
		t.Fatalf("a cancelled filter save left %v", m)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
}
