package instance

import (
	"fmt"
	"math/rand/v2"

	"google.golang.org/protobuf/proto"

	matrixpb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto"
	examplepb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/example"
	parserpb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/parser"
	tfframework "github.com/monolith-go/monolith/gen/pb/tensorflow/core/framework"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// Names of the ExampleBatch feature lists that become Instance fields instead of features.
const (
	LabelFeature  = "__LABEL__"
	LineIDFeature = "__LINE_ID__"
)

// fidV2Mask keeps the 48 feature bits of a fid; a v2 fid has the slot in the 16 bits above them.
const fidV2Mask = 1<<48 - 1

// MakeTensorProto is utils.make_tensor_proto: the serialized instances as a DT_STRING vector.
func MakeTensorProto(values [][]byte) *tfframework.TensorProto {
	return &tfframework.TensorProto{
		Dtype:       tfframework.DataType_DT_STRING,
		TensorShape: &tfframework.TensorShapeProto{Dim: []*tfframework.TensorShapeProto_Dim{{Size: int64(len(values))}}},
		StringVal:   values,
	}
}

// Marshal serializes messages deterministically (the byte layout Python's SerializeToString
// produces for these protos: fields in number order, packed repeated scalars).
func Marshal[M proto.Message](msgs []M) ([][]byte, error) {
	out := make([][]byte, len(msgs))
	opts := proto.MarshalOptions{Deterministic: true}
	for i, m := range msgs {
		b, err := opts.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("serialize message %d: %w", i, err)
		}
		out[i] = b
	}
	return out, nil
}

// DefaultVocabSizes is tfs_client._VOCAB_SIZES: the vocabulary of each of the default slots 1..6.
var DefaultVocabSizes = []int{5, 5, 5, 5, 5, 5}

// RandomInstance is tfs_client.generate_random_instance: for the i-th slot, vocabSizes[i] fids
// (slot << 54) | (i*max(vocabSizes) + r), r uniform in [1, vocabSizes[i]]. With no slots the
// slots are 1..len(vocabSizes).
func RandomInstance(rng *rand.Rand, slots, vocabSizes []int) (*parserpb.Instance, error) {
	if len(vocabSizes) == 0 {
		return nil, errkind.New(errkind.Value, "random instance: no vocabulary sizes")
	}
	if slots == nil {
		slots = make([]int, len(vocabSizes))
		for i := range slots {
			slots[i] = i + 1
		}
	}
	if len(slots) > len(vocabSizes) {
		return nil, errkind.New(errkind.Value, "random instance: %d slots but %d vocabulary sizes", len(slots), len(vocabSizes))
	}
	maxVocab := 0
	for i, v := range vocabSizes {
		if v < 1 {
			return nil, errkind.New(errkind.Value, "random instance: vocabulary size %d of slot index %d is not positive", v, i)
		}
		maxVocab = max(maxVocab, v)
	}
	inst := &parserpb.Instance{}
	for i, slot := range slots {
		if slot < 0 || slot >= 1<<10 {
			return nil, errkind.New(errkind.Value, "random instance: slot %d is outside [0, 1024)", slot)
		}
		for range vocabSizes[i] {
			inst.Fid = append(inst.Fid, uint64(slot)<<54|uint64(i*maxVocab+1+rng.IntN(vocabSizes[i])))
		}
	}
	return inst, nil
}

// maxUnbackedBatch bounds the batch_size of an ExampleBatch with only shared feature lists.
const maxUnbackedBatch = 1 << 16

