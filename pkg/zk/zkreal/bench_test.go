package zkreal

import (
	"fmt"
	"log/slog"
	"sort"
	"testing"
	"time"

	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zktest"
)

var quiet = slog.New(slog.DiscardHandler)

// Benchmarks run against a real local server: go test -bench . -run '^$' ./pkg/zk/zkreal/
// ns/op is the latency of one synchronous call over loopback.

func BenchmarkGet(b *testing.B) {
	srv := zktest.Start(b)
	c := connect(b, srv, Options{Logger: quiet})
	ctx := tctx(b)
	if _, err := c.Create(ctx, "/bench", make([]byte, 256), zk.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := c.Get(ctx, "/bench"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

func BenchmarkSet(b *testing.B) {
	srv := zktest.Start(b)
	c := connect(b, srv, Options{Logger: quiet})
	ctx := tctx(b)
	if _, err := c.Create(ctx, "/bench", nil, zk.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	data := make([]byte, 256)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Set(ctx, "/bench", data, zk.AnyVersion); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

func BenchmarkCreateDelete(b *testing.B) {
	srv := zktest.Start(b)
	c := connect(b, srv, Options{Logger: quiet})
	ctx := tctx(b)
	if err := c.EnsurePath(ctx, "/bench"); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := fmt.Sprintf("/bench/n%d", i)
		if _, err := c.Create(ctx, p, nil, zk.CreateOptions{Ephemeral: true}); err != nil {
			b.Fatal(err)
		}
		if err := c.Delete(ctx, p, zk.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
}

// BenchmarkWatchLatency measures the time from a set() on one session to the DataWatch callback
// on another, as an entry's agent sees a layout change; it reports p50 and p99.
func BenchmarkWatchLatency(b *testing.B) {
	srv := zktest.Start(b)
	writer := connect(b, srv, Options{Logger: quiet})
	watcher := connect(b, srv, Options{Logger: quiet})
	ctx := tctx(b)
	if _, err := writer.Create(ctx, "/layout", []byte("0"), zk.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	got := make(chan time.Time, 1)
	w, err := watcher.DataWatch("/layout", func(d []byte, st *zk.Stat, ev *zk.WatchEvent) bool {
		if ev != nil && ev.Type == zk.EventChanged {
			got <- time.Now()
		}
		return true
	})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if _, err := writer.Set(ctx, "/layout", []byte(fmt.Sprint(i)), zk.AnyVersion); err != nil {
			b.Fatal(err)
		}
		select {
		case at := <-got:
			lat = append(lat, at.Sub(start))
		case <-time.After(5 * time.Second):
			b.Fatal("watch did not fire")
		}
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}
