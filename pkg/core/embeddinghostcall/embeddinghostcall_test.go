package embeddinghostcall

import (
	"io"
	"log/slog"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/pkg/core/auc"
	"github.com/monolith-go/monolith/pkg/core/hostcall"
	"github.com/monolith-go/monolith/pkg/core/tensor"
	"github.com/monolith-go/monolith/pkg/errkind"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// base_embedding_host_call_test.py's test_compute_new_value, with its exact vectors.
func TestComputeNewValueReference(t *testing.T) {
	base := make([]int32, 10)
	delta := []int32{1, 1}
	for _, step := range []struct {
		offset int64
		want   []int32
	}{
		{1, []int32{0, 1, 1, 0, 0, 0, 0, 0, 0, 0}},
		{5, []int32{0, 1, 1, 0, 0, 1, 1, 0, 0, 0}},
		{6, []int32{0, 1, 1, 0, 0, 1, 2, 1, 0, 0}},
	} {
		var err error
		if base, err = ComputeNewValue(base, delta, step.offset); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(base, step.want) {
			t.Fatalf("offset %d: %v, want %v", step.offset, base, step.want)
		}
	}
}

func TestComputeNewValue(t *testing.T) {
	for _, c := range []struct {
		name        string
		base, delta []float32
		offset      int64
		want        []float32
	}{
		// tf.roll wraps around the end and takes negative shifts.
		{"wraps", []float32{0, 0, 0, 0}, []float32{1, 2}, 3, []float32{2, 0, 0, 1}},
		{"negative offset", []float32{0, 0, 0, 0}, []float32{1, 2}, -1, []float32{2, 0, 0, 1}},
		{"offset beyond length", []float32{1, 1, 1}, []float32{1}, 7, []float32{1, 2, 1}},
		{"same length", []float32{1, 1}, []float32{2, 3}, 0, []float32{3, 4}},
		{"empty", []float32{}, []float32{}, 5, []float32{}},
	} {
		got, err := ComputeNewValue(c.base, c.delta, c.offset)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %v %v, want %v", c.name, got, err, c.want)
		}
	}
	base := []int64{1, 2}
	if _, err := ComputeNewValue(base, []int64{1, 2, 3}, 0); errkind.Of(err) != errkind.Value {
		t.Errorf("delta longer than base: %v", err)
	}
	if !reflect.DeepEqual(base, []int64{1, 2}) {
		t.Error("input changed")
	}
}

