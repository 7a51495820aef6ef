package instance

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	matrixpb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto"
	examplepb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/example"
	"github.com/monolith-go/monolith/pkg/errkind"
)

var testNow = time.Unix(1_700_000_000, 0)

func seeded(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0)) }

func readBatch(t *testing.T, name string) *examplepb.ExampleBatch {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	eb := &examplepb.ExampleBatch{}
	if err := prototext.Unmarshal(data, eb); err != nil {
		t.Fatal(err)
	}
	return eb
}

// listShape is what a feature list of a random batch looks like, whatever the random values:
// the kinds of feature its examples have ("none", "fid_v2:<count>", "float:<value>", "line_id:<the
// line id's fields set, repeated ones with their length>") and the slots of its fids.
type listShape struct {
	Name   string
	ID     int32
	Type   examplepb.FeatureListType
	N      int
	States []string
	Slots  []uint64
}

func shapeOf(t *testing.T, eb *examplepb.ExampleBatch) (int32, []listShape) {
	t.Helper()
	var out []listShape
	for _, l := range eb.GetNamedFeatureList() {
		states := map[string]bool{}
		slots := map[uint64]bool{}
		for _, f := range l.GetFeature() {
			switch k := f.GetType().(type) {
			case nil:
				states["none"] = true
			case *examplepb.Feature_FidV2List:
				states[fmt.Sprintf("fid_v2:%d", len(k.FidV2List.GetValue()))] = true
				for _, fid := range k.FidV2List.GetValue() {
					slots[fid>>fidV2Bits] = true
				}
			case *examplepb.Feature_FloatList:
				states[fmt.Sprintf("float:%v", k.FloatList.GetValue())] = true
			case *examplepb.Feature_BytesList:
				id := &matrixpb.LineId{}
				if err := proto.Unmarshal(k.BytesList.GetValue()[0], id); err != nil {
					t.Fatalf("%s: %v", l.GetName(), err)
				}
				var fields []string
				id.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
					if fd.IsList() {
						fields = append(fields, fmt.Sprintf("%s[%d]", fd.Name(), v.List().Len()))
					} else {
						fields = append(fields, string(fd.Name()))
					}
					return true
				})
				sort.Strings(fields)
				states["line_id:"+strings.Join(fields, ",")] = true
			default:
				states[fmt.Sprintf("%T", k)] = true
			}
		}
		s := listShape{Name: l.GetName(), ID: l.GetId(), Type: l.GetType(), N: len(l.GetFeature())}
		for k := range states {
			s.States = append(s.States, k)
		}
		sort.Strings(s.States)
		for k := range slots {
			s.Slots = append(s.Slots, k)
		}
		slices.Sort(s.Slots)
		out = append(out, s)
	}
	return eb.GetBatchSize(), out
}

func readTestFeatureList(t *testing.T) *FeatureList {
	t.Helper()
	fl, err := ReadFeatureList(filepath.Join("testdata", "feature_list.conf"))
	if err != nil {
		t.Fatal(err)
	}
	return fl
}

// profileOptions are the options of tfs_client.gen_random_file for the slots (batch size 32, the
// line id fields the reference records without stay_time, which the Go generator skips).
func profileOptions(t *testing.T, slots []int, fl *FeatureList) RandomBatchOptions {
	t.Helper()
	features, err := ProfileFeatures(slots, fl)
	if err != nil {
		t.Fatal(err)
	}
	return RandomBatchOptions{Features: features, Extra: ProfileExtraFeatures, BatchSize: 32,
		DropRate: ProfileDropRate, Actions: ProfileActions, Now: testNow}
}

