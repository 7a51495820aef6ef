package entry

import (
	"fmt"
	"maps"
	"slices"

	"google.golang.org/protobuf/proto"

	examplepb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/example"
	parserpb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/parser"
	tfframework "github.com/monolith-go/monolith/gen/pb/tensorflow/core/framework"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/export"
	"github.com/monolith-go/monolith/pkg/modelserver/tensors"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
)

// The entry signature's input names (one of them per request) and its output.
const (
	// InputExampleBatch is serialized ExampleBatches (DT_STRING, usually one), their examples in
	// order: what tfs_client sends for --input_type example_batch.
	InputExampleBatch = "example_batch"
	// InputInstances is serialized Instances (DT_STRING [n]), one an example: tfs_client's
	// instance and example_batch_to_instance inputs.
	InputInstances = "instances"
	// InputExamples is serialized Examples (DT_STRING [n]), as the trainer reads them.
	InputExamples = "examples"
	// OutputScores is each example's click probability (DT_FLOAT [n]).
	OutputScores = "scores"
)

// inputReader turns the entry's inputs into the batch the model predicts: per example its dense
// row (the spec's dense features in order) and the fids of its sparse features (by name; v1 fids
// converted to v2). Labels are not needed and are zero.
type inputReader struct {
	spec export.ModelSpec
	// featureOfSlot maps a slot to the sparse feature taking it (for an Instance's bare fids).
	featureOfSlot map[int]string
}

func newInputReader(spec export.ModelSpec) *inputReader {
	r := &inputReader{spec: spec, featureOfSlot: map[int]string{}}
	for _, f := range spec.SparseFeatures {
		r.featureOfSlot[f.Slot] = f.Name
	}
	return r
}

// example is one example's features: a float list or fids by name.
type example struct {
	floats map[string][]float32
	fids   map[string][]uint64
}

// read parses inputs; errors are of kind Value.
func (r *inputReader) read(inputs map[string]*tfframework.TensorProto) (*batch.Batch, error) {
	var name string
	for k := range inputs {
		switch k {
		case InputExampleBatch, InputInstances, InputExamples:
			if name != "" {
				return nil, errkind.New(errkind.Value, "inputs %q and %q: give one", name, k)
			}
			name = k
		default:
			return nil, errkind.New(errkind.Value, "input tensor alias not found in signature: %s (inputs: %s, %s or %s)", k, InputExampleBatch, InputInstances, InputExamples)
		}
	}
	if name == "" {
		return nil, errkind.New(errkind.Value, "no input: give %s, %s or %s", InputExampleBatch, InputInstances, InputExamples)
	}
	vals, err := tensors.Strings(inputs[name])
	if err != nil {
		return nil, errkind.New(errkind.Value, "input %s: %v", name, err)
	}
	var exs []example
	for i, v := range vals {
		var more []example
		switch name {
		case InputExampleBatch:
			more, err = fromExampleBatch(v)
		case InputInstances:
			more, err = r.fromInstance(v)
		case InputExamples:
			more, err = fromExample(v)
		}
		if err != nil {
			return nil, errkind.New(errkind.Value, "input %s, value %d: %v", name, i, err)
		}
		exs = append(exs, more...)
	}
	if len(exs) == 0 {
		return nil, errkind.New(errkind.Value, "input %s holds no example", name)
	}
	return r.batch(exs)
}

func (r *inputReader) batch(exs []example) (*batch.Batch, error) {
	b := &batch.Batch{Labels: make([]float32, len(exs)), DenseDim: r.spec.Schema().DenseDim(), Fids: make([][]uint64, len(exs))}
	b.Dense = make([]float32, 0, len(exs)*b.DenseDim)
	for i, ex := range exs {
		for _, d := range r.spec.DenseFeatures {
			v, ok := ex.floats[d.Name]
			if !ok && d.Default != nil {
				v, ok = d.Default, true
			}
			if !ok {
				return nil, errkind.New(errkind.Value, "example %d has no float feature %q (the model's dense features: %s)", i, d.Name, denseNames(r.spec))
			}
			if len(v) != d.Dim {
				return nil, errkind.New(errkind.Value, "example %d: feature %q has %d values, the model takes %d", i, d.Name, len(v), d.Dim)
			}
			b.Dense = append(b.Dense, v...)
		}
		for _, f := range r.spec.SparseFeatures {
			fids, ok := ex.fids[f.Name]
			if !ok {
				fids = f.Default
			}
			b.Fids[i] = append(b.Fids[i], fids...)
		}
	}
	return b, nil
}

