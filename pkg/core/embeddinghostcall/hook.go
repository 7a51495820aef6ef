package embeddinghostcall

import (
	"fmt"
	"slices"
	"strings"

	"github.com/monolith-go/monolith/pkg/core/auc"
	"github.com/monolith-go/monolith/pkg/core/tensor"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// SummaryKind says how a summary is written.
type SummaryKind int

const (
	// Scalar is tf.summary.scalar (TF stores the value as float32).
	Scalar SummaryKind = iota
	// Text is tf.summary.text of a serialized tensor (tf.io.serialize_tensor bytes).
	Text
)

func (k SummaryKind) String() string {
	if k == Text {
		return "text"
	}
	return "scalar"
}

// Summary is one summary the host call writes at Step under OutputDir()/host_call.
type Summary struct {
	Kind  SummaryKind
	Name  string
	Step  int64
	Value float32 // Scalar
	Data  []byte  // Text: a serialized TensorProto
}

func (s Summary) String() string {
	if s.Kind == Text {
		return fmt.Sprintf("%s@%d: text(%d bytes)", s.Name, s.Step, len(s.Data))
	}
	return fmt.Sprintf("%s@%d: %v", s.Name, s.Step, s.Value)
}

// HostCallFn is the host-call function generate_host_call_hook returns. It keeps the streaming
// AUC (TF's metric variables live as long as the graph), so one HostCallFn serves a whole run.
type HostCallFn struct {
	h   *HostCall
	auc *auc.Streaming
}

// GenerateHostCallHook compresses the recorded tensors and returns the host-call function with
// this core's arguments for it; both are nil when the host call is disabled. The function reads
// the TPU variables in caching mode and the per-step tensors otherwise.
func (h *HostCall) GenerateHostCallHook() (*HostCallFn, []tensor.Tensor, error) {
	if !h.cfg.EnableHostCall {
		h.log.Info("host_call has been disabled")
		return nil, nil, nil
	}
	if err := h.CompressTensors(); err != nil {
		return nil, nil, err
	}
	a, err := auc.New(auc.DefaultThresholds)
	if err != nil {
		return nil, nil, err
	}
	return &HostCallFn{h: h, auc: a}, h.Tensors(), nil
}

// AUC returns the streaming AUC metric the function updates.
func (f *HostCallFn) AUC() *auc.Streaming { return f.auc }

// Call runs the host call on every core's compressed tensors stacked along axis 0 (see
// hostcall.ConcatCores) and returns the summaries in the order the reference creates them.
func (f *HostCallFn) Call(args []tensor.Tensor) ([]Summary, error) {
	if f.h.caching() {
		return f.callWithTPUVars(args)
	}
	return f.call(args)
}

type summaries struct {
	step int64
	out  []Summary
}

func (s *summaries) scalar(name string, t tensor.Tensor) error {
	v, err := scalarValue(t)
	if err != nil {
		return fmt.Errorf("summary %s: %w", name, err)
	}
	s.out = append(s.out, Summary{Kind: Scalar, Name: name, Step: s.step, Value: v})
	return nil
}

func (s *summaries) text(name string, t tensor.Tensor) error {
	b, err := tensor.Serialize(t)
	if err != nil {
		return fmt.Errorf("summary %s: %w", name, err)
	}
	s.out = append(s.out, Summary{Kind: Text, Name: name, Step: s.step, Data: b})
	return nil
}

// reduce adds a scalar summary of the reduction of t.
func (s *summaries) reduce(name string, t tensor.Tensor, r tensor.Reduction) error {
	v, err := tensor.Reduce(t, r)
	if err != nil {
		return fmt.Errorf("summary %s: %w", name, err)
	}
	return s.scalar(name, v)
}

// first adds a scalar summary of t's first element (t[0] in the reference).
func (s *summaries) first(name string, t tensor.Tensor) error {
	if t.Size() == 0 {
		return errkind.New(errkind.Value, "summary %s: empty tensor", name)
	}
	flat, err := tensor.Reshape(t, -1)
	if err != nil {
		return err
	}
	parts, err := tensor.Split(flat, []int{1, t.Size() - 1}, 0)
	if err != nil {
		return err
	}
	return s.scalar(name, parts[0])
}

// scalarValue converts a one-element tensor to float32 as tf.summary.scalar does.
func scalarValue(t tensor.Tensor) (float32, error) {
	if t == nil || t.Size() != 1 {
		return 0, errkind.New(errkind.Value, "scalar summary needs one value")
	}
	switch x := t.(type) {
	case *tensor.Dense[bool]:
		if x.Data()[0] {
			return 1, nil
		}
		return 0, nil
	case *tensor.Dense[int32]:
		return float32(x.Data()[0]), nil
	case *tensor.Dense[int64]:
		return float32(x.Data()[0]), nil
	case *tensor.Dense[float32]:
		return x.Data()[0], nil
	case *tensor.Dense[float64]:
		return float32(x.Data()[0]), nil
	}
	return 0, errkind.New(errkind.Type, "scalar summary of dtype %s", t.DType())
}

// scalarReduction maps the name suffix rules: "_avg", "_max" and "_sum" anywhere in the name.
func scalarReduction(name string) (tensor.Reduction, bool) {
	switch {
	case strings.Contains(name, "_avg"):
		return tensor.ReduceMean, true
	case strings.Contains(name, "_max"):
		return tensor.ReduceMax, true
	case strings.Contains(name, "_sum"):
		return tensor.ReduceSum, true
	}
	return 0, false
}

// decompress unpacks the host call's arguments (DecompressTensors) into the global step, which
// starts the summaries, and the tensors with their names (ts[0] is the step itself).
func (f *HostCallFn) decompress(args []tensor.Tensor) (*summaries, []tensor.Tensor, []string, error) {
	gs, ts, err := f.h.DecompressTensors(args)
	if err != nil {
		return nil, nil, nil, err
	}
	names := f.h.Names()
	if len(ts) > len(names) {
		return nil, nil, nil, errkind.New(errkind.Value, "host call: %d tensors for %d names", len(ts), len(names))
	}
	return &summaries{step: gs}, ts, names, nil
}

// call is _host_call: per-step tensors.
func (f *HostCallFn) call(args []tensor.Tensor) ([]Summary, error) {
	s, ts, names, err := f.decompress(args)
	if err != nil {
		return nil, err
	}
	var in writeInputs
	for i, t := range ts {
		if i == 0 {
			continue
		}
		name := names[i]
		if r, ok := scalarReduction(name); ok {
			err = s.reduce(name, t, r)
		} else {
			switch {
			case strings.Contains(name, LabelsForAUCCalculation):
				in.labels = t
			case strings.Contains(name, YPredForAUCCalculation):
				in.preds = t
			case strings.Contains(name, ReqTime):
				in.reqTimes, err = tensor.ExpandDims(t, -1)
			case strings.Contains(name, SampleRate):
				in.sampleRates = t
			case strings.Contains(name, UIDBucket):
				in.uidBuckets = t
			default:
				err = s.first(name, t)
			}
		}
		if err != nil {
			return nil, err
		}
	}
	if err := f.writeSummaryOps(s, in); err != nil {
		return nil, err
	}
	return s.out, nil
}

// callWithTPUVars is _host_call_with_tpu: the tensors are the replicas' caching variables.
func (f *HostCallFn) callWithTPUVars(args []tensor.Tensor) ([]Summary, error) {
	s, ts, names, err := f.decompress(args)
	if err != nil {
		return nil, err
	}
	vars := map[string]tensor.Tensor{}
	var stopSum *int32
	for i, t := range ts {
		if i == 0 {
			continue
		}
		name := names[i]
		if r, ok := scalarReduction(name); ok {
			if err := s.reduce(name, t, r); err != nil {
				return nil, err
			}
			continue
		}
		matched := false
		for _, v := range []string{LabelsTPUVariable, PredsTPUVariable, UIDBucketsTPUVariable, ReqTimesTPUVariable, SampleRatesTPUVariable, AccumulatedCounterTPUVariable} {
			if strings.Contains(name, v) {
				vars[v], matched = t, true
				break
			}
		}
		switch {
		case matched:
		case strings.Contains(name, "stopping_signals"):
			c, err := tensor.Cast[int32](t)
			if err != nil {
				return nil, err
			}
			sum, _ := tensor.Reduce(c, tensor.ReduceSum)
			v := sum.(*tensor.Dense[int32]).Data()[0]
			stopSum = &v
		case !deprecatedMetrics[name]:
			if err := s.first(name, t); err != nil {
				return nil, err
			}
		}
	}

	r := f.h.cfg.NumReplicas
	k := f.h.cfg.TopKSamplingNumPerCore
	n := f.h.cfg.HostCallEveryNSteps
	labelsV, err := replicaRows[float32](vars, LabelsTPUVariable, r, n*k)
	if err != nil {
		return nil, err
	}
	predsV, err := replicaRows[float32](vars, PredsTPUVariable, r, n*k)
	if err != nil {
		return nil, err
	}
	uidsV, err := replicaRows[int32](vars, UIDBucketsTPUVariable, r, n*k)
	if err != nil {
		return nil, err
	}
	counterV, err := replicaRows[int32](vars, AccumulatedCounterTPUVariable, r, 1)
	if err != nil {
		return nil, err
	}
	counter := counterV.Data()[0]
	used := int(counter) * k
	labels, err := tensor.Slice(labelsV, []int{0, 0}, []int{-1, used})
	if err != nil {
		return nil, fmt.Errorf("used part of %s: %w", LabelsTPUVariable, err)
	}
	preds, err := tensor.Slice(predsV, []int{0, 0}, []int{-1, used})
	if err != nil {
		return nil, fmt.Errorf("used part of %s: %w", PredsTPUVariable, err)
	}
	uids, err := tensor.Slice(uidsV, []int{0, 0}, []int{-1, used})
	if err != nil {
		return nil, fmt.Errorf("used part of %s: %w", UIDBucketsTPUVariable, err)
	}
	reqV, err := replicaRows[int64](vars, ReqTimesTPUVariable, r, n)
	if err != nil {
		return nil, err
	}
	req, err := tensor.Slice(reqV, []int{0, 0}, []int{-1, int(counter)})
	if err != nil {
		return nil, fmt.Errorf("used part of %s: %w", ReqTimesTPUVariable, err)
	}
	rateV, err := replicaRows[float32](vars, SampleRatesTPUVariable, r, n)
	if err != nil {
		return nil, err
	}
	// One sample rate (the first step's) stands for each replica's whole window.
	rates, err := tensor.Slice(rateV, []int{0, 0}, []int{-1, 1})
	if err != nil {
		return nil, fmt.Errorf("first %s: %w", SampleRatesTPUVariable, err)
	}
	rates, _ = rates.Reshape(r)

	if err := s.reduce("uid_buckets_tpu_variable_avg", uids, tensor.ReduceMean); err != nil {
		return nil, err
	}
	if err := s.reduce("accumulated_times_tpu_variable_avg", counterV, tensor.ReduceMean); err != nil {
		return nil, err
	}
	if err := s.scalar("used_slice_len_avg", tensor.Scalar(int32(used))); err != nil {
		return nil, err
	}
	if stopSum != nil {
		if err := s.scalar("stopping_signals_sum", tensor.Scalar(*stopSum)); err != nil {
			return nil, err
		}
	}
	in := writeInputs{labels: labels, preds: preds, uidBuckets: uids, reqTimes: req, sampleRates: rates, stoppingSignalsSum: stopSum}
	if err := f.writeSummaryOps(s, in); err != nil {
		return nil, err
	}
	return s.out, nil
}

// replicaRows returns the decompressed variable as (replicas, width), checking its size. The
// decompressed tensor lost its size-1 dimensions; the reshape restores them, so one replica works.
func replicaRows[T tensor.Elem](vars map[string]tensor.Tensor, name string, replicas, width int) (*tensor.Dense[T], error) {
	t, ok := vars[name]
	if !ok {
		return nil, errkind.New(errkind.Attribute, "host call: %s was not recorded (caching mode records it only with enable_host_call_scalar_metrics)", name)
	}
	d, err := tensor.As[T](t)
	if err != nil {
		return nil, fmt.Errorf("host call: %s: %w", name, err)
	}
	if d.Size() != replicas*width {
		want := []int{replicas, width}
		if name == AccumulatedCounterTPUVariable {
			want = []int{replicas}
		}
		return nil, errkind.New(errkind.Precondition, "%s shape: %s, expectd_shape: %s.", name, tensor.ShapeString(d.Shape()), tensor.ShapeList(want))
	}
	return d.Reshape(replicas, width)
}

type writeInputs struct {
	labels, preds, uidBuckets, reqTimes, sampleRates tensor.Tensor
	stoppingSignalsSum                               *int32
}

// writeSummaryOps is _write_summary_ops.
func (f *HostCallFn) writeSummaryOps(s *summaries, in writeInputs) error {
	labels, preds, reqTimes := in.labels, in.preds, in.reqTimes
	if labels != nil && preds != nil {
		if in.uidBuckets != nil {
			indices, err := sampledIndices(in.uidBuckets, in.stoppingSignalsSum)
			if err != nil {
				return err
			}
			expect := labels.Shape()
			if labels, err = sliceTensor[float32](labels, indices, expect); err != nil {
				return fmt.Errorf("sample labels: %w", err)
			}
			if preds, err = sliceTensor[float32](preds, indices, expect); err != nil {
				return fmt.Errorf("sample predictions: %w", err)
			}
			if err := s.text(DeepInsightLabels, labels); err != nil {
				return err
			}
			if err := s.text(DeepInsightPreds, preds); err != nil {
				return err
			}
			if f.h.cfg.EnableDeepInsight && reqTimes != nil {
				if reqTimes.Rank() != 2 {
					return errkind.New(errkind.Precondition, "req_times shape: %s", tensor.ShapeString(reqTimes.Shape()))
				}
				rt, err := tensor.As[int64](reqTimes)
				if err != nil {
					return fmt.Errorf("req_times: %w", err)
				}
				// Each step's request time stands for its top-k samples.
				if rt, err = tensor.Repeat(rt, f.h.cfg.TopKSamplingNumPerCore, 1); err != nil {
					return err
				}
				if reqTimes, err = sliceTensor[int64](rt, indices, expect); err != nil {
					return fmt.Errorf("sample req_times: %w", err)
				}
				if err := s.text(DeepInsightReqTimes, reqTimes); err != nil {
					return err
				}
			}
		}
		l, err := tensor.As[float32](labels)
		if err != nil {
			return fmt.Errorf("auc labels: %w", err)
		}
		p, err := tensor.As[float32](preds)
		if err != nil {
			return fmt.Errorf("auc predictions: %w", err)
		}
		if err := f.auc.Update(l.Data(), p.Data()); err != nil {
			return err
		}
		if err := s.scalar("auc", tensor.Scalar(f.auc.Value())); err != nil {
			return err
		}
		if f.h.cfg.EnableDeepInsight && in.sampleRates != nil {
			expect := in.sampleRates.Shape()
			if len(expect) != 1 {
				return errkind.New(errkind.Precondition, "Expect sample_rates shape rank to be 1, but its shape is %s", tensor.ShapeList(expect))
			}
			first, err := sliceTensor[float32](in.sampleRates, tensor.Vector[int64](0), expect)
			if err != nil {
				return fmt.Errorf("sample rates: %w", err)
			}
			if err := s.text(DeepInsightSampleRates, first); err != nil {
				return err
			}
		}
	}
	for _, m := range []struct {
		name string
		t    tensor.Tensor
	}{
		{"sampled_labels_variable_avg", labels},
		{"sampled_preds_variable_avg", preds},
		{"req_times_variable_avg", reqTimes},
		{"sample_rates_variable_avg", in.sampleRates},
	} {
		if m.t == nil {
			continue
		}
		if err := s.reduce(m.name, m.t, tensor.ReduceMean); err != nil {
			return err
		}
	}
	return nil
}

// sampledIndices is tf.squeeze(tf.where(cond)) over the flattened uid buckets: the positions of
// sampled examples (uid_bucket < UIDBucketLimit, and no stopping signal seen), as a vector, or a
// scalar when exactly one is selected.
func sampledIndices(uidBuckets tensor.Tensor, stoppingSignalsSum *int32) (*tensor.Dense[int64], error) {
	b, err := tensor.Cast[int64](uidBuckets)
	if err != nil {
		return nil, err
	}
	var idx []int64
	if stoppingSignalsSum == nil || *stoppingSignalsSum == 0 {
		for i, v := range b.Data() {
			if v < int64(UIDBucketLimit) {
				idx = append(idx, int64(i))
			}
		}
	}
	if len(idx) == 1 {
		return tensor.Scalar(idx[0]), nil
	}
	return tensor.Vector(idx...), nil
}

// sliceTensor is _slice_tensor: check the shape and dtype, then gather from the flattened tensor.
func sliceTensor[T tensor.Elem](t tensor.Tensor, indices *tensor.Dense[int64], expect []int) (*tensor.Dense[T], error) {
	if t == nil {
		return nil, errkind.New(errkind.Precondition, "slice of a missing tensor")
	}
	if !slices.Equal(t.Shape(), expect) {
		return nil, errkind.New(errkind.Precondition, "Expect shape: %s, but actual shape: %s", tensor.ShapeList(expect), tensor.ShapeList(t.Shape()))
	}
	if t.DType() != tensor.DTypeOf[T]() {
		return nil, errkind.New(errkind.Precondition, "Expect dtype <dtype: '%s'>, but actual dtype: <dtype: '%s'>", tensor.DTypeOf[T](), t.DType())
	}
	d, _ := tensor.As[T](t)
	flat, err := d.Reshape(-1)
	if err != nil {
		return nil, err
	}
	return tensor.Gather(flat, indices)
}
