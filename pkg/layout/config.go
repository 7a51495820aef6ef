package layout

import (
	"fmt"
	"runtime"
	"sort"

	examplepb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/example"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// Options are the op's attributes besides feature_cfgs.
type Options struct {
	// Version is the reference op version: 1 (MonolithEmbeddingToLayout), 2, 3 or 4 (see Input).
	// Version 5 (several requests in one call) is not supported.
	Version int
	// PSNum is ps_num, the number of parameter servers; versions 2 and 4 need it.
	PSNum int
	// VariantType is variant_type: example, example_batch (or examplebatch) or instance. The op
	// does not depend on it; it is checked as the reference's wrapper checks it.
	VariantType string
	// ParallelFlag is parallel_flag: 0 runs the native kernel on one thread, anything else on
	// Threads threads.
	ParallelFlag int
	// Threads for the native kernel when ParallelFlag != 0; 0 means runtime.GOMAXPROCS(0).
	Threads int
}

// OutputSpec describes one output tensor (one layout gradient for Backward).
type OutputSpec struct {
	// Layout is the out config's name; Index the tensor's position among its shapes.
	Layout string
	Index  int
	// Shape as configured: the first dimension is the batch (-1, or a fixed size that must equal
	// the batch size).
	Shape []int
	// RowSize is the number of floats per batch row.
	RowSize int
}

type feature struct {
	name      string
	table     int
	dimsSum   int
	pooling   examplepb.PoolingType
	maxSeqLen int
}

type table struct {
	features []int // sorted feature indices
}

// slice is one out slice in plan order (layouts by name, slices in config order).
type slice struct {
	feature   int
	start     int
	dims      int
	pooling   examplepb.PoolingType
	maxSeq    int // FIRSTN: sequence positions
	output    int
	offset    int // first float of the region in an output row
	seqStride int // FIRSTN: floats between two positions
	addn      bool
	addnFirst bool
}

// Plan is a compiled FeatureConfigs: what every implementation of the op runs. It is immutable and
// safe for concurrent use.
type Plan struct {
	opts     Options
	features []feature // sorted by name
	tables   []table   // sorted by name
	outputs  []OutputSpec
	slices   []slice
	// maxEnd[f] is the largest slice end among the slices reading feature f (0: none).
	maxEnd []int
	// Native (C ABI) copies of the plan, built once.
	tableFeatures    []int32
	tableFeatureDims []int32
	native           nativePlan
}

func configErr(format string, args ...any) error {
	return errkind.New(errkind.Value, "layout: "+format, args...)
}

// Compile checks a FeatureConfigs and the op options and returns the plan the op runs. Every
// inconsistency the reference would CHECK-fail on (or silently mis-handle) is an error here:
// unknown features, slices outside the feature's dims, shapes that do not match the slices,
// FIRSTN in ADDN layouts.
func Compile(cfgs *examplepb.FeatureConfigs, opts Options) (*Plan, error) {
	switch opts.Version {
	case 1, 2, 3, 4:
	case 5:
		return nil, configErr("version 5 (several requests per call) is not supported")
	default:
		return nil, configErr("unknown version %d (want 1-4)", opts.Version)
	}
	switch opts.VariantType {
	case "example", "example_batch", "instance":
	case "examplebatch":
		opts.VariantType = "example_batch"
	default:
		return nil, configErr("variant_type %q: want example, example_batch, examplebatch or instance", opts.VariantType)
	}
	if (opts.Version == 2 || opts.Version == 4) && opts.PSNum <= 0 {
		return nil, configErr("version %d needs ps_num > 0, got %d", opts.Version, opts.PSNum)
	}
	if cfgs == nil {
		cfgs = &examplepb.FeatureConfigs{}
	}
	p := &Plan{opts: opts}
	if err := p.compileFeatures(cfgs); err != nil {
		return nil, err
	}
	if err := p.compileLayouts(cfgs); err != nil {
		return nil, err
	}
	p.native = newNativePlan(p)
	return p, nil
}

func (p *Plan) compileFeatures(cfgs *examplepb.FeatureConfigs) error {
	names := make([]string, 0, len(cfgs.GetFeatureConfigs()))
	for name := range cfgs.GetFeatureConfigs() {
		names = append(names, name)
	}
	sort.Strings(names)
	tableIdx := map[string]int{}
	var tableNames []string
	for _, name := range names {
		fc := cfgs.GetFeatureConfigs()[name]
		if fc == nil {
			return configErr("feature %q: no config", name)
		}
		if _, ok := tableIdx[fc.GetTable()]; !ok {
			tableIdx[fc.GetTable()] = -1
			tableNames = append(tableNames, fc.GetTable())
		}
	}
	sort.Strings(tableNames)
	p.tables = make([]table, len(tableNames))
	for i, t := range tableNames {
		tableIdx[t] = i
	}
	p.features = make([]feature, len(names))
	for i, name := range names {
		fc := cfgs.GetFeatureConfigs()[name]
		sum := 0
		for j, d := range fc.GetSliceDims() {
			if d <= 0 {
				return configErr("feature %q: slice_dims[%d] = %d, want > 0", name, j, d)
			}
			sum += int(d)
		}
		t := tableIdx[fc.GetTable()]
		p.features[i] = feature{name: name, table: t, dimsSum: sum, pooling: fc.GetPoolingType(),
			maxSeqLen: int(fc.GetMaxSequenceLength())}
		p.tables[t].features = append(p.tables[t].features, i)
	}
	p.tableFeatures = make([]int32, 1, len(p.tables)+1)
	for _, t := range p.tables {
		for _, f := range t.features {
			p.tableFeatureDims = append(p.tableFeatureDims, int32(p.features[f].dimsSum))
		}
		p.tableFeatures = append(p.tableFeatures, int32(len(p.tableFeatureDims)))
	}
	p.maxEnd = make([]int, len(p.features))
	return nil
}

func (p *Plan) compileLayouts(cfgs *examplepb.FeatureConfigs) error {
	featureIdx := make(map[string]int, len(p.features))
	for i, f := range p.features {
		featureIdx[f.name] = i
	}
	names := make([]string, 0, len(cfgs.GetOutConfigs()))
	for name := range cfgs.GetOutConfigs() {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		oc := cfgs.GetOutConfigs()[name]
		var slices []slice
		for i, sc := range oc.GetSliceConfigs() {
			f, ok := featureIdx[sc.GetFeatureName()]
			if !ok {
				return configErr("layout %q slice %d: unknown feature %q", name, i, sc.GetFeatureName())
			}
			fe := p.features[f]
			start, end := int(sc.GetStart()), int(sc.GetEnd())
			if start < 0 || end <= start || end > fe.dimsSum {
				return configErr("layout %q slice %d: columns [%d, %d) of feature %q (dims %d)", name, i, start, end, fe.name, fe.dimsSum)
			}
			s := slice{feature: f, start: start, dims: end - start, pooling: fe.pooling}
			switch fe.pooling {
			case examplepb.PoolingType_SUM, examplepb.PoolingType_MEAN:
			case examplepb.PoolingType_FIRSTN:
				if fe.maxSeqLen <= 0 {
					return configErr("feature %q: FIRSTN pooling needs max_sequence_length > 0, got %d", fe.name, fe.maxSeqLen)
				}
				s.maxSeq = fe.maxSeqLen
			default:
				return configErr("feature %q: unknown pooling type %d", fe.name, fe.pooling)
			}
			slices = append(slices, s)
		}
		if err := p.placeSlices(name, oc, slices); err != nil {
			return err
		}
	}
	return nil
}

// placeSlices checks a layout's shapes against its slices (as infer_shape writes them) and gives
// every slice its output tensor and region.
func (p *Plan) placeSlices(name string, oc *examplepb.OutConfig, slices []slice) error {
	shapes := oc.GetShape()
	first := len(p.outputs) // this layout's first output
	addOutput := func(shape *examplepb.TensorShape) (int, []int) {
		dims := make([]int, len(shape.GetDims()))
		row := 1
		for i, d := range shape.GetDims() {
			dims[i] = int(d)
			if i > 0 {
				row *= int(d)
			}
		}
		p.outputs = append(p.outputs, OutputSpec{Layout: name, Index: len(p.outputs) - first, Shape: dims, RowSize: row})
		return len(p.outputs) - 1, dims
	}
	checkBatchDim := func(i int, dims []int) error {
		if len(dims) == 0 || (dims[0] != -1 && dims[0] <= 0) {
			return configErr("layout %q shape %d %v: the first dimension is the batch (-1 or a size)", name, i, dims)
		}
		return nil
	}
	want := func(i int, dims []int, w ...int) error {
		if err := checkBatchDim(i, dims); err != nil {
			return err
		}
		if len(dims) != len(w)+1 {
			return configErr("layout %q shape %d is %v, want [-1 %v]", name, i, dims, w)
		}
		for j, d := range w {
			if dims[j+1] != d || d <= 0 {
				return configErr("layout %q shape %d is %v, want [-1 %v]", name, i, dims, w)
			}
		}
		return nil
	}
	switch oc.GetOutType() {
	case examplepb.OutType_NONE:
		if len(shapes) != len(slices) {
			return configErr("layout %q (NONE): %d shapes for %d slices", name, len(shapes), len(slices))
		}
		for i := range slices {
			s := &slices[i]
			o, dims := addOutput(shapes[i])
			var err error
			if s.pooling == examplepb.PoolingType_FIRSTN {
				err = want(i, dims, s.maxSeq, s.dims)
				s.seqStride = s.dims
			} else {
				err = want(i, dims, s.dims)
			}
			if err != nil {
				return err
			}
			s.output = o
		}
	case examplepb.OutType_CONCAT, examplepb.OutType_STACK, examplepb.OutType_ADDN:
		if len(shapes) != 1 {
			return configErr("layout %q (%s): %d shapes, want 1", name, oc.GetOutType(), len(shapes))
		}
		if len(slices) == 0 {
			return configErr("layout %q (%s) has no slices", name, oc.GetOutType())
		}
		seq := slices[0].pooling == examplepb.PoolingType_FIRSTN
		for i, s := range slices {
			if (s.pooling == examplepb.PoolingType_FIRSTN) != seq || s.maxSeq != slices[0].maxSeq {
				return configErr("layout %q (%s) slice %d: FIRSTN slices (with one max_sequence_length) cannot be mixed with others", name, oc.GetOutType(), i)
			}
			if oc.GetOutType() != examplepb.OutType_CONCAT && s.dims != slices[0].dims {
				return configErr("layout %q (%s) slice %d: %d columns, the first slice has %d", name, oc.GetOutType(), i, s.dims, slices[0].dims)
			}
		}
		if seq && oc.GetOutType() == examplepb.OutType_ADDN {
			return configErr("layout %q (ADDN): FIRSTN slices cannot be added", name)
		}
		o, dims := addOutput(shapes[0])
		n, d, l := len(slices), slices[0].dims, slices[0].maxSeq
		var err error
		switch oc.GetOutType() {
		case examplepb.OutType_CONCAT:
			total := 0
			for i := range slices {
				slices[i].offset = total
				total += slices[i].dims
			}
			if seq {
				err = want(0, dims, l, total)
				for i := range slices {
					slices[i].seqStride = total
				}
			} else {
				err = want(0, dims, total)
			}
		case examplepb.OutType_STACK:
			if seq {
				err = want(0, dims, n, l, d)
				for i := range slices {
					slices[i].offset, slices[i].seqStride = i*l*d, d
				}
			} else {
				err = want(0, dims, n, d)
				for i := range slices {
					slices[i].offset = i * d
				}
			}
		default: // ADDN
			err = want(0, dims, d)
			for i := range slices {
				slices[i].addn, slices[i].addnFirst = true, i == 0
			}
		}
		if err != nil {
			return err
		}
		for i := range slices {
			slices[i].output = o
		}
	default:
		return configErr("layout %q: unknown out type %d", name, oc.GetOutType())
	}
	for _, s := range slices {
		if end := s.start + s.dims; end > p.maxEnd[s.feature] {
			p.maxEnd[s.feature] = end
		}
	}
	p.slices = append(p.slices, slices...)
	return nil
}

// Outputs describes the op's output tensors in order (layouts sorted by name, then their shapes).
func (p *Plan) Outputs() []OutputSpec {
	out := make([]OutputSpec, len(p.outputs))
	for i, o := range p.outputs {
		o.Shape = append([]int(nil), o.Shape...)
		out[i] = o
	}
	return out
}

// Options returns the options the plan was compiled with (VariantType normalised).
func (p *Plan) Options() Options { return p.opts }

// threads is the number of threads the native kernel uses.
func (p *Plan) threads() int {
	if p.opts.ParallelFlag == 0 {
		return 1
	}
	if p.opts.Threads > 0 {
		return p.opts.Threads
	}
	return runtime.GOMAXPROCS(0)
}

// InferShape is the reference test's infer_shape: it sets out's out type and appends the shapes
// that type needs ([-1, ...], with a max_sequence_length dimension when maxSequenceLength > 0).
func InferShape(out *examplepb.OutConfig, outType examplepb.OutType, maxSequenceLength int) error {
	var seq []int32
	if maxSequenceLength > 0 {
		seq = []int32{int32(maxSequenceLength)}
	}
	shape := func(dims ...[]int32) {
		d := []int32{-1}
		for _, x := range dims {
			d = append(d, x...)
		}
		out.Shape = append(out.Shape, &examplepb.TensorShape{Dims: d})
	}
	sameDims := func() (int32, error) {
		last := int32(-1)
		for i, sc := range out.GetSliceConfigs() {
			d := sc.GetEnd() - sc.GetStart()
			if i > 0 && d != last {
				return 0, errkind.New(errkind.Precondition, "layout: infer_shape %s: slice %d has %d columns, slice 0 has %d", outType, i, d, last)
			}
			last = d
		}
		return last, nil
	}
	out.OutType = outType // first, as the reference does, even when it then fails
	switch outType {
	case examplepb.OutType_NONE:
		for _, sc := range out.GetSliceConfigs() {
			shape(seq, []int32{sc.GetEnd() - sc.GetStart()})
		}
	case examplepb.OutType_CONCAT:
		var last int32
		for _, sc := range out.GetSliceConfigs() {
			last += sc.GetEnd() - sc.GetStart()
		}
		shape(seq, []int32{last})
	case examplepb.OutType_STACK:
		d, err := sameDims()
		if err != nil {
			return err
		}
		shape([]int32{int32(len(out.GetSliceConfigs()))}, seq, []int32{d})
	case examplepb.OutType_ADDN:
		d, err := sameDims()
		if err != nil {
			return err
		}
		shape(seq, []int32{d})
	default:
		return errkind.New(errkind.Value, "layout: infer_shape: out_type error (%d)", outType)
	}
	return nil
}

// String describes the plan briefly (for logs).
func (p *Plan) String() string {
	return fmt.Sprintf("layout.Plan{version %d, %d features, %d tables, %d slices, %d outputs}",
		p.opts.Version, len(p.features), len(p.tables), len(p.slices), len(p.outputs))
}
