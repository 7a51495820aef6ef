package faketfs

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
)

// percentileMs returns the p-th percentile (nearest rank) of ds in milliseconds.
func percentileMs(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	i = max(0, min(i, len(s)-1))
	return float64(s[i]) / float64(time.Millisecond)
}

// BenchmarkMonitorRoundTrip measures the two RPCs the agent's monitor makes, over real gRPC on
// loopback: per iteration 200 GetModelStatus (all versions of a model) and 200
// HandleReloadConfigRequest (alternating between two configs, so every reload loads or removes a
// model; the queue is drained between reloads, outside the measured calls). It reports the p50 and
// p99 latency of each in ms.
func BenchmarkMonitorRoundTrip(b *testing.B) {
	const calls = 200
	entry, ps0, ps1 := latest(b, "m:entry", 1), latest(b, "m:ps_0", 1), latest(b, "m:ps_1", 1)
	f := start(b, serverConfig(entry, ps0), Options{})
	f.srv.Drain()
	reloads := []*servingapis.ReloadConfigRequest{
		{Config: serverConfig(entry, ps0, ps1)},
		{Config: serverConfig(entry, ps0)},
	}
	statusReq := &servingapis.GetModelStatusRequest{ModelSpec: spec("m:entry")}
	call := func(fn func(ctx context.Context) error) time.Duration {
		ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
		defer cancel()
		t0 := time.Now()
		if err := fn(ctx); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	// One call of each to connect before measuring.
	call(func(ctx context.Context) error { _, err := f.ms.GetModelStatus(ctx, statusReq); return err })

	var statusLat, reloadLat []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := 0; j < calls; j++ {
			statusLat = append(statusLat, call(func(ctx context.Context) error {
				resp, err := f.ms.GetModelStatus(ctx, statusReq)
				if err == nil && len(resp.GetModelVersionStatus()) != 1 {
					b.Fatalf("unexpected status %v", resp)
				}
				return err
			}))
		}
		for j := 0; j < calls; j++ {
			req := reloads[j%2]
			reloadLat = append(reloadLat, call(func(ctx context.Context) error {
				_, err := f.ms.HandleReloadConfigRequest(ctx, req)
				return err
			}))
			f.srv.Drain()
		}
	}
	b.StopTimer()
	b.ReportMetric(percentileMs(statusLat, 0.50), "status-p50-ms")
	b.ReportMetric(percentileMs(statusLat, 0.99), "status-p99-ms")
	b.ReportMetric(percentileMs(reloadLat, 0.50), "reload-p50-ms")
	b.ReportMetric(percentileMs(reloadLat, 0.99), "reload-p99-ms")
}
