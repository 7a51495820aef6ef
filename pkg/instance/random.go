package instance

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	matrixpb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto"
	examplepb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/example"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// Random data the way the reference's tools make it: data_gen_utils.gen_example_batch (what
// tfs_client's profile command sends, through gen_random_file) and
// tfs_client.generate_random_example_batch. The random source is the caller's, so a seed gives the
// same batches; the values differ from Python's (another generator), the structure is the same.

// Fid v2 layout: the slot in the 16 high bits, the feature hash in the 48 low ones.
const (
	fidV2Bits = 48
	maxSlotV2 = 1<<(64-fidV2Bits) - 1 // data_gen_utils.MAX_SLOT_V2
)

// The slots the data generator always fills (user_id and item_id): gen_fids_v2 never drops them.
const (
	UserIDSlot = 1
	ItemIDSlot = 200
)

// SparseFeature is a sparse feature to fill with random fids: its name, slot and, when a feature
// list describes it, its method (data_gen_utils.FeatureMeta over a feature_list.Feature).
type SparseFeature struct {
	Name   string
	Slot   int
	Method string
}

// ExtraFeature is a LineId field to fill (ParserArgs.extra_features and extra_feature_shapes): the
// field's name and how many values a repeated field gets.
type ExtraFeature struct {
	Name  string
	Shape int
}

// ProfileExtraFeatures are the line id fields tfs_client.gen_random_file asks for, each of shape
// 1. stay_time and page are not LineId fields: the generator skips them (page as the reference
// does; on stay_time the reference raises AttributeError, its own LineId lacking the field).
var ProfileExtraFeatures = []ExtraFeature{{"uid", 1}, {"sample_rate", 1}, {"req_time", 1}, {"actions", 1}, {"stay_time", 1}, {"item_id", 1}, {"page", 1}, {"chnid", 1}}

// ProfileActions are the actions tfs_client.gen_random_file draws line id actions from.
var ProfileActions = []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}

// ProfileDropRate is data_gen_utils.ParserArgs.drop_rate: the chance that an optional sparse
// feature of an example is left empty.
const ProfileDropRate = 0.5

// RandomBatchOptions says what RandomExampleBatch generates.
type RandomBatchOptions struct {
	// Features are the sparse features, in order (at least one, names unique).
	Features []SparseFeature
	// Extra are the line id fields to fill, in order; nil fills uid, item_id, req_time,
	// sample_rate and one action (fill_line_id without features).
	Extra []ExtraFeature
	// BatchSize is the number of examples (positive).
	BatchSize int
	// DropRate is the chance that an optional sparse feature is left empty.
	DropRate float64
	// Actions are the values line id actions are drawn from; empty: 0..10.
	Actions []int32
	// Now is the request time written into the line ids.
	Now time.Time
}

// RandomExampleBatch is data_gen_utils.gen_example_batch (without dense features): one feature
// list per sparse feature (name, id = slot) with BatchSize features, then __LINE_ID__ (a random
// LineId per example) and __LABEL__ (example i has the label i % 2).
//
// A sparse feature's example gets, like fill_features:
//   - a name with "_recent" or "_cp", or method Combine or VectorTopString: with chance
//     1-DropRate (never when DropRate is 0), 0 to 2 fids;
//   - slots 1 and 200 (user and item id): one fid;
//   - any other: one fid with chance 1-DropRate, else nothing.
//
// Fids are v2: slot << 48 | a random 48-bit hash. Bad options (no features, a repeated name, a
// slot outside [1, 65535), a feature named "label", which the reference would take as the label
// spec) are errors of kind Value.
func RandomExampleBatch(rng *rand.Rand, opts RandomBatchOptions) (*examplepb.ExampleBatch, error) {
	if len(opts.Features) == 0 {
		return nil, errkind.New(errkind.Value, "random example batch: no sparse features")
	}
	if opts.BatchSize <= 0 {
		return nil, errkind.New(errkind.Value, "random example batch: batch size %d is not positive", opts.BatchSize)
	}
	seen := map[string]bool{}
	for _, f := range opts.Features {
		switch {
		case seen[f.Name]:
			return nil, errkind.New(errkind.Value, "random example batch: feature %q given twice", f.Name)
		case f.Name == "label":
			return nil, errkind.New(errkind.Value, "random example batch: a sparse feature may not be named label")
		case f.Slot <= 0 || f.Slot >= maxSlotV2:
			return nil, errkind.New(errkind.Value, "random example batch: feature %q: slot %d is outside [1, %d)", f.Name, f.Slot, maxSlotV2)
		}
		seen[f.Name] = true
	}
	n := opts.BatchSize
	eb := &examplepb.ExampleBatch{BatchSize: int32(n)}
	for _, f := range opts.Features {
		list := &examplepb.NamedFeatureList{Id: int32(f.Slot), Name: f.Name, Feature: make([]*examplepb.Feature, n)}
		for i := range n {
			list.Feature[i] = randomSparse(rng, f, opts.DropRate)
		}
		eb.NamedFeatureList = append(eb.NamedFeatureList, list)
	}
	lineIDs, labels, err := lineIDAndLabelLists(rng, n, opts.Extra, opts.Actions, opts.Now)
	if err != nil {
		return nil, fmt.Errorf("random example batch: %w", err)
	}
	eb.NamedFeatureList = append(eb.NamedFeatureList, lineIDs, labels)
	return eb, nil
}