// TestRandomBatchShapeMatchesReference: Go's random batches have the structure of the batches
// the reference made (testdata/reference_*.pbtxt, recorded outside this repository with the
// reference's own data_gen_utils.gen_example_batch and tfs_client.generate_random_example_batch):
// the same feature lists in the same order, names, ids and sizes, the same kinds of feature
// (present, dropped, how many fids), the same slots in the fids and the same line id fields.
func TestRandomBatchShapeMatchesReference(t *testing.T) {
	fl := readTestFeatureList(t)
	for _, tc := range []struct {
		name, golden string
		gen          func(*rand.Rand) (*examplepb.ExampleBatch, error)
		// vectorTop names the reference's VectorTop lists whose fids have their slot ORed with up
		// to 63 random bits (a reference bug Go fixes: its fids keep the slot).
		vectorTop map[string]uint64
	}{
		{"profile, no feature list", "reference_profile_batch.pbtxt", func(r *rand.Rand) (*examplepb.ExampleBatch, error) {
			return RandomExampleBatch(r, profileOptions(t, []int{1, 2, 3, 200}, nil))
		}, nil},
		{"profile, feature list", "reference_profile_batch_feature_list.pbtxt", func(r *rand.Rand) (*examplepb.ExampleBatch, error) {
			// The reference also names slot 99 (fc_slot_99), then leaves it out; Go refuses it.
			return RandomExampleBatch(r, profileOptions(t, []int{1, 200, 219, 7, 300, 11, 12}, fl))
		}, nil},
		{"tfs_client generate_random_example_batch", "reference_feature_list_batch.pbtxt", func(r *rand.Rand) (*examplepb.ExampleBatch, error) {
			return RandomFeatureListBatch(r, fl, 32, testNow)
		}, map[string]uint64{"doc_title_name": 7}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eb, err := tc.gen(seeded(7))
			if err != nil {
				t.Fatal(err)
			}
			gotN, got := shapeOf(t, eb)
			wantN, want := shapeOf(t, readBatch(t, tc.golden))
			for i, l := range want {
				slot, ok := tc.vectorTop[l.Name]
				if !ok {
					continue
				}
				for _, s := range l.Slots {
					if s&slot != slot {
						t.Fatalf("reference list %s: slot bits %d do not hold slot %d", l.Name, s, slot)
					}
				}
				want[i].Slots = []uint64{slot}
			}
			if gotN != wantN || !reflect.DeepEqual(got, want) {
				t.Errorf("batch size %d, shape\n%+v\nwant batch size %d, shape\n%+v", gotN, got, wantN, want)
			}
		})
	}
}

func TestRandomBatchDeterministicPerSeed(t *testing.T) {
	fl := readTestFeatureList(t)
	gens := map[string]func(*rand.Rand) (*examplepb.ExampleBatch, error){
		"RandomExampleBatch": func(r *rand.Rand) (*examplepb.ExampleBatch, error) {
			return RandomExampleBatch(r, profileOptions(t, []int{1, 2, 3, 4, 5, 6}, nil))
		},
		"RandomFeatureListBatch": func(r *rand.Rand) (*examplepb.ExampleBatch, error) {
			return RandomFeatureListBatch(r, fl, 16, testNow)
		},
	}
	for name, gen := range gens {
		t.Run(name, func(t *testing.T) {
			bytesOf := func(seed uint64) string {
				eb, err := gen(seeded(seed))
				if err != nil {
					t.Fatal(err)
				}
				b, err := proto.MarshalOptions{Deterministic: true}.Marshal(eb)
				if err != nil {
					t.Fatal(err)
				}
				return string(b)
			}
			a, b, c := bytesOf(1), bytesOf(1), bytesOf(2)
			if a != b {
				t.Error("two batches of seed 1 differ")
			}
			if a == c {
				t.Error("the batches of seeds 1 and 2 are the same")
			}
		})
	}
}

