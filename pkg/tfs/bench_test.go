package tfs

import (
	"context"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/tfs/faketfs"
)

// BenchmarkMonitor measures the monitor's round trips against the fake TF Serving over gRPC on
// loopback: each iteration makes 200 PublishStatus calls (one GetModelStatus each) and 200 Reload
// calls, and reports p50/p99 per call in ms.
func BenchmarkMonitor(b *testing.B) {
	srv, err := faketfs.New(nil, faketfs.Options{Addr: "127.0.0.1:0"})
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	defer srv.Stop(context.Background())
	env["PORT3"] = strconv.Itoa(srv.Port())
	m := newMonitor(b, "deploy_type ps\n")
	env["PORT3"] = "8003"
	m.SetHost("127.0.0.1")
	if err := m.Connect(); err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	name := "m"
	pm := datadef.PublishMeta{ModelName: &name, PType: datadef.PublishLoad, SubModels: []datadef.SubModel{{Name: "ps_0", Path: "/m/ps_0/1"}}}
	cfgs, err := m.GenModelConfig([]datadef.PublishMeta{pm}, false)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := m.Reload(ctx, "ps", cfgs["ps"]); err != nil {
		b.Fatal(err)
	}
	srv.Drain()
	var statusLat, reloadLat []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := 0; j < 200; j++ {
			start := time.Now()
			if _, err := m.PublishStatus(ctx, pm, false); err != nil {
				b.Fatal(err)
			}
			statusLat = append(statusLat, time.Since(start))
		}
		for j := 0; j < 200; j++ {
			start := time.Now()
			if _, err := m.Reload(ctx, "ps", cfgs["ps"]); err != nil {
				b.Fatal(err)
			}
			reloadLat = append(reloadLat, time.Since(start))
		}
	}
	b.StopTimer()
	pct := func(l []time.Duration, p float64) float64 {
		sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
		return float64(l[int(p*float64(len(l)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(statusLat, 0.5), "status-p50-ms")
	b.ReportMetric(pct(statusLat, 0.99), "status-p99-ms")
	b.ReportMetric(pct(reloadLat, 0.5), "reload-p50-ms")
	b.ReportMetric(pct(reloadLat, 0.99), "reload-p99-ms")
}