// lineIDAndLabelLists are the __LINE_ID__ (RandomLineID) and __LABEL__ (example i: i % 2) lists
// of n examples.
func lineIDAndLabelLists(rng *rand.Rand, n int, extra []ExtraFeature, actions []int32, now time.Time) (lineIDs, labels *examplepb.NamedFeatureList, err error) {
	lineIDs = &examplepb.NamedFeatureList{Name: LineIDFeature, Feature: make([]*examplepb.Feature, n)}
	labels = &examplepb.NamedFeatureList{Name: LabelFeature, Feature: make([]*examplepb.Feature, n)}
	for i := range n {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(RandomLineID(rng, extra, actions, now))
		if err != nil {
			return nil, nil, fmt.Errorf("line id: %w", err)
		}
		lineIDs.Feature[i] = bytesFeature(b)
		labels.Feature[i] = &examplepb.Feature{Type: &examplepb.Feature_FloatList{FloatList: &examplepb.FloatList{Value: []float32{float32(i % 2)}}}}
	}
	return lineIDs, labels, nil
}

func bytesFeature(b []byte) *examplepb.Feature {
	return &examplepb.Feature{Type: &examplepb.Feature_BytesList{BytesList: &examplepb.BytesList{Value: [][]byte{b}}}}
}

// randomSparse is fill_features for a sparse feature of an Example.
func randomSparse(rng *rand.Rand, f SparseFeature, dropRate float64) *examplepb.Feature {
	n := 0
	switch {
	case strings.Contains(f.Name, "_recent") || strings.Contains(f.Name, "_cp") || f.Method == "Combine" || f.Method == "VectorTopString":
		if !(dropRate > 0 && rng.Float64() > dropRate) {
			return &examplepb.Feature{}
		}
		n = rng.IntN(3)
	case f.Slot != UserIDSlot && f.Slot != ItemIDSlot:
		if !(rng.Float64() > dropRate) {
			return &examplepb.Feature{}
		}
		n = 1
	default:
		n = 1
	}
	// An empty list is still set, as Python's extend([]) sets it.
	fids := make([]uint64, n)
	for i := range fids {
		fids[i] = fidV2(rng, f.Slot)
	}
	return &examplepb.Feature{Type: &examplepb.Feature_FidV2List{FidV2List: &examplepb.FidList{Value: fids}}}
}

// fidV2 is gen_fids_v2 for one fid: slot << 48 | (randint(1, sys.maxsize) & MASK_V2).
func fidV2(rng *rand.Rand, slot int) uint64 {
	return uint64(slot)<<fidV2Bits | uint64(1+rng.Int64N(math.MaxInt64))&fidV2Mask
}