// TestRandomExampleBatchRules checks fill_features' and fill_line_id's rules on a large batch.
func TestRandomExampleBatchRules(t *testing.T) {
	const n = 2000
	opts := RandomBatchOptions{
		Features: []SparseFeature{
			{Name: "fc_slot_1", Slot: 1}, {Name: "fc_slot_200", Slot: 200}, {Name: "fc_slot_5", Slot: 5},
			{Name: "f_user_recent_x", Slot: 6}, {Name: "f_y_cp", Slot: 7}, {Name: "f_comb", Slot: 8, Method: "Combine"},
			{Name: "f_top", Slot: 9, Method: "VectorTopString"}, {Name: "f_max", Slot: maxSlotV2 - 1},
		},
		Extra: ProfileExtraFeatures, BatchSize: n, DropRate: ProfileDropRate, Actions: ProfileActions, Now: testNow,
	}
	eb, err := RandomExampleBatch(seeded(3), opts)
	if err != nil {
		t.Fatal(err)
	}
	lists := eb.GetNamedFeatureList()
	if eb.GetBatchSize() != n || len(lists) != len(opts.Features)+2 {
		t.Fatalf("batch size %d, %d lists", eb.GetBatchSize(), len(lists))
	}
	for i, f := range opts.Features {
		l := lists[i]
		if l.GetName() != f.Name || l.GetId() != int32(f.Slot) || len(l.GetFeature()) != n {
			t.Fatalf("list %d: %s id %d with %d features, want %s id %d", i, l.GetName(), l.GetId(), len(l.GetFeature()), f.Name, f.Slot)
		}
		counts := map[int]int{} // fid count -> examples; -1: no fid list
		for _, feat := range l.GetFeature() {
			fl := feat.GetFidV2List()
			if fl == nil {
				counts[-1]++
				continue
			}
			counts[len(fl.GetValue())]++
			for _, fid := range fl.GetValue() {
				if fid>>fidV2Bits != uint64(f.Slot) {
					t.Fatalf("%s: fid %#x has slot %d", f.Name, fid, fid>>fidV2Bits)
				}
			}
		}
		share := func(k int) float64 { return float64(counts[k]) / n }
		switch f.Slot {
		case 1, 200: // never dropped
			if counts[1] != n {
				t.Errorf("%s: fid counts %v, want one fid in every example", f.Name, counts)
			}
		case 5, maxSlotV2 - 1: // one fid or nothing, half the time each
			if len(counts) != 2 || share(1) < 0.45 || share(1) > 0.55 {
				t.Errorf("%s: fid counts %v, want one fid in about half of the examples, none otherwise", f.Name, counts)
			}
		default: // _recent, _cp, Combine, VectorTopString: dropped half the time, else 0..2 fids
			if len(counts) != 4 || share(-1) < 0.45 || share(-1) > 0.55 || share(0) < 0.13 || share(2) > 0.2 {
				t.Errorf("%s: fid counts %v, want none in half the examples, 0, 1 or 2 fids in a sixth each", f.Name, counts)
			}
		}
	}
	lineIDs, labels := lists[len(lists)-2], lists[len(lists)-1]
	if lineIDs.GetName() != LineIDFeature || labels.GetName() != LabelFeature {
		t.Fatalf("last lists %s, %s", lineIDs.GetName(), labels.GetName())
	}
	for i := range n {
		if got := labels.GetFeature()[i].GetFloatList().GetValue(); len(got) != 1 || got[0] != float32(i%2) {
			t.Fatalf("label %d = %v, want [%d]", i, got, i%2)
		}
		id := &matrixpb.LineId{}
		if err := proto.Unmarshal(lineIDs.GetFeature()[i].GetBytesList().GetValue()[0], id); err != nil {
			t.Fatal(err)
		}
		switch {
		case id.GetUid()>>fidV2Bits != UserIDSlot, id.GetItemId()>>fidV2Bits != ItemIDSlot:
			t.Fatalf("line id %d: uid %#x, item id %#x: want slots 1 and 200", i, id.GetUid(), id.GetItemId())
		case id.GetReqTime() != testNow.Unix(), id.GetSampleRate() != 1:
			t.Fatalf("line id %d: req_time %d, sample rate %v", i, id.GetReqTime(), id.GetSampleRate())
		case len(id.GetActions()) != 1 || !slices.Contains(ProfileActions, id.GetActions()[0]):
			t.Fatalf("line id %d: actions %v", i, id.GetActions())
		case id.Chnid == nil || id.GetChnid() < 0 || id.GetChnid() > 10:
			t.Fatalf("line id %d: chnid %v, want 0..10", i, id.Chnid)
		case len(id.ProtoReflect().GetUnknown()) != 0:
			t.Fatalf("line id %d: unknown fields", i)
		}
	}
}