// ExampleBatchToInstances is tfs_client.get_example_batch_to_instance without the file reading:
// one Instance per example of eb. For each feature list (in order), the example's feature (the
// first one of a SHARED list) becomes:
//   - __LABEL__: the labels (its float_list);
//   - __LINE_ID__: the line id, parsed from the first bytes_list value;
//   - otherwise a named feature from the first non-empty of fid_v1_list (converted to v2 fids
//     with the slot of its first fid), fid_v2_list, float_list, double_list (as floats),
//     int64_list, bytes_list; features of other kinds or empty ones are skipped.
//
// Where the reference raises IndexError or DecodeError, this returns an error of kind Value
// naming the feature list and the example.
func ExampleBatchToInstances(eb *examplepb.ExampleBatch) ([]*parserpb.Instance, error) {
	n := int(eb.GetBatchSize())
	if n < 0 {
		return nil, errkind.New(errkind.Value, "example batch: batch_size %d is negative", n)
	}
	lists := eb.GetNamedFeatureList()
	backed := false // a per-example list holds batch_size features
	for _, l := range lists {
		backed = backed || l.GetType() != examplepb.FeatureListType_SHARED
	}
	if !backed && n > maxUnbackedBatch {
		// Each example would be a copy of the shared features: a few bytes of input could ask for
		// billions of instances (found by fuzzing; the reference would try to build them).
		return nil, errkind.New(errkind.Value, "example batch: batch_size %d is backed by no per-example feature list (at most %d without one)", n, maxUnbackedBatch)
	}
	for _, l := range lists {
		have := len(l.GetFeature())
		need := n
		if l.GetType() == examplepb.FeatureListType_SHARED {
			need = min(n, 1)
		}
		if have < need {
			return nil, errkind.New(errkind.Value, "example batch: feature list %q (%v) has %d features, batch_size is %d", l.GetName(), l.GetType(), have, n)
		}
	}
	out := make([]*parserpb.Instance, n)
	for i := range n {
		inst := &parserpb.Instance{}
		for _, l := range lists {
			f := l.GetFeature()[0]
			if l.GetType() != examplepb.FeatureListType_SHARED {
				f = l.GetFeature()[i]
			}
			if err := addFeature(inst, l.GetName(), f); err != nil {
				return nil, fmt.Errorf("example batch: example %d: feature list %q: %w", i, l.GetName(), err)
			}
		}
		out[i] = inst
	}
	return out, nil
}

func addFeature(inst *parserpb.Instance, name string, f *examplepb.Feature) error {
	switch name {
	case LabelFeature:
		inst.Label = append(inst.Label, f.GetFloatList().GetValue()...)
		return nil
	case LineIDFeature:
		vals := f.GetBytesList().GetValue()
		if len(vals) == 0 {
			return errkind.New(errkind.Value, "no bytes_list value to parse the line id from")
		}
		// ParseFromString replaces the line id, and leaves it present even when empty.
		inst.LineId = &matrixpb.LineId{}
		if err := proto.Unmarshal(vals[0], inst.LineId); err != nil {
			return errkind.Wrap(errkind.Value, fmt.Errorf("parse line id: %w", err))
		}
		return nil
	}
	feat := &matrixpb.Feature{Name: proto.String(name)}
	switch {
	case len(f.GetFidV1List().GetValue()) > 0:
		v1 := f.GetFidV1List().GetValue()
		slot := v1[0] >> 54
		feat.Fid = make([]uint64, len(v1))
		for j, v := range v1 {
			feat.Fid[j] = slot<<48 | v&fidV2Mask
		}
	case len(f.GetFidV2List().GetValue()) > 0:
		feat.Fid = append([]uint64(nil), f.GetFidV2List().GetValue()...)
	case len(f.GetFloatList().GetValue()) > 0:
		feat.FloatValue = append([]float32(nil), f.GetFloatList().GetValue()...)
	case len(f.GetDoubleList().GetValue()) > 0:
		for _, v := range f.GetDoubleList().GetValue() {
			feat.FloatValue = append(feat.FloatValue, float32(v))
		}
	case len(f.GetInt64List().GetValue()) > 0:
		feat.Int64Value = append([]int64(nil), f.GetInt64List().GetValue()...)
	case len(f.GetBytesList().GetValue()) > 0:
		feat.BytesValue = append([][]byte(nil), f.GetBytesList().GetValue()...)
	default:
		return nil
	}
	inst.Feature = append(inst.Feature, feat)
	return nil
}
