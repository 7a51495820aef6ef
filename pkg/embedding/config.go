package embedding

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	hashtablepb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table"
	initializerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/initializer"
	optimizerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/optimizer"
	"github.com/monolith-go/monolith/pkg/embedding/initializer"
	"github.com/monolith-go/monolith/pkg/embedding/optimizer"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// FromProto returns the Config of a training table configured by cfg
// (NewEmbeddingHashTableFromConfig with the entry accessor of NewEntryAccessor): one initializer
// and one optimizer per segment of the entry config, each for the segment's dim_size (which
// overrides the dim_size in their configs), combined in segment order (so Apply takes one
// learning rate per segment with an optimizer); the slot expire times;
// skip_zero_embedding and initial_capacity (at most MaxInitialCapacity). The second result is the
// eviction period when enable_feature_eviction is set (feature_evict_every_n_hours, 1 to
// MaxEvictEveryHours), else 0: the caller runs RunEviction with it. The hash filter is configured apart (SlotFilter), as in the reference.
// Serving entries (a float compressor instead of an optimizer) are not ported: an error of kind
// Value, as are a missing initializer or optimizer and segments that do not cover the dimension.
func FromProto(cfg *hashtablepb.EmbeddingHashTableConfig) (Config, time.Duration, error) {
	return FromProtoWithGenerator(cfg, initializer.Shared)
}

// FromProtoWithGenerator is FromProto with the random uniform initializers drawing from gen.
func FromProtoWithGenerator(cfg *hashtablepb.EmbeddingHashTableConfig, gen *initializer.Generator) (Config, time.Duration, error) {
	ec := cfg.GetEntryConfig()
	if ec.GetEntryType() != hashtablepb.EntryConfig_TRAINING {
		return Config{}, 0, errkind.New(errkind.Value, "embedding table config: entry type %v is not supported (only TRAINING entries are ported)", ec.GetEntryType())
	}
	var (
		inits []initializer.Initializer
		opts  []optimizer.Optimizer
		dim   int
	)
	for i, seg := range ec.GetSegments() {
		d := int(seg.GetDimSize())
		if d <= 0 {
			return Config{}, 0, errkind.New(errkind.Value, "embedding table config: segment %d: dim_size %d, want > 0", i, d)
		}
		dim += d
		if seg.OptConfig != nil {
			oc := proto.Clone(seg.OptConfig)
			if err := setDimSize(oc, d); err != nil {
				return Config{}, 0, fmt.Errorf("embedding table config: segment %d: opt_config: %w", i, err)
			}
			o, err := optimizer.New(oc.(*optimizerpb.OptimizerConfig), d)
			if err != nil {
				return Config{}, 0, fmt.Errorf("embedding table config: segment %d: %w", i, err)
			}
			opts = append(opts, o)
		}
		if seg.InitConfig != nil {
			ic := proto.Clone(seg.InitConfig)
			if err := setDimSize(ic, d); err != nil {
				return Config{}, 0, fmt.Errorf("embedding table config: segment %d: init_config: %w", i, err)
			}
			in, err := initializer.NewWithGenerator(ic.(*initializerpb.InitializerConfig), d, gen)
			if err != nil {
				return Config{}, 0, fmt.Errorf("embedding table config: segment %d: %w", i, err)
			}
			inits = append(inits, in)
		}
	}
	if len(inits) == 0 || len(opts) == 0 {
		return Config{}, 0, errkind.New(errkind.Value, "embedding table config: init or opt config is missing from entry config")
	}
	opt, err := optimizer.Combine(opts...)
	if err != nil {
		return Config{}, 0, fmt.Errorf("embedding table config: %w", err)
	}
	init, err := initializer.Combine(inits...)
	if err != nil {
		return Config{}, 0, fmt.Errorf("embedding table config: %w", err)
	}
	if opt.Dim() != dim || init.Dim() != dim {
		return Config{}, 0, errkind.New(errkind.Value, "embedding table config: Initializer/Optimizer/Retriever dim size should match. But got %d vs %d vs %d", init.Dim(), opt.Dim(), dim)
	}
	var evictEvery time.Duration
	if cfg.GetEnableFeatureEviction() {
		h := cfg.GetFeatureEvictEveryNHours()
		if h <= 0 || h > MaxEvictEveryHours {
			return Config{}, 0, errkind.New(errkind.Value, "embedding table config: feature_evict_every_n_hours %d, want 1 to %d (MaxEvictEveryHours)", h, MaxEvictEveryHours)
		}
		evictEvery = time.Duration(h) * time.Hour
	}
	if c := cfg.GetInitialCapacity(); c > MaxInitialCapacity {
		return Config{}, 0, errkind.New(errkind.Value, "embedding table config: initial_capacity %d, want at most %d (MaxInitialCapacity)", c, uint64(MaxInitialCapacity))
	}
	return Config{
		Dim:               dim,
		Optimizer:         opt,
		Initializer:       init,
		LearningRates:     len(opts),
		ExpireTime:        cfg.GetSlotExpireTimeConfig(),
		SkipZeroEmbedding: cfg.GetSkipZeroEmbedding(),
		InitialCapacity:   int(cfg.GetInitialCapacity()),
	}, evictEvery, nil
}

// MaxEvictEveryHours is the longest eviction period (feature_evict_every_n_hours): 876000 hours,
// the reference's default expire time (36500 days), which a longer period could never act on; a
// period of every int32 of hours would overflow time.Duration.
const MaxEvictEveryHours = 36500 * 24

// setDimSize sets dim_size in the message the oneof "type" of m holds (WriteDimSize).
func setDimSize(m proto.Message, dim int) error {
	r := m.ProtoReflect()
	oneof := r.Descriptor().Oneofs().ByName("type")
	if oneof == nil {
		return errkind.New(errkind.Value, "%s has no type", r.Descriptor().Name())
	}
	fd := r.WhichOneof(oneof)
	if fd == nil || fd.Kind() != protoreflect.MessageKind {
		return errkind.New(errkind.Value, "%s must be set type", r.Descriptor().Name())
	}
	sub := r.Mutable(fd).Message()
	dfd := sub.Descriptor().Fields().ByName("dim_size")
	if dfd == nil {
		return errkind.New(errkind.Value, "%s has no dim_size", sub.Descriptor().Name())
	}
	sub.Set(dfd, protoreflect.ValueOfInt32(int32(dim)))
	return nil
}