// TestRandomExampleBatchQuirks: what the reference does that one might not expect.
func TestRandomExampleBatchQuirks(t *testing.T) {
	one := func(f SparseFeature, drop float64, extra []ExtraFeature) *examplepb.ExampleBatch {
		t.Helper()
		eb, err := RandomExampleBatch(seeded(1), RandomBatchOptions{Features: []SparseFeature{f}, Extra: extra, BatchSize: 200, DropRate: drop, Now: testNow})
		if err != nil {
			t.Fatal(err)
		}
		return eb
	}
	// With drop rate 0, "_recent"/"_cp"/Combine/VectorTopString features are never filled
	// (fill_features asks drop_rate > 0 first).
	for _, feat := range one(SparseFeature{Name: "f_top", Slot: 3, Method: "VectorTopString"}, 0, nil).GetNamedFeatureList()[0].GetFeature() {
		if feat.GetType() != nil {
			t.Fatalf("drop rate 0: feature %v, want none", feat)
		}
	}
	// Other features are then always filled.
	for _, feat := range one(SparseFeature{Name: "f_x", Slot: 3}, 0, nil).GetNamedFeatureList()[0].GetFeature() {
		if len(feat.GetFidV2List().GetValue()) != 1 {
			t.Fatalf("drop rate 0: feature %v, want one fid", feat)
		}
	}
	// No extra features: uid, item id, req_time, sample rate 1 and one action in 0..10.
	for _, feat := range one(SparseFeature{Name: "f_x", Slot: 3}, 0, nil).GetNamedFeatureList()[1].GetFeature() {
		id := &matrixpb.LineId{}
		if err := proto.Unmarshal(feat.GetBytesList().GetValue()[0], id); err != nil {
			t.Fatal(err)
		}
		if id.Uid == nil || id.ItemId == nil || id.GetReqTime() != testNow.Unix() || id.SampleRate == nil || len(id.GetActions()) != 1 || id.GetActions()[0] > 10 {
			t.Fatalf("default line id %v", id)
		}
	}
	// Generic fields by type, repeated ones with their shape; names LineId lacks are skipped.
	extra := []ExtraFeature{{"pre_actions", 3}, {"device_type", 1}, {"is_draw", 1}, {"rank", 1}, {"sample_rate", 1}, {"no_such_field", 1}}
	for _, feat := range one(SparseFeature{Name: "f_x", Slot: 3}, 0, extra).GetNamedFeatureList()[1].GetFeature() {
		id := &matrixpb.LineId{}
		if err := proto.Unmarshal(feat.GetBytesList().GetValue()[0], id); err != nil {
			t.Fatal(err)
		}
		if len(id.GetPreActions()) != 3 || id.GetDeviceType() != "hello world" || id.IsDraw == nil || id.GetIsDraw() ||
			id.GetRank() < 0 || id.GetRank() > 10 || id.GetSampleRate() < 0 || id.GetSampleRate() >= 1 || id.Uid != nil || id.ReqTime != nil {
			t.Fatalf("line id %v", id)
		}
	}
}

func TestRandomExampleBatchErrors(t *testing.T) {
	ok := []SparseFeature{{Name: "a", Slot: 1}}
	for _, tc := range []struct {
		name string
		opts RandomBatchOptions
		want string
	}{
		{"no features", RandomBatchOptions{BatchSize: 1}, "no sparse features"},
		{"zero batch", RandomBatchOptions{Features: ok}, "batch size 0 is not positive"},
		{"repeated name", RandomBatchOptions{Features: []SparseFeature{{Name: "a", Slot: 1}, {Name: "a", Slot: 2}}, BatchSize: 1}, `feature "a" given twice`},
		{"slot 0", RandomBatchOptions{Features: []SparseFeature{{Name: "a"}}, BatchSize: 1}, "slot 0 is outside [1, 65535)"},
		{"slot too big", RandomBatchOptions{Features: []SparseFeature{{Name: "a", Slot: maxSlotV2}}, BatchSize: 1}, "slot 65535 is outside"},
		{"label", RandomBatchOptions{Features: []SparseFeature{{Name: "label", Slot: 3}}, BatchSize: 1}, "may not be named label"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := RandomExampleBatch(seeded(1), tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) || errkind.Of(err) != errkind.Value {
				t.Fatalf("error %v, want kind Value containing %q", err, tc.want)
			}
		})
	}
}