// RandomLineID is data_gen_utils.fill_line_id with hash_len 48: the fields extra names, in order:
// uid (slot 1 fid) and item_id (slot 200 fid), req_time (now, which also sets sample_rate to
// 1.0), actions (shape values drawn from actions, else 0..10); any other LineId field gets a
// random value by its type (floats in [0, 1), integers 0..10, "hello world", false; shape values
// when repeated); names that are no LineId field are skipped. With extra nil: uid, item_id,
// req_time, sample_rate 1.0 and one action in 0..10.
func RandomLineID(rng *rand.Rand, extra []ExtraFeature, actions []int32, now time.Time) *matrixpb.LineId {
	hash := func(slot uint64) *uint64 {
		// randint(sys.maxsize // 2, sys.maxsize) & MASK
		v := slot<<fidV2Bits | uint64(math.MaxInt64/2+rng.Int64N(math.MaxInt64/2+2))&fidV2Mask
		return &v
	}
	id := &matrixpb.LineId{}
	if extra == nil {
		id.Uid = hash(UserIDSlot)
		id.ItemId = hash(ItemIDSlot)
		id.ReqTime = proto.Int64(now.Unix())
		id.SampleRate = proto.Float32(1)
		id.Actions = append(id.Actions, int32(rng.IntN(11)))
		return id
	}
	fields := id.ProtoReflect().Descriptor().Fields()
	for _, e := range extra {
		switch e.Name {
		case "uid":
			id.Uid = hash(UserIDSlot)
		case "item_id":
			id.ItemId = hash(ItemIDSlot)
		case "req_time":
			id.ReqTime = proto.Int64(now.Unix())
			id.SampleRate = proto.Float32(1)
		case "actions":
			for range e.Shape {
				if len(actions) > 0 {
					id.Actions = append(id.Actions, actions[rng.IntN(len(actions))])
				} else {
					id.Actions = append(id.Actions, int32(rng.IntN(11)))
				}
			}
		default:
			if fd := fields.ByName(protoreflect.Name(e.Name)); fd != nil {
				setRandom(rng, id.ProtoReflect(), fd, e.Shape)
			}
		}
	}
	return id
}

// setRandom fills one field by its type, as fill_line_id's generic branch does.
func setRandom(rng *rand.Rand, m protoreflect.Message, fd protoreflect.FieldDescriptor, shape int) {
	value := func() (protoreflect.Value, bool) {
		switch fd.Kind() {
		case protoreflect.FloatKind:
			return protoreflect.ValueOfFloat32(float32(rng.Float64())), true
		case protoreflect.DoubleKind:
			return protoreflect.ValueOfFloat64(rng.Float64()), true
		case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
			return protoreflect.ValueOfInt32(int32(rng.IntN(11))), true
		case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
			return protoreflect.ValueOfInt64(int64(rng.IntN(11))), true
		case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
			return protoreflect.ValueOfUint32(uint32(rng.IntN(11))), true
		case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
			return protoreflect.ValueOfUint64(uint64(rng.IntN(11))), true
		case protoreflect.StringKind:
			return protoreflect.ValueOfString("hello world"), true
		case protoreflect.BoolKind:
			return protoreflect.ValueOfBool(false), true
		}
		return protoreflect.Value{}, false // messages, bytes, enums: the reference leaves them
	}
	if fd.IsList() {
		list := m.Mutable(fd).List()
		for range shape {
			if v, ok := value(); ok {
				list.Append(v)
			}
		}
		return
	}
	if v, ok := value(); ok {
		m.Set(fd, v)
	}
}

// SkipList is tfs_client.SKIP_LIST: generate_random_example_batch leaves out features whose name
// holds one of these.
var SkipList = []string{"-", "_lt_", "_st_", "_lt", "_st", "_cp_", "_recent_", "_cp", "_recent"}

