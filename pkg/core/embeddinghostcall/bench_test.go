package embeddinghostcall

import (
	"math/rand/v2"
	"testing"

	"github.com/monolith-go/monolith/pkg/core/hostcall"
	"github.com/monolith-go/monolith/pkg/core/tensor"
)

// BenchmarkHostCall: 8 cores, each recording 20 scalar metrics and the AUC inputs of 256
// examples; compress on every core, concatenate, and run the host call.
func BenchmarkHostCall(b *testing.B) {
	const cores, batch = 8, 256
	rng := rand.New(rand.NewPCG(2, 2))
	labels, preds, uids := make([]float32, batch), make([]float32, batch), make([]int32, batch)
	for i := range labels {
		labels[i], preds[i], uids[i] = float32(rng.IntN(2)), rng.Float32(), int32(rng.IntN(1000))
	}
	cfg := Config{EnableHostCall: true, EnableHostCallScalarMetrics: true, EnableDeepInsight: true, TopKSamplingNumPerCore: batch, Logger: quiet}
	metricNames := make([]string, 20)
	for i := range metricNames {
		metricNames[i] = "metric_" + string(rune('a'+i)) + "_avg"
	}
	b.ReportAllocs()
	for b.Loop() {
		var fn *HostCallFn
		perCore := make([][]tensor.Tensor, cores)
		for c := range cores {
			h, _ := New(cfg, 100)
			for _, n := range metricNames {
				_ = h.RecordSummaryTensor(n, tensor.Scalar[float32](1))
			}
			_ = h.RecordSummaryTensor(LabelsForAUCCalculation, tensor.Vector(labels...))
			_ = h.RecordSummaryTensor(YPredForAUCCalculation, tensor.Vector(preds...))
			_ = h.RecordSummaryTensor(UIDBucket, tensor.Vector(uids...))
			_ = h.RecordSummaryTensor(ReqTime, tensor.Vector[int64](1600000000))
			_ = h.RecordSummaryTensor(SampleRate, tensor.Vector[float32](0.5))
			f, args, err := h.GenerateHostCallHook()
			if err != nil {
				b.Fatal(err)
			}
			fn, perCore[c] = f, args
		}
		args, err := hostcall.ConcatCores(perCore)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := fn.Call(args); err != nil {
			b.Fatal(err)
		}
	}
}