func TestRandomFeatureListBatchRules(t *testing.T) {
	fl := readTestFeatureList(t)
	const n = 500
	eb, err := RandomFeatureListBatch(seeded(5), fl, n, testNow)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range eb.GetNamedFeatureList() {
		names = append(names, l.GetName())
		if len(l.GetFeature()) != n {
			t.Fatalf("%s: %d features", l.GetName(), len(l.GetFeature()))
		}
	}
	// The features named with _id or _name, without SKIP_LIST terms, then the line ids.
	want := []string{"user_id", "doc_id", "doc_title_name", "doc_cate_id", "doc_author_id", "doc_author_id_again", "doc_id_post_click_180d_cnt", LineIDFeature}
	if !slices.Equal(names, want) {
		t.Fatalf("lists %v, want %v", names, want)
	}
	for _, l := range eb.GetNamedFeatureList()[:len(want)-1] {
		f := fl.Feature(l.GetName())
		counts := map[int]int{}
		for _, feat := range l.GetFeature() {
			if feat.GetType() == nil {
				counts[-1]++
			}
			for _, fid := range feat.GetFidV2List().GetValue() {
				if fid>>fidV2Bits != uint64(*f.Slot) {
					t.Fatalf("%s: fid %#x has slot %d, want %d", l.GetName(), fid, fid>>fidV2Bits, *f.Slot)
				}
			}
			if fids := feat.GetFidV2List(); fids != nil {
				counts[len(fids.GetValue())]++
			}
		}
		var wantCounts []int
		switch l.GetName() {
		case "doc_title_name": // VectorTopString, args=3
			wantCounts = []int{1, 2, 3}
		case "doc_cate_id": // VectorTopString, args='x': not a number
			wantCounts = []int{-1}
		case "doc_author_id": // VectorTopString, args=0
			wantCounts = []int{0}
		default:
			wantCounts = []int{1}
		}
		var got []int
		for k := range counts {
			got = append(got, k)
		}
		slices.Sort(got)
		if !slices.Equal(got, wantCounts) {
			t.Errorf("%s: fid counts %v, want %v", l.GetName(), counts, wantCounts)
		}
	}
	for _, feat := range eb.GetNamedFeatureList()[len(want)-1].GetFeature() {
		id := &matrixpb.LineId{}
		if err := proto.Unmarshal(feat.GetBytesList().GetValue()[0], id); err != nil {
			t.Fatal(err)
		}
		a := id.GetActions()
		if id.GetSampleRate() != 0.001 || id.GetReqTime() >= testNow.Unix() || id.GetReqTime() < testNow.Unix()-1000 ||
			len(a) != 2 || a[0] < 1 || a[0] > 3 || a[1] < 3 || a[1] > 5 {
			t.Fatalf("line id %v", id)
		}
	}
}

func TestProfileFeatures(t *testing.T) {
	g := loadFeatureListGolden(t)
	fl := readTestFeatureList(t)
	names := func(fs []SparseFeature) []string {
		var out []string
		for _, f := range fs {
			out = append(out, f.Name)
		}
		return out
	}
	plain, err := ProfileFeatures([]int{1, 2, 3, 200}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(plain); !slices.Equal(got, g.ProfileNames) {
		t.Errorf("no feature list: %v, want the reference's %v", got, g.ProfileNames)
	}
	withList, err := ProfileFeatures([]int{1, 200, 219, 7, 300, 11, 12}, fl)
	if err != nil {
		t.Fatal(err)
	}
	// The reference also names the slot the list lacks (99) fc_slot_99; Go refuses it (below).
	if got, want := names(withList), g.ProfileNamesWithFeatureList[:len(g.ProfileNamesWithFeatureList)-1]; !slices.Equal(got, want) {
		t.Errorf("feature list: %v, want the reference's %v", got, want)
	}
	if withList[2].Method != "VectorTopString" || withList[2].Slot != 219 {
		t.Errorf("slot 219: %+v", withList[2])
	}
	if _, err := ProfileFeatures([]int{1, 99}, fl); err == nil || !strings.Contains(err.Error(), "slot 99") || errkind.Of(err) != errkind.Value {
		t.Errorf("slot missing from the feature list: %v, want an error of kind Value naming slot 99", err)
	}
	// The reference's gen_random_file fails on stay_time (its LineId lacks the field); Go skips it.
	if !strings.Contains(g.ProfileDefaultExtraError, "stay_time") {
		t.Errorf("golden: %q", g.ProfileDefaultExtraError)
	}
}