// RandomFeatureListBatch is tfs_client.generate_random_example_batch: for each feature of fl (in
// file order) whose Name() holds "_id" or "_name" and nothing of SkipList, a feature list named
// Name() with, per example:
//   - method VectorTop* with args: when args[0] is a number n, 1..n fids (none when n is 0);
//     otherwise the example's feature is empty;
//   - otherwise one fid;
//
// fids being slot << 48 | a random 48-bit hash. Then __LINE_ID__: sample rate 0.001, req_time now
// less 1..1000 s, actions [1..3, 3..5]. No labels.
//
// Unlike the reference, a VectorTop fid keeps its slot (the reference ORs up to 63 random bits
// over it); a feature without a slot, or one above 65535, is an error of kind Value (the
// reference raises TypeError or ValueError).
func RandomFeatureListBatch(rng *rand.Rand, fl *FeatureList, batchSize int, now time.Time) (*examplepb.ExampleBatch, error) {
	if batchSize < 0 {
		return nil, errkind.New(errkind.Value, "random example batch: batch size %d is negative", batchSize)
	}
	eb := &examplepb.ExampleBatch{BatchSize: int32(batchSize)}
	for _, f := range fl.Features {
		name := f.Name()
		if skipped(name) || !(strings.Contains(name, "_id") || strings.Contains(name, "_name")) {
			continue
		}
		if f.Slot == nil || *f.Slot < 0 || *f.Slot > maxSlotV2 {
			return nil, errkind.New(errkind.Value, "random example batch: feature %q has no slot in [0, %d]", f.FeatureName, maxSlotV2)
		}
		slot := uint64(*f.Slot) << fidV2Bits
		vectorTop := strings.HasPrefix(strings.ToLower(f.Method), "vectortop") && f.Args != nil
		list := &examplepb.NamedFeatureList{Name: name, Feature: make([]*examplepb.Feature, batchSize)}
		for i := range batchSize {
			feat := &examplepb.Feature{}
			if !vectorTop {
				fid := slot | uint64(1+rng.Int64N(fidV2Mask))
				feat.Type = &examplepb.Feature_FidV2List{FidV2List: &examplepb.FidList{Value: []uint64{fid}}}
			} else if len(f.Args) > 0 && isNumeric(f.Args[0]) {
				num, err := strconv.Atoi(f.Args[0])
				if err != nil {
					return nil, errkind.New(errkind.Value, "random example batch: feature %q: args[0] %q: %v", f.FeatureName, f.Args[0], err)
				}
				if num > 0 {
					num = 1 + rng.IntN(num)
				}
				fids := make([]uint64, num)
				for j := range fids {
					fids[j] = slot | uint64(1+rng.Int64N(math.MaxInt64-1))&fidV2Mask
				}
				feat.Type = &examplepb.Feature_FidV2List{FidV2List: &examplepb.FidList{Value: fids}}
			}
			list.Feature[i] = feat
		}
		eb.NamedFeatureList = append(eb.NamedFeatureList, list)
	}
	lineIDs := &examplepb.NamedFeatureList{Name: LineIDFeature, Feature: make([]*examplepb.Feature, batchSize)}
	for i := range batchSize {
		id := &matrixpb.LineId{
			SampleRate: proto.Float32(0.001),
			ReqTime:    proto.Int64(now.Unix() - 1 - rng.Int64N(1000)),
			Actions:    []int32{1 + rng.Int32N(3), 3 + rng.Int32N(3)},
		}
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(id)
		if err != nil {
			return nil, fmt.Errorf("random example batch: line id: %w", err)
		}
		lineIDs.Feature[i] = bytesFeature(b)
	}
	eb.NamedFeatureList = append(eb.NamedFeatureList, lineIDs)
	return eb, nil
}

func skipped(name string) bool {
	for _, s := range SkipList {
		if strings.Contains(name, s) {
			return true
		}
	}
	return false
}

// isNumeric is str.isnumeric for ASCII: non-empty, digits only.
func isNumeric(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// ProfileFeatures is how tfs_client.gen_random_file names the sparse features of the profile's
// random batches (VALID_SLOTS through get_feature_name_and_slot, with the tob env tfs_client
// enables): with no feature list, slot s is the feature "fc_slot_<s>"; with one, it is the
// list's first feature of slot s, with that feature's method.
//
// A slot the feature list lacks is an error of kind Value; the reference names it fc_slot_<s> and
// then silently leaves it out of the batch (gen_example_batch finds no such feature).
func ProfileFeatures(slots []int, fl *FeatureList) ([]SparseFeature, error) {
	out := make([]SparseFeature, 0, len(slots))
	for _, s := range slots {
		if fl == nil {
			out = append(out, SparseFeature{Name: "fc_slot_" + strconv.Itoa(s), Slot: s})
			continue
		}
		f := fl.FeatureOfSlot(s)
		if f == nil {
			return nil, errkind.New(errkind.Value, "slot %d: no feature of the feature list has it", s)
		}
		out = append(out, SparseFeature{Name: f.FeatureName, Slot: s, Method: f.Method})
	}
	return out, nil
}
