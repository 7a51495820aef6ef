// Package embeddinghostcall is monolith/core/base_embedding_host_call.py as plain Go: the host
// call of an embedding task (scalar metrics, AUC on a uid-sampled subset of examples, DeepInsight
// tensors) and its TPU-variable caching mode, in which every replica accumulates its top-k
// samples over host_call_every_n_steps steps before one host call reads them.
//
// The TF graph is replaced by values: a HostCall records one core's tensors of one step; TPUVars
// are one replica's caching variables; HostCallFn.Call computes, from every core's compressed
// tensors, the summaries the reference writes with tf.summary (see Summary).
package embeddinghostcall

import (
	"fmt"
	"log/slog"

	"github.com/monolith-go/monolith/pkg/core/hostcall"
	"github.com/monolith-go/monolith/pkg/core/tensor"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// Tensor names the host call recognises.
const (
	LabelsForAUCCalculation = "labels_for_auc_calculation"
	YPredForAUCCalculation  = "y_pred_for_auc_calculation"
	ReqTime                 = "req_time"
	SampleRate              = "sample_rate"
	UID                     = "uid"
	UIDBucket               = "uid_bucket"
)

// Names of the DeepInsight text summaries.
const (
	DeepInsightSampleRates = "di_example_sample_rates"
	DeepInsightLabels      = "di_labels"
	DeepInsightPreds       = "di_preds"
	DeepInsightReqTimes    = "di_req_times"
)

// Names of the TPU caching variables (and of their recorded tensors).
const (
	LabelsTPUVariable             = "labels_tpu_variable"
	PredsTPUVariable              = "preds_tpu_variable"
	UIDBucketsTPUVariable         = "uid_buckets_tpu_variable"
	ReqTimesTPUVariable           = "req_times_tpu_variable"
	SampleRatesTPUVariable        = "sample_rates_tpu_variable"
	AccumulatedCounterTPUVariable = "tpu_variables_accumulated_times"
)

const (
	// RatioN is the number of uid buckets (uid_bucket = uid mod RatioN).
	RatioN = 1000
	// UIDSampleRate is the fraction of buckets whose examples enter the AUC.
	UIDSampleRate = 0.01
)

// UIDBucketLimit is int(UIDSampleRate * RatioN): examples with uid_bucket below it are sampled.
var UIDBucketLimit = int32(UIDSampleRate * RatioN)

// aucMetrics are recorded even when scalar metrics are disabled.
var aucMetrics = map[string]bool{
	LabelsForAUCCalculation: true, YPredForAUCCalculation: true, SampleRate: true, ReqTime: true, UIDBucket: true,
}

// deprecatedMetrics are superseded by the TPU variables in caching mode.
var deprecatedMetrics = map[string]bool{
	LabelsForAUCCalculation: true, YPredForAUCCalculation: true, UIDBucket: true, ReqTime: true, SampleRate: true,
}

// Config holds BaseEmbeddingHostCall's constructor arguments and the params it reads.
type Config struct {
	OutputDir string
	// EnableHostCall is params["enable_host_call"] (it overrides the positional argument).
	EnableHostCall              bool
	EnableDeepInsight           bool
	EnableHostCallScalarMetrics bool
	EnableCachingWithTPUVarMode bool
	TopKSamplingNumPerCore      int
	HostCallEveryNSteps         int
	// NumReplicas is the TPU context's num_replicas; the caching-mode host call checks shapes
	// against it.
	NumReplicas int
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

// HostCall is one core's BaseEmbeddingHostCall.
type HostCall struct {
	*hostcall.HostCall
	cfg Config
	log *slog.Logger
}

// New starts a host call at the given global step. With caching enabled (and the host call on)
// HostCallEveryNSteps must exceed 1, as the reference asserts.
func New(cfg Config, globalStep int64) (*HostCall, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	if cfg.TopKSamplingNumPerCore < 0 {
		return nil, errkind.New(errkind.Value, "embedding host call: negative top_k_sampling_num_per_core %d", cfg.TopKSamplingNumPerCore)
	}
	if cfg.EnableHostCall && cfg.EnableCachingWithTPUVarMode {
		if cfg.HostCallEveryNSteps <= 1 {
			return nil, errkind.New(errkind.Precondition, "If tpu variables caching is enabled, we need host_call_every_n_steps bigger than 1.")
		}
		if cfg.NumReplicas <= 0 {
			return nil, errkind.New(errkind.Value, "embedding host call: caching mode needs num_replicas > 0, got %d", cfg.NumReplicas)
		}
	}
	return &HostCall{HostCall: hostcall.New(cfg.OutputDir, cfg.EnableHostCall, globalStep, log), cfg: cfg, log: log}, nil
}

// Config returns the configuration.
func (h *HostCall) Config() Config { return h.cfg }

// caching says whether the TPU variables exist.
func (h *HostCall) caching() bool { return h.cfg.EnableHostCall && h.cfg.EnableCachingWithTPUVarMode }

// RecordSummaryTensor records a tensor unless it is filtered out: without scalar metrics only the
// AUC inputs are kept, and in caching mode the per-step AUC inputs are dropped (the TPU variables
// carry them).
func (h *HostCall) RecordSummaryTensor(name string, t tensor.Tensor) error {
	if !h.cfg.EnableHostCallScalarMetrics && !aucMetrics[name] {
		return nil
	}
	if h.cfg.EnableCachingWithTPUVarMode && deprecatedMetrics[name] {
		return nil
	}
	return h.HostCall.RecordSummaryTensor(name, t)
}

// ComputeNewValue is _compute_new_value: delta padded with zeros to len(base), rotated right by
// offset (tf.roll: element i moves to (i+offset) mod len(base)) and added to base. delta may not
// be longer than base.
func ComputeNewValue[T tensor.Number](base, delta []T, offset int64) ([]T, error) {
	if len(delta) > len(base) {
		return nil, errkind.New(errkind.Value, "compute new value: delta of length %d is longer than base of length %d", len(delta), len(base))
	}
	out := append([]T{}, base...)
	n := int64(len(base))
	if n == 0 {
		return out, nil
	}
	shift := ((offset % n) + n) % n
	for i, v := range delta {
		out[(int64(i)+shift)%n] += v
	}
	return out, nil
}

func (h *HostCall) String() string {
	return fmt.Sprintf("BaseEmbeddingHostCall(%s, host_call=%v, caching=%v)", h.OutputDir(), h.cfg.EnableHostCall, h.cfg.EnableCachingWithTPUVarMode)
}
