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

// MaxDim is the largest embedding dimension a table may have (so that a row stays far below
// the message limits).
const MaxDim = 1 << 16

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

	lookupIDs, lookups, applyIDs, applies atomic.Int64
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
	case c.GetConfig() == nil:
		return errkind.New(errkind.Value, "table %q: no EmbeddingHashTableConfig", c.GetName())
	}
	return nil
}

// newTable builds the table c configures; workers is the table's goroutines per batch (0: all
// cores), gen the random source of its initializers.
func newTable(c *pspb.TableConfig, workers int, gen *initializer.Generator) (*table, error) {
	if err := CheckTableConfig(c); err != nil {
		return nil, err
	}
	cfg, evictEvery, err := embedding.FromProtoWithGenerator(c.GetConfig(), gen)
	if err != nil {
		return nil, fmt.Errorf("table %q: %w", c.GetName(), err)
	}
	if cfg.Dim > MaxDim {
		return nil, errkind.New(errkind.Value, "table %q: dimension %d, want at most %d", c.GetName(), cfg.Dim, MaxDim)
	}
	cfg.Workers = workers
	tb := &table{name: c.GetName(), cfg: proto.Clone(c).(*pspb.TableConfig), evictEvery: evictEvery}
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
			return nil, errkind.New(errkind.Value, "table %q: unknown filter type %d", c.GetName(), f.GetType())
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