func TestNew(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		kind errkind.Kind
	}{
		{"caching needs n > 1", Config{EnableHostCall: true, EnableCachingWithTPUVarMode: true, HostCallEveryNSteps: 1, NumReplicas: 1}, errkind.Precondition},
		{"caching needs replicas", Config{EnableHostCall: true, EnableCachingWithTPUVarMode: true, HostCallEveryNSteps: 2}, errkind.Value},
		{"negative top k", Config{TopKSamplingNumPerCore: -1}, errkind.Value},
	} {
		if _, err := New(c.cfg, 0); errkind.Of(err) != c.kind {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	// Caching without the host call creates nothing and needs nothing.
	h, err := New(Config{EnableCachingWithTPUVarMode: true, HostCallEveryNSteps: 1, Logger: quiet}, 0)
	if err != nil || h.NewTPUVars() != nil {
		t.Fatalf("caching without host call: %v %v", h, err)
	}
	if !strings.Contains(h.String(), "caching=true") || h.Config().HostCallEveryNSteps != 1 {
		t.Errorf("string %s", h)
	}
	fn, args, err := h.GenerateHostCallHook()
	if fn != nil || args != nil || err != nil {
		t.Errorf("disabled host call hook: %v %v %v", fn, args, err)
	}
}

func TestRecordFilter(t *testing.T) {
	for _, c := range []struct {
		name           string
		scalar, cached bool
		want           []string
	}{
		{"auc metrics only", false, false, []string{"global_step", "labels_for_auc_calculation", "uid_bucket"}},
		{"scalar metrics", true, false, []string{"global_step", "loss_avg", "labels_for_auc_calculation", "uid_bucket"}},
		{"caching drops the per-step auc inputs", true, true, []string{"global_step", "loss_avg"}},
		{"caching without scalar metrics records nothing", false, true, []string{"global_step"}},
	} {
		h, err := New(Config{EnableHostCall: true, EnableHostCallScalarMetrics: c.scalar, EnableCachingWithTPUVarMode: c.cached, HostCallEveryNSteps: 2, NumReplicas: 1, TopKSamplingNumPerCore: 1, Logger: quiet}, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"loss_avg", LabelsForAUCCalculation, UIDBucket} {
			if err := h.RecordSummaryTensor(n, tensor.Vector[float32](1)); err != nil {
				t.Fatal(err)
			}
		}
		if got := h.Names(); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func cachingHostCall(t *testing.T, gs int64, n, k, replicas int) *HostCall {
	t.Helper()
	h, err := New(Config{EnableHostCall: true, EnableHostCallScalarMetrics: true, EnableDeepInsight: true, EnableCachingWithTPUVarMode: true,
		TopKSamplingNumPerCore: k, HostCallEveryNSteps: n, NumReplicas: replicas, Logger: quiet}, gs)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestUpdateTPUVariables(t *testing.T) {
	h := cachingHostCall(t, 0, 3, 2, 1)
	v := h.NewTPUVars()
	step := func(gs int64, l float32) {
		t.Helper()
		if err := h.UpdateTPUVariables(v, gs, []float32{l, l + 0.5}, []float32{0.1, 0.2}, []int32{int32(gs), 9}, []int64{gs * 100}, []float32{0.5}); err != nil {
			t.Fatal(err)
		}
	}
	step(1, 1)
	step(2, 2)
	step(3, 3)
	want := &TPUVars{
		Labels: []float32{1, 1.5, 2, 2.5, 3, 3.5}, Preds: []float32{0.1, 0.2, 0.1, 0.2, 0.1, 0.2},
		UIDBuckets: []int32{1, 9, 2, 9, 3, 9}, ReqTimes: []int64{100, 200, 300}, SampleRates: []float32{0.5, 0.5, 0.5}, AccumulatedCounter: 3,
	}
	if !reflect.DeepEqual(v, want) {
		t.Fatalf("after a window: %+v", v)
	}
	// global_step mod 3 == 1 starts a new window from zero.
	step(4, 7)
	want = &TPUVars{
		Labels: []float32{7, 7.5, 0, 0, 0, 0}, Preds: []float32{0.1, 0.2, 0, 0, 0, 0},
		UIDBuckets: []int32{4, 9, 0, 0, 0, 0}, ReqTimes: []int64{400, 0, 0}, SampleRates: []float32{0.5, 0, 0}, AccumulatedCounter: 1,
	}
	if !reflect.DeepEqual(v, want) {
		t.Fatalf("new window: %+v", v)
	}
	// Without the clearing step the counter runs past the window and tf.roll wraps onto slot 0.
	step(5, 1)
	step(6, 1)
	step(9, 1)
	if v.AccumulatedCounter != 4 || v.Labels[0] != 8 || v.ReqTimes[0] != 1300 {
		t.Fatalf("wrapped: %+v", v)
	}

	before := *v
	if err := h.UpdateTPUVariables(v, 2, []float32{1}, []float32{1, 2}, []int32{1, 2}, nil, nil); errkind.Of(err) != errkind.Precondition || !strings.Contains(err.Error(), "Expect shape: [2], but shape is (1,)") {
		t.Errorf("short labels: %v", err)
	}
	if err := h.UpdateTPUVariables(v, 2, []float32{1, 2}, []float32{1, 2}, []int32{1, 2}, []int64{1, 2, 3, 4}, nil); errkind.Of(err) != errkind.Value {
		t.Errorf("req_times longer than the window: %v", err)
	}
	if !reflect.DeepEqual(*v, before) {
		t.Error("a failed update changed the variables")
	}
	if err := h.UpdateTPUVariables(nil, 1, nil, nil, nil, nil, nil); errkind.Of(err) != errkind.Value {
		t.Errorf("nil vars: %v", err)
	}
	off, _ := New(Config{EnableHostCall: true, Logger: quiet}, 0)
	if err := off.UpdateTPUVariables(nil, 1, nil, nil, nil, nil, nil); err != nil {
		t.Errorf("caching off: %v", err)
	}
	if err := off.RecordSummaryTPUVariables(nil); err != nil {
		t.Errorf("caching off: %v", err)
	}
}

func parse[T tensor.Elem](t *testing.T, b []byte) []T {
	t.Helper()
	x, err := tensor.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	d, err := tensor.As[T](x)
	if err != nil {
		t.Fatal(err)
	}
	return d.Data()
}

type rec struct {
	name string
	t    tensor.Tensor
}

func TestHostCallPerStep(t *testing.T) {
	cfg := Config{EnableHostCall: true, EnableHostCallScalarMetrics: true, EnableDeepInsight: true, TopKSamplingNumPerCore: 2, Logger: quiet}
	cores := [][]rec{
		{{"step_count", tensor.Scalar[int64](7)}, {"loss_avg", tensor.Scalar[float32](1)}, {"grad_sum", tensor.Vector[float32](2)},
			{LabelsForAUCCalculation, tensor.Vector[float32](1, 0)}, {YPredForAUCCalculation, tensor.Vector[float32](0.8, 0.3)},
			{UIDBucket, tensor.Vector[int32](5, 500)}, {ReqTime, tensor.Vector[int64](1000)}, {SampleRate, tensor.Vector[float32](0.5)}},
		{{"step_count", tensor.Scalar[int64](8)}, {"loss_avg", tensor.Scalar[float32](3)}, {"grad_sum", tensor.Vector[float32](4)},
			{LabelsForAUCCalculation, tensor.Vector[float32](0, 1)}, {YPredForAUCCalculation, tensor.Vector[float32](0.6, 0.9)},
			{UIDBucket, tensor.Vector[int32](999, 3)}, {ReqTime, tensor.Vector[int64](2000)}, {SampleRate, tensor.Vector[float32](0.25)}},
	}
	var fn *HostCallFn
	var perCore [][]tensor.Tensor
	for i, recs := range cores {
		h, err := New(cfg, 11)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if err := h.RecordSummaryTensor(r.name, r.t); err != nil {
				t.Fatal(err)
			}
		}
		f, args, err := h.GenerateHostCallHook()
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			fn = f
		}
		perCore = append(perCore, args)
	}
	args, err := hostcall.ConcatCores(perCore)
	if err != nil {
		t.Fatal(err)
	}
	out, err := fn.Call(args)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	scalars := map[string]float32{}
	texts := map[string][]byte{}
	for _, s := range out {
		names = append(names, s.Name)
		if s.Step != 11 {
			t.Errorf("%s at step %d", s.Name, s.Step)
		}
		if s.Kind == Scalar {
			scalars[s.Name] = s.Value
		} else {
			texts[s.Name] = s.Data
		}
	}
	wantNames := []string{"step_count", "loss_avg", "grad_sum", DeepInsightLabels, DeepInsightPreds, DeepInsightReqTimes, "auc", DeepInsightSampleRates,
		"sampled_labels_variable_avg", "sampled_preds_variable_avg", "req_times_variable_avg", "sample_rates_variable_avg"}
	if !reflect.DeepEqual(names, wantNames) {
		t.Fatalf("summaries %v", names)
	}
	// Only uid buckets 5 (core 0, first) and 3 (core 1, second) are below 10.
	wantScalars := map[string]float32{"step_count": 7, "loss_avg": 2, "grad_sum": 6, "auc": 0, "sampled_labels_variable_avg": 1,
		"sampled_preds_variable_avg": 0.85, "req_times_variable_avg": 1500, "sample_rates_variable_avg": 0.375}
	for k, v := range wantScalars {
		if math.Abs(float64(scalars[k]-v)) > 1e-6 {
			t.Errorf("%s = %v, want %v", k, scalars[k], v)
		}
	}
	if got := parse[float32](t, texts[DeepInsightLabels]); !reflect.DeepEqual(got, []float32{1, 1}) {
		t.Errorf("di_labels %v", got)
	}
	if got := parse[float32](t, texts[DeepInsightPreds]); !reflect.DeepEqual(got, []float32{0.8, 0.9}) {
		t.Errorf("di_preds %v", got)
	}
	if got := parse[int64](t, texts[DeepInsightReqTimes]); !reflect.DeepEqual(got, []int64{1000, 2000}) {
		t.Errorf("di_req_times %v", got)
	}
	if got := parse[float32](t, texts[DeepInsightSampleRates]); !reflect.DeepEqual(got, []float32{0.5}) {
		t.Errorf("di_example_sample_rates %v", got)
	}

	// The AUC streams over calls: a second step with a negative among the sampled examples.
	h0, _ := New(cfg, 12)
	h1, _ := New(cfg, 12)
	for i, h := range []*HostCall{h0, h1} {
		for _, r := range cores[i] {
			if r.name == LabelsForAUCCalculation {
				r.t = tensor.Vector[float32](0, 0)
			}
			if err := h.RecordSummaryTensor(r.name, r.t); err != nil {
				t.Fatal(err)
			}
		}
		if err := h.CompressTensors(); err != nil {
			t.Fatal(err)
		}
	}
	args, _ = hostcall.ConcatCores([][]tensor.Tensor{h0.Tensors(), h1.Tensors()})
	out, err = fn.Call(args)
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := auc.New(auc.DefaultThresholds)
	_ = ref.Update([]float32{1, 1, 0, 0}, []float32{0.8, 0.9, 0.8, 0.9})
	for _, s := range out {
		if s.Name == "auc" && s.Value != ref.Value() {
			t.Errorf("streamed auc %v, want %v", s.Value, ref.Value())
		}
	}
	if fn.AUC().Value() != ref.Value() {
		t.Errorf("metric %v", fn.AUC().Value())
	}
}

// With exactly one sampled example, tf.squeeze(tf.where(...)) is a scalar and so are the sampled
// tensors; without uid buckets every example enters the AUC.
func TestHostCallSampling(t *testing.T) {
	cfg := Config{EnableHostCall: true, TopKSamplingNumPerCore: 2, Logger: quiet}
	run := func(recs []rec) []Summary {
		t.Helper()
		var perCore [][]tensor.Tensor
		var fn *HostCallFn
		for range 2 {
			h, _ := New(cfg, 3)
			for _, r := range recs {
				if err := h.RecordSummaryTensor(r.name, r.t); err != nil {
					t.Fatal(err)
				}
			}
			f, args, err := h.GenerateHostCallHook()
			if err != nil {
				t.Fatal(err)
			}
			fn = f
			perCore = append(perCore, args)
		}
		args, _ := hostcall.ConcatCores(perCore)
		out, err := fn.Call(args)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	out := run([]rec{{LabelsForAUCCalculation, tensor.Vector[float32](1, 0)}, {YPredForAUCCalculation, tensor.Vector[float32](0.7, 0.2)},
		{UIDBucket, tensor.Vector[int32](1, 50)}, {ReqTime, tensor.Vector[int64](5)}, {SampleRate, tensor.Vector[float32](1)}})
	// Each core's first example (bucket 1) is sampled.
	if out[0].Name != DeepInsightLabels || !reflect.DeepEqual(parse[float32](t, out[0].Data), []float32{1, 1}) {
		t.Fatalf("first summary %v", out[0])
	}
	// No bucket below 10: nothing sampled, the AUC sees nothing and the mean of no labels is NaN.
	out = run([]rec{{LabelsForAUCCalculation, tensor.Vector[float32](1)}, {YPredForAUCCalculation, tensor.Vector[float32](0.7)},
		{UIDBucket, tensor.Vector[int32](50)}})
	got := map[string]Summary{}
	for _, s := range out {
		got[s.Name] = s
	}
	if len(parse[float32](t, got[DeepInsightLabels].Data)) != 0 || got["auc"].Value != 0 || !math.IsNaN(float64(got["sampled_labels_variable_avg"].Value)) {
		t.Errorf("nothing sampled: %v", out)
	}
	// Without uid buckets every example enters the AUC.
	out = run([]rec{{LabelsForAUCCalculation, tensor.Vector[float32](1, 0)}, {YPredForAUCCalculation, tensor.Vector[float32](0.7, 0.2)}})
	if out[0].Name != "auc" || math.Abs(float64(out[0].Value)-1) > 1e-5 {
		t.Errorf("unsampled auc %v", out)
	}
}

func TestHostCallScalarIndex(t *testing.T) {
	cfg := Config{EnableHostCall: true, TopKSamplingNumPerCore: 1, Logger: quiet}
	var perCore [][]tensor.Tensor
	var fn *HostCallFn
	for core := range 2 {
		h, _ := New(cfg, 3)
		_ = h.RecordSummaryTensor(LabelsForAUCCalculation, tensor.Vector[float32](1))
		_ = h.RecordSummaryTensor(YPredForAUCCalculation, tensor.Vector[float32](0.5))
		_ = h.RecordSummaryTensor(UIDBucket, tensor.Vector(int32(core*100)))
		f, args, _ := h.GenerateHostCallHook()
		fn = f
		perCore = append(perCore, args)
	}
	args, _ := hostcall.ConcatCores(perCore)
	out, err := fn.Call(args)
	if err != nil {
		t.Fatal(err)
	}
	x, _ := tensor.Parse(out[0].Data)
	if out[0].Name != DeepInsightLabels || x.Rank() != 0 {
		t.Errorf("one sampled example: %v %v", out[0], x)
	}
}

func TestHostCallWithTPUVariables(t *testing.T) {
	const n, k, replicas = 3, 2, 2
	vars := make([]*TPUVars, replicas)
	for r := range replicas {
		vars[r] = cachingHostCall(t, 0, n, k, replicas).NewTPUVars()
	}
	preds := [][]float32{{0.9, 0.2}, {0.7, 0.4}}
	for gs := int64(1); gs <= 3; gs++ {
		labels := []float32{1, 0}
		if gs%2 == 0 {
			labels = []float32{0, 1}
		}
		uids := [][]int32{{int32(gs), 100 + int32(gs)}, {500, 2}}
		for r := range replicas {
			h := cachingHostCall(t, gs, n, k, replicas)
			if err := h.UpdateTPUVariables(vars[r], gs, labels, preds[r], uids[r], []int64{gs*100 + int64(r)}, []float32{0.1 * float32(r+1)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	var fn *HostCallFn
	var perCore [][]tensor.Tensor
	for r := range replicas {
		h := cachingHostCall(t, 3, n, k, replicas)
		if err := h.RecordSummaryTPUVariables(vars[r]); err != nil {
			t.Fatal(err)
		}
		for _, rc := range []rec{{"loss_avg", tensor.Scalar(float32(r + 1))}, {"stopping_signals", tensor.Vector(false, false)}, {LabelsForAUCCalculation, tensor.Vector[float32](1)}, {"lr", tensor.Scalar[float32](0.01)}} {
			if err := h.RecordSummaryTensor(rc.name, rc.t); err != nil {
				t.Fatal(err)
			}
		}
		f, args, err := h.GenerateHostCallHook()
		if err != nil {
			t.Fatal(err)
		}
		if r == 0 {
			fn = f
		}
		perCore = append(perCore, args)
	}
	args, err := hostcall.ConcatCores(perCore)
	if err != nil {
		t.Fatal(err)
	}
	out, err := fn.Call(args)
	if err != nil {
		t.Fatal(err)
	}
	scalars := map[string]float32{}
	texts := map[string][]byte{}
	var names []string
	for _, s := range out {
		names = append(names, s.Name)
		if s.Kind == Scalar {
			scalars[s.Name] = s.Value
		} else {
			texts[s.Name] = s.Data
		}
	}
	wantNames := []string{"loss_avg", "lr", "uid_buckets_tpu_variable_avg", "accumulated_times_tpu_variable_avg", "used_slice_len_avg", "stopping_signals_sum",
		DeepInsightLabels, DeepInsightPreds, DeepInsightReqTimes, "auc", DeepInsightSampleRates,
		"sampled_labels_variable_avg", "sampled_preds_variable_avg", "req_times_variable_avg", "sample_rates_variable_avg"}
	if !reflect.DeepEqual(names, wantNames) {
		t.Fatalf("summaries %v", names)
	}
	// Sampled positions (uid bucket < 10) of the (2, 6) variables: 0, 2, 4 of replica 0 and
	// 1, 3, 5 of replica 1.
	wantLabels := []float32{1, 0, 1, 0, 1, 0}
	wantPreds := []float32{0.9, 0.9, 0.9, 0.4, 0.4, 0.4}
	if got := parse[float32](t, texts[DeepInsightLabels]); !reflect.DeepEqual(got, wantLabels) {
		t.Errorf("di_labels %v", got)
	}
	if got := parse[float32](t, texts[DeepInsightPreds]); !reflect.DeepEqual(got, wantPreds) {
		t.Errorf("di_preds %v", got)
	}
	if got := parse[int64](t, texts[DeepInsightReqTimes]); !reflect.DeepEqual(got, []int64{100, 200, 300, 101, 201, 301}) {
		t.Errorf("di_req_times %v", got)
	}
	if got := parse[float32](t, texts[DeepInsightSampleRates]); !reflect.DeepEqual(got, []float32{0.1}) {
		t.Errorf("di_example_sample_rates %v", got)
	}
	ref, _ := auc.New(auc.DefaultThresholds)
	_ = ref.Update(wantLabels, wantPreds)
	want := map[string]float32{"loss_avg": 1.5, "lr": 0.01, "uid_buckets_tpu_variable_avg": 151, "accumulated_times_tpu_variable_avg": 3, "used_slice_len_avg": 6,
		"stopping_signals_sum": 0, "auc": ref.Value(), "sampled_labels_variable_avg": 0.5, "sampled_preds_variable_avg": 0.65,
		"req_times_variable_avg": 200, "sample_rates_variable_avg": 0.15}
	for name, v := range want {
		if math.Abs(float64(scalars[name]-v)) > 1e-6 {
			t.Errorf("%s = %v, want %v", name, scalars[name], v)
		}
	}
	if ref.Value() <= 0.5 || ref.Value() >= 1 {
		t.Errorf("auc %v: positives score higher, so between 0.5 and 1", ref.Value())
	}
}

// A stopping signal anywhere excludes every example from the sample; missing variables (scalar
// metrics off) are an error, as the reference fails on them.
func TestHostCallWithTPUVariablesEdges(t *testing.T) {
	h := cachingHostCall(t, 2, 2, 1, 1)
	v := h.NewTPUVars()
	if err := h.UpdateTPUVariables(v, 1, []float32{1}, []float32{0.5}, []int32{1}, []int64{9}, []float32{1}); err != nil {
		t.Fatal(err)
	}
	if err := h.RecordSummaryTPUVariables(v); err != nil {
		t.Fatal(err)
	}
	_ = h.RecordSummaryTensor("stopping_signals", tensor.Vector(true))
	fn, args, err := h.GenerateHostCallHook()
	if err != nil {
		t.Fatal(err)
	}
	out, err := fn.Call(args)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range out {
		if s.Name == DeepInsightLabels && len(parse[float32](t, s.Data)) != 0 {
			t.Errorf("sampled despite the stopping signal")
		}
		if s.Name == "stopping_signals_sum" && s.Value != 1 {
			t.Errorf("stopping_signals_sum %v", s.Value)
		}
	}

	noScalars, err := New(Config{EnableHostCall: true, EnableCachingWithTPUVarMode: true, HostCallEveryNSteps: 2, NumReplicas: 1, TopKSamplingNumPerCore: 1, Logger: quiet}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := noScalars.RecordSummaryTPUVariables(noScalars.NewTPUVars()); err != nil {
		t.Fatal(err)
	}
	fn, args, _ = noScalars.GenerateHostCallHook()
	if _, err := fn.Call(args); errkind.Of(err) != errkind.Attribute {
		t.Errorf("variables not recorded: %v", err)
	}
}

func TestSummaryString(t *testing.T) {
	if s := (Summary{Kind: Scalar, Name: "auc", Step: 3, Value: 0.5}).String(); s != "auc@3: 0.5" {
		t.Errorf("scalar: %s", s)
	}
	if s := (Summary{Kind: Text, Name: "di_labels", Step: 3, Data: []byte{1, 2}}).String(); s != "di_labels@3: text(2 bytes)" {
		t.Errorf("text: %s", s)
	}
	if Text.String() != "text" || Scalar.String() != "scalar" {
		t.Error("kind names")
	}
}

func TestHostCallErrors(t *testing.T) {
	call := func(cfg Config, recs []rec) error {
		t.Helper()
		h, err := New(cfg, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if err := h.RecordSummaryTensor(r.name, r.t); err != nil {
				t.Fatal(err)
			}
		}
		fn, args, err := h.GenerateHostCallHook()
		if err != nil {
			t.Fatal(err)
		}
		_, err = fn.Call(args)
		return err
	}
	di := Config{EnableHostCall: true, EnableDeepInsight: true, TopKSamplingNumPerCore: 2, Logger: quiet}
	// One core: tf.squeeze turns the (1, 1) request time into a scalar, and the rank check fails
	// as in the reference.
	err := call(di, []rec{{LabelsForAUCCalculation, tensor.Vector[float32](1, 0)}, {YPredForAUCCalculation, tensor.Vector[float32](0.5, 0.5)},
		{UIDBucket, tensor.Vector[int32](1, 2)}, {ReqTime, tensor.Vector[int64](5)}})
	if errkind.Of(err) != errkind.Precondition || !strings.Contains(err.Error(), "req_times shape: (1,)") {
		t.Errorf("one-core req_times: %v", err)
	}
	err = call(di, []rec{{LabelsForAUCCalculation, tensor.Vector[float32](1, 0)}, {YPredForAUCCalculation, tensor.Vector[float32](1.5, 0.5)}})
	if errkind.Of(err) != errkind.Value {
		t.Errorf("prediction above 1: %v", err)
	}
	err = call(di, []rec{{LabelsForAUCCalculation, tensor.Vector[float32](1, 0)}, {YPredForAUCCalculation, tensor.Vector[float32](0.5)}, {UIDBucket, tensor.Vector[int32](1, 2)}})
	if errkind.Of(err) != errkind.Precondition || !strings.Contains(err.Error(), "Expect shape: [2], but actual shape: []") {
		t.Errorf("prediction shape: %v", err)
	}
	err = call(di, []rec{{LabelsForAUCCalculation, tensor.Vector[int32](1, 0)}, {YPredForAUCCalculation, tensor.Vector[float32](0.5, 0.5)}, {UIDBucket, tensor.Vector[int32](1, 2)}})
	if errkind.Of(err) != errkind.Precondition || !strings.Contains(err.Error(), "Expect dtype <dtype: 'float32'>, but actual dtype: <dtype: 'int32'>") {
		t.Errorf("label dtype: %v", err)
	}
	err = call(di, []rec{{LabelsForAUCCalculation, tensor.Vector[float32](1, 0)}, {YPredForAUCCalculation, tensor.Vector[float32](0.5, 0.5)}, {SampleRate, tensor.Vector[float32](1)}})
	if errkind.Of(err) != errkind.Precondition || !strings.Contains(err.Error(), "Expect sample_rates shape rank to be 1, but its shape is []") {
		t.Errorf("one-core sample rates: %v", err)
	}
}

func TestHostCallScalarKinds(t *testing.T) {
	h, _ := New(Config{EnableHostCall: true, EnableHostCallScalarMetrics: true, Logger: quiet}, 4)
	for _, r := range []rec{{"flag", tensor.Vector(true)}, {"ratio", tensor.Scalar(0.25)}, {"ids_max", tensor.Vector[int64](3, 9)}, {"mask_sum", tensor.Vector(true)}} {
		if err := h.RecordSummaryTensor(r.name, r.t); err != nil {
			t.Fatal(err)
		}
	}
	fn, args, _ := h.GenerateHostCallHook()
	out, err := fn.Call(args)
	// A bool reduction is not defined (TF has no reduce_sum kernel for bool).
	if errkind.Of(err) != errkind.Type || out != nil {
		t.Fatalf("bool sum: %v %v", out, err)
	}
	h, _ = New(Config{EnableHostCall: true, EnableHostCallScalarMetrics: true, Logger: quiet}, 4)
	for _, r := range []rec{{"flag", tensor.Vector(true)}, {"ratio", tensor.Scalar(0.25)}, {"ids_max", tensor.Vector[int64](3, 9)}, {"empty", tensor.Vector[float32]()}} {
		_ = h.RecordSummaryTensor(r.name, r.t)
	}
	fn, args, _ = h.GenerateHostCallHook()
	if _, err := fn.Call(args); errkind.Of(err) != errkind.Value {
		t.Fatalf("first element of an empty tensor: %v", err)
	}
	h, _ = New(Config{EnableHostCall: true, EnableHostCallScalarMetrics: true, Logger: quiet}, 4)
	for _, r := range []rec{{"flag", tensor.Vector(true)}, {"ratio", tensor.Scalar(0.25)}, {"ids_max", tensor.Vector[int64](3, 9)}} {
		_ = h.RecordSummaryTensor(r.name, r.t)
	}
	fn, args, _ = h.GenerateHostCallHook()
	out, err = fn.Call(args)
	if err != nil {
		t.Fatal(err)
	}
	want := []Summary{{Name: "ids_max", Step: 4, Value: 9}, {Name: "flag", Step: 4, Value: 1}, {Name: "ratio", Step: 4, Value: 0.25}}
	if !reflect.DeepEqual(out, want) {
		t.Errorf("summaries %v", out)
	}
}

// The host call checks the variables against the configured replica count.
func TestHostCallWithTPUVariablesReplicaMismatch(t *testing.T) {
	h := cachingHostCall(t, 2, 2, 1, 2)
	if err := h.RecordSummaryTPUVariables(h.NewTPUVars()); err != nil {
		t.Fatal(err)
	}
	fn, args, _ := h.GenerateHostCallHook()
	_, err := fn.Call(args) // one core's tensors, two replicas configured
	if errkind.Of(err) != errkind.Precondition || !strings.Contains(err.Error(), "labels_tpu_variable shape: (2,), expectd_shape: [2, 2].") {
		t.Errorf("replica mismatch: %v", err)
	}
}
