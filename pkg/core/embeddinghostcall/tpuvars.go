package embeddinghostcall

import (
	"fmt"

	"github.com/monolith-go/monolith/pkg/core/tensor"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// TPUVars are one replica's caching variables: the labels, predictions and uid buckets of its
// top-k samples for up to HostCallEveryNSteps steps, one request time and sample rate per step,
// and how many steps are filled.
type TPUVars struct {
	Labels             []float32
	Preds              []float32
	UIDBuckets         []int32
	ReqTimes           []int64
	SampleRates        []float32
	AccumulatedCounter int32
}

// NewTPUVars returns zeroed variables for one replica (what TPUVariableRestoreHook assigns at
// session creation), or nil when the host call or the caching mode is off.
func (h *HostCall) NewTPUVars() *TPUVars {
	if !h.caching() {
		return nil
	}
	perCall := h.cfg.TopKSamplingNumPerCore * h.cfg.HostCallEveryNSteps
	return &TPUVars{
		Labels:      make([]float32, perCall),
		Preds:       make([]float32, perCall),
		UIDBuckets:  make([]int32, perCall),
		ReqTimes:    make([]int64, h.cfg.HostCallEveryNSteps),
		SampleRates: make([]float32, h.cfg.HostCallEveryNSteps),
	}
}

// UpdateTPUVariables is update_tpu_variables_ops for one replica and step: at the first step of a
// host-call window (global_step mod HostCallEveryNSteps == 1) the variables are cleared; then the
// step's top-k labels, predictions and uid buckets go in at counter*top_k, its request times and
// sample rates at counter, and the counter advances. Nothing happens when caching is off. On an
// error v is unchanged.
func (h *HostCall) UpdateTPUVariables(v *TPUVars, globalStep int64, labels, preds []float32, uidBuckets []int32, reqTimes []int64, sampleRates []float32) error {
	if !h.caching() {
		return nil
	}
	if v == nil {
		return errkind.New(errkind.Value, "update tpu variables: nil variables")
	}
	k := h.cfg.TopKSamplingNumPerCore
	for _, c := range []struct {
		name string
		n    int
	}{{"labels", len(labels)}, {"preds", len(preds)}, {"uid_buckets", len(uidBuckets)}} {
		if c.n != k {
			return errkind.New(errkind.Precondition, "Expect shape: [%d], but shape is (%d,) (%s)", k, c.n, c.name)
		}
	}
	n := int64(h.cfg.HostCallEveryNSteps)
	index := ((globalStep % n) + n) % n
	old := *v
	if index == 1 {
		old = TPUVars{
			Labels: make([]float32, len(v.Labels)), Preds: make([]float32, len(v.Preds)), UIDBuckets: make([]int32, len(v.UIDBuckets)),
			ReqTimes: make([]int64, len(v.ReqTimes)), SampleRates: make([]float32, len(v.SampleRates)),
		}
	}
	offset := int64(old.AccumulatedCounter) * int64(k)
	var next TPUVars
	var err error
	if next.Labels, err = ComputeNewValue(old.Labels, labels, offset); err != nil {
		return fmt.Errorf("update %s: %w", LabelsTPUVariable, err)
	}
	if next.Preds, err = ComputeNewValue(old.Preds, preds, offset); err != nil {
		return fmt.Errorf("update %s: %w", PredsTPUVariable, err)
	}
	if next.UIDBuckets, err = ComputeNewValue(old.UIDBuckets, uidBuckets, offset); err != nil {
		return fmt.Errorf("update %s: %w", UIDBucketsTPUVariable, err)
	}
	if next.ReqTimes, err = ComputeNewValue(old.ReqTimes, reqTimes, int64(old.AccumulatedCounter)); err != nil {
		return fmt.Errorf("update %s: %w", ReqTimesTPUVariable, err)
	}
	if next.SampleRates, err = ComputeNewValue(old.SampleRates, sampleRates, int64(old.AccumulatedCounter)); err != nil {
		return fmt.Errorf("update %s: %w", SampleRatesTPUVariable, err)
	}
	// The counter moves only once every variable is updated (a control dependency in the graph).
	next.AccumulatedCounter = old.AccumulatedCounter + 1
	*v = next
	return nil
}

// RecordSummaryTPUVariables records the replica's variables as host-call tensors (under the
// RecordSummaryTensor filter, so only with scalar metrics enabled). Nothing happens when caching
// is off.
func (h *HostCall) RecordSummaryTPUVariables(v *TPUVars) error {
	if !h.caching() {
		return nil
	}
	if v == nil {
		return errkind.New(errkind.Value, "record tpu variables: nil variables")
	}
	for _, r := range []struct {
		name string
		t    tensor.Tensor
	}{
		{LabelsTPUVariable, tensor.Vector(v.Labels...)},
		{PredsTPUVariable, tensor.Vector(v.Preds...)},
		{UIDBucketsTPUVariable, tensor.Vector(v.UIDBuckets...)},
		{ReqTimesTPUVariable, tensor.Vector(v.ReqTimes...)},
		{SampleRatesTPUVariable, tensor.Vector(v.SampleRates...)},
		{AccumulatedCounterTPUVariable, tensor.Scalar(v.AccumulatedCounter)},
	} {
		if err := h.RecordSummaryTensor(r.name, r.t); err != nil {
			return err
		}
	}
	return nil
}