func denseNames(spec export.ModelSpec) string {
	var out []string
	for _, d := range spec.DenseFeatures {
		out = append(out, fmt.Sprintf("%s (%d values)", d.Name, d.Dim))
	}
	return fmt.Sprint(out)
}

// add records an ExampleBatch or Example feature: floats from float_list or double_list, fids from
// fid_v2_list or fid_v1_list; other kinds are no feature the model reads.
func (e *example) add(name string, f *examplepb.Feature) {
	switch t := f.GetType().(type) {
	case *examplepb.Feature_FloatList:
		e.floats[name] = t.FloatList.GetValue()
	case *examplepb.Feature_DoubleList:
		v := make([]float32, len(t.DoubleList.GetValue()))
		for i, d := range t.DoubleList.GetValue() {
			v[i] = float32(d)
		}
		e.floats[name] = v
	case *examplepb.Feature_FidV2List:
		e.fids[name] = t.FidV2List.GetValue()
	case *examplepb.Feature_FidV1List:
		v := make([]uint64, len(t.FidV1List.GetValue()))
		for i, fid := range t.FidV1List.GetValue() {
			v[i] = batch.FIDV1ToV2(fid)
		}
		e.fids[name] = v
	}
}

func newExample() example {
	return example{floats: map[string][]float32{}, fids: map[string][]uint64{}}
}

func fromExample(data []byte) ([]example, error) {
	ex := &examplepb.Example{}
	if err := proto.Unmarshal(data, ex); err != nil {
		return nil, fmt.Errorf("parse Example: %w", err)
	}
	e := newExample()
	for _, nf := range ex.GetNamedFeature() {
		e.add(nf.GetName(), nf.GetFeature())
	}
	return []example{e}, nil
}

// fromExampleBatch reads the examples of an ExampleBatch: example i has feature i of each
// INDIVIDUAL list and feature 0 of each SHARED one.
func fromExampleBatch(data []byte) ([]example, error) {
	eb := &examplepb.ExampleBatch{}
	if err := proto.Unmarshal(data, eb); err != nil {
		return nil, fmt.Errorf("parse ExampleBatch: %w", err)
	}
	n := int(eb.GetBatchSize())
	if n < 0 {
		return nil, fmt.Errorf("ExampleBatch of batch_size %d", n)
	}
	lists := eb.GetNamedFeatureList()
	for _, l := range lists {
		need := n
		if l.GetType() == examplepb.FeatureListType_SHARED {
			need = min(n, 1)
		}
		if len(l.GetFeature()) < need {
			return nil, fmt.Errorf("ExampleBatch feature list %q (%v) has %d features, batch_size is %d", l.GetName(), l.GetType(), len(l.GetFeature()), n)
		}
	}
	out := make([]example, n)
	for i := range out {
		out[i] = newExample()
		for _, l := range lists {
			k := i
			if l.GetType() == examplepb.FeatureListType_SHARED {
				k = 0
			}
			out[i].add(l.GetName(), l.GetFeature()[k])
		}
	}
	return out, nil
}

// fromInstance reads an Instance: named features' fids (v2) and float values, and the bare v1
// fids of a slot some sparse feature takes, when the Instance has no named feature of that name
// (tfs_client's random instances carry only those).
func (r *inputReader) fromInstance(data []byte) ([]example, error) {
	inst := &parserpb.Instance{}
	if err := proto.Unmarshal(data, inst); err != nil {
		return nil, fmt.Errorf("parse Instance: %w", err)
	}
	e := newExample()
	for _, f := range inst.GetFeature() {
		switch {
		case len(f.GetFid()) > 0:
			e.fids[f.GetName()] = f.GetFid()
		case len(f.GetFloatValue()) > 0:
			e.floats[f.GetName()] = f.GetFloatValue()
		}
	}
	named := maps.Clone(e.fids)
	for _, fid := range inst.GetFid() {
		name, ok := r.featureOfSlot[batch.SlotOfFID(batch.FIDV1ToV2(fid))]
		if _, has := named[name]; ok && !has {
			e.fids[name] = append(e.fids[name], batch.FIDV1ToV2(fid))
		}
	}
	return []example{e}, nil
}

// inputNames are the signature's inputs, sorted.
var inputNames = slices.Sorted(slices.Values([]string{InputExampleBatch, InputExamples, InputInstances}))
