package ps

import (
	"fmt"
	"regexp"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	pspb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/ps"
	hashtablepb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table"
	initializerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/initializer"
	optimizerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/optimizer"
	"github.com/monolith-go/monolith/pkg/embedding"
	"github.com/monolith-go/monolith/pkg/embedding/initializer"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// Bounds of a table config (CreateTables, cmd/ps --table_config). Past one, the config is an
// error of kind Value (INVALID_ARGUMENT) naming the table, the field and the bound. The package
// doc lists every bound of a request.
const (
	// MaxDim is the largest embedding dimension a table may have, the sum of its segments'
	// dim_size (so that a row, 4 bytes a float, stays far below the message limits).
	MaxDim = 1 << 16
	// MaxTableNameBytes is the longest table name: a table's name is a directory of the dump,
	// and file systems take names of at most 255 bytes (NAME_MAX).
	MaxTableNameBytes = 255
	// MaxTables is the most tables a server holds. The reference has a table per feature slot
	// config (models have tens to hundreds), and every table costs about 400 kB before its first
	// entry (the per-slot expire times and filter thresholds of all 32768 slots), so 1024 tables
	// are 400 MB of nothing.
	MaxTables = 1024
)

// The filter types a FilterConfig may name, for the message of an unknown one.
var filterTypes = "NONE=0, SLIDING_HASH=1, PROBABILISTIC=2"

// tableName is what a table name may hold: it names a directory of the dump.
var tableName = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// table is one embedding table of a server, with its traffic counters.
type table struct {
	name   string
	cfg    *pspb.TableConfig
	t      *embedding.Table
	filter *embedding.SlidingHashFilter // the table's sliding filter (saved with it), or nil
	// lr is each segment's learning rate, for requests that give none.
	lr []float32
	// evictEvery is the table's eviction period (0: it does not evict).
	evictEvery time.Duration
	// reserved is the memory the table allocated at its creation (reserveBytes).
	reserved int64

	lookupIDs, lookups, applyIDs, applies atomic.Int64
	// rejected counts the ApplyGradients calls refused for a gradient or learning rate that is
	// not finite.
	rejected atomic.Int64
}

// reserveBudget is the memory tables may allocate at their creation: limit in all, of which
// used is taken; what says where the limit comes from.
type reserveBudget struct {
	limit, used int64
	what        string
}

// NewTableConfig is the config of a table of one segment: dim floats, initialized by init and
// updated by opt.
func NewTableConfig(name string, dim int, opt *optimizerpb.OptimizerConfig, init *initializerpb.InitializerConfig) *pspb.TableConfig {
	return &pspb.TableConfig{
		Name: name,
		Config: &hashtablepb.EmbeddingHashTableConfig{EntryConfig: &hashtablepb.EntryConfig{
			Segments: []*hashtablepb.EntryConfig_Segment{{DimSize: proto.Int32(int32(dim)), OptConfig: opt, InitConfig: init}},
		}},
	}
}

// CheckTableConfig reports what is wrong with a table config that can be told without building
// it, naming the table.
func CheckTableConfig(c *pspb.TableConfig) error {
	switch {
	case c == nil:
		return errkind.New(errkind.Value, "table config: missing")
	case !tableName.MatchString(c.GetName()) || c.GetName() == "." || c.GetName() == "..":
		return errkind.New(errkind.Value, "table %q: a name is letters, digits, '_', '-' and '.'", c.GetName())
	case len(c.GetName()) > MaxTableNameBytes:
		return errkind.New(errkind.Value, "table %.40q...: name of %d bytes, want at most %d (MaxTableNameBytes)", c.GetName(), len(c.GetName()), MaxTableNameBytes)
	case c.GetConfig() == nil:
		return errkind.New(errkind.Value, "table %q: no EmbeddingHashTableConfig", c.GetName())
	}
	// The dimension is checked before any part of the table is built for it.
	dim := int64(0)
	for _, seg := range c.GetConfig().GetEntryConfig().GetSegments() {
		dim += max(int64(seg.GetDimSize()), 0)
	}
	if dim > MaxDim {
		return errkind.New(errkind.Value, "table %q: dimension %d, want at most %d (MaxDim; the sum of the segments' dim_size)", c.GetName(), dim, MaxDim)
	}
	if f := c.GetFilter(); f != nil {
		switch f.GetType() {
		case pspb.FilterConfig_NONE, pspb.FilterConfig_PROBABILISTIC:
		case pspb.FilterConfig_SLIDING_HASH:
			if f.GetSplitNum() < 0 || f.GetSplitNum() > embedding.MaxFilterSplitNum {
				return errkind.New(errkind.Value, "table %q: filter split_num %d, want 0 (the default, %d) to %d (embedding.MaxFilterSplitNum)",
					c.GetName(), f.GetSplitNum(), embedding.HashFilterSplitNum, embedding.MaxFilterSplitNum)
			}
			if _, err := embedding.CheckSlidingFilter(filterShape(f)); err != nil {
				return fmt.Errorf("table %q: filter: %w", c.GetName(), err)
			}
		default:
			return errkind.New(errkind.Value, "table %q: unknown filter type %d (valid: %s)", c.GetName(), f.GetType(), filterTypes)
		}
	}
	return nil
}

// filterShape is the capacity and split count of a sliding filter config, its defaults applied.
func filterShape(f *pspb.FilterConfig) (uint64, int) {
	capacity, split := f.GetCapacity(), int(f.GetSplitNum())
	if capacity == 0 {
		capacity = embedding.HashFilterCapacity
	}
	if split == 0 {
		split = embedding.HashFilterSplitNum
	}
	return capacity, split
}

// reserveBytes is the memory a table of c, with the embedding config cfg, allocates at its
// creation: its initial capacity's slots and rows, its sliding filter's cells.
func reserveBytes(c *pspb.TableConfig, cfg embedding.Config) (table, filter int64) {
	if f := c.GetFilter(); f.GetType() == pspb.FilterConfig_SLIDING_HASH {
		filter, _ = embedding.CheckSlidingFilter(filterShape(f))
	}
	return cfg.ReserveBytes(), filter
}

// newTable builds the table c configures; workers is the table's goroutines per batch (0: all
// cores), gen the random source of its initializers. budget is the memory the table may allocate
// at its creation (reserveBytes), checked before it does (budget.limit <= 0: no check).
func newTable(c *pspb.TableConfig, workers int, gen *initializer.Generator, budget reserveBudget) (*table, error) {
	if err := CheckTableConfig(c); err != nil {
		return nil, err
	}
	cfg, evictEvery, err := embedding.FromProtoWithGenerator(c.GetConfig(), gen)
	if err != nil {
		return nil, fmt.Errorf("table %q: %w", c.GetName(), err)
	}
	if cfg.Dim > MaxDim {
		return nil, errkind.New(errkind.Value, "table %q: dimension %d, want at most %d (MaxDim)", c.GetName(), cfg.Dim, MaxDim)
	}
	cfg.Workers = workers
	tb := &table{name: c.GetName(), cfg: proto.Clone(c).(*pspb.TableConfig), evictEvery: evictEvery}
	tableBytes, filterBytes := reserveBytes(c, cfg)
	tb.reserved = tableBytes + filterBytes
	if budget.limit > 0 && (tableBytes > budget.limit || filterBytes > budget.limit || budget.used+tb.reserved > budget.limit) {
		return nil, errkind.New(errkind.Value, "table %q: %d bytes at its creation (initial_capacity %d: %d bytes; filter capacity %d: %d bytes) and the other tables' %d bytes are over the limit of %d bytes (%s)",
			c.GetName(), tb.reserved, cfg.InitialCapacity, tableBytes, c.GetFilter().GetCapacity(), filterBytes, budget.used, budget.limit, budget.what)
	}
	for _, seg := range c.GetConfig().GetEntryConfig().GetSegments() {
		if seg.GetOptConfig() != nil {
			tb.lr = append(tb.lr, defaultLearningRate(seg.GetOptConfig()))
		}
	}
	if f := c.GetFilter(); f != nil && f.GetType() != pspb.FilterConfig_NONE {
		opts := embedding.FilterOptions{Enable: true, Capacity: f.GetCapacity(), SplitNum: int(f.GetSplitNum()),
			EqualProbability: f.GetEqualProbability(), Thresholds: f.GetOccurrenceThreshold()}
		switch f.GetType() {
		case pspb.FilterConfig_SLIDING_HASH:
			opts.Type = embedding.SlidingHashFilterType
		case pspb.FilterConfig_PROBABILISTIC:
			opts.Type = embedding.ProbabilisticFilterType
		default:
			return nil, errkind.New(errkind.Value, "table %q: unknown filter type %d (valid: %s)", c.GetName(), f.GetType(), filterTypes)
		}
		sf, err := embedding.NewFilter(opts)
		if err != nil {
			return nil, fmt.Errorf("table %q: %w", c.GetName(), err)
		}
		cfg.Filter = sf
		tb.filter, _ = sf.Filter().(*embedding.SlidingHashFilter)
	}
	if tb.t, err = embedding.New(cfg); err != nil {
		return nil, fmt.Errorf("table %q: %w", c.GetName(), err)
	}
	return tb, nil
}

// defaultLearningRate is the learning rate an optimizer config sets: its learning_rate field
// (with the proto's default when unset), 0 for an optimizer without one. The reference's Python
// optimizers pass that same value unless a schedule replaces it.
func defaultLearningRate(cfg proto.Message) float32 {
	m := cfg.ProtoReflect()
	oneof := m.Descriptor().Oneofs().ByName("type")
	if oneof == nil {
		return 0
	}
	fd := m.WhichOneof(oneof)
	if fd == nil || fd.Kind() != protoreflect.MessageKind {
		return 0
	}
	inner := m.Get(fd).Message()
	lr := inner.Descriptor().Fields().ByName("learning_rate")
	if lr == nil || lr.Kind() != protoreflect.FloatKind {
		return 0
	}
	return float32(inner.Get(lr).Float())
}
