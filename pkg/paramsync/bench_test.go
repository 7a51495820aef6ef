package paramsync

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"

	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	"github.com/monolith-go/monolith/pkg/export"
	"github.com/monolith-go/monolith/pkg/modelserver/exporttest"
	"github.com/monolith-go/monolith/pkg/modelserver/psshard"
)

// The benchmarks measure real-time parameter sync on loopback: a source of this process (the
// training PS's tables) pushing to a model server serving a PS sub-graph.
//
//	go test ./pkg/paramsync -run '^$' -bench . -benchtime 5x
//
// BenchmarkSyncThroughput: ids/s of pushes of 100k touched ids (take, convert, gRPC, assign on the
// serving side) to 1 and 2 targets, and ids/s of the serving side's assign alone.
// BenchmarkSyncDelay: the time from an update on the training PS's table to its visibility in a
// Predict lookup of the serving PS, each update along with 10k others: with a push started at once,
// and with Run at a 100 ms interval, the update at a random moment of the period (the wait for the
// next push, half an interval on average, adds to the push).

// servingShard serves an empty PS shard (tables of dim, one shard of one) from a model server of
// this process, as "bench:ps_0"; it returns the server's address and the servable.
func servingShard(b *testing.B, dims map[string]int) (string, *psshard.Servable) {
	b.Helper()
	src := newSource(b, dims) // its tables serve: zeros for missing ids, Assign creates entries
	shard := &export.PSShard{Dir: b.TempDir(), Manifest: export.PSManifest{ModelName: "bench", Index: 0, NumPS: 1}, Tables: src.tables}
	for _, tb := range src.tables {
		tb.TrackTouched(false)
	}
	sv := psshard.New(shard)
	s := exporttest.ServeServable(b, "bench:ps_0", sv)
	return s.Addr(), sv
}

const benchIDs = 100_000

func BenchmarkSyncThroughput(b *testing.B) {
	ctx := context.Background()
	for _, dim := range []int{8, 64} {
		for _, targets := range []int{1, 2} {
			b.Run(fmt.Sprintf("dim=%d/targets=%d/push", dim, targets), func(b *testing.B) {
				var addrs StaticTargets
				var servables []*psshard.Servable
				for range targets {
					addr, sv := servingShard(b, map[string]int{"t": dim})
					addrs = append(addrs, addr)
					servables = append(servables, sv)
				}
				src := newSource(b, map[string]int{"t": dim})
				p := newPusher(b, Config{Source: src, Targets: addrs, Model: "bench"})
				all := ids(0, benchIDs)
				var pushing time.Duration
				for n := 0; n < b.N; n++ {
					src.add(b, "t", all, 1)
					start := time.Now()
					res, err := p.PushOnce(ctx)
					pushing += time.Since(start)
					if err != nil {
						b.Fatal(err)
					}
					for _, tr := range res.Targets {
						if tr.Err != nil || tr.IDs != benchIDs {
							b.Fatalf("push: %+v", tr)
						}
					}
				}
				b.ReportMetric(float64(b.N*benchIDs)/pushing.Seconds(), "ids/s")
				b.ReportMetric(float64(b.N*benchIDs*targets)/pushing.Seconds(), "ids_applied/s")
				for _, sv := range servables {
					if sv.Assigned() != int64(b.N*benchIDs) {
						b.Fatalf("a target assigned %d ids, want %d", sv.Assigned(), b.N*benchIDs)
					}
				}
			})
		}
		b.Run(fmt.Sprintf("dim=%d/assign_only", dim), func(b *testing.B) {
			_, sv := servingShard(b, map[string]int{"t": dim})
			emb := make([]float32, benchIDs*dim)
			in := psshard.AssignInputs([]psshard.AssignDelta{{Table: "t", IDs: ids(0, benchIDs), Embeddings: emb, Dim: dim}})
			start := time.Now()
			for n := 0; n < b.N; n++ {
				if _, err := sv.Predict(ctx, psshard.AssignSignature, in); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*benchIDs)/time.Since(start).Seconds(), "ids/s")
		})
	}
}

func BenchmarkSyncDelay(b *testing.B) {
	for _, interval := range []time.Duration{0, 100 * time.Millisecond} {
		name := "push_at_once"
		if interval > 0 {
			name = "interval=" + interval.String()
		}
		b.Run(name, func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			addr, _ := servingShard(b, map[string]int{"t": 16})
			client := exporttest.PredictionClient(b, addr)
			src := newSource(b, map[string]int{"t": 16})
			// Background updates: 10k other ids touched between pushes, as training would.
			others := ids(1_000_000, 1_010_000)
			p := newPusher(b, Config{Source: src, Targets: StaticTargets{addr}, Model: "bench", Interval: max(interval, time.Hour)})
			done := make(chan struct{})
			if interval > 0 {
				p.cfg.Interval = interval
				go func() {
					defer close(done)
					p.Run(ctx)
				}()
			} else {
				close(done)
			}
			defer func() {
				cancel()
				<-done
			}()
			var delays []time.Duration
			b.ResetTimer()
			for n := 0; n < b.N; n++ {
				id := int64(n)
				if interval > 0 {
					// Updates come at any moment of the push period, not just after a push.
					time.Sleep(rand.N(interval))
				}
				src.add(b, "t", others, 1)
				src.add(b, "t", []int64{id}, float32(n+1))
				start := time.Now()
				if interval == 0 {
					if _, err := p.PushOnce(ctx); err != nil {
						b.Fatal(err)
					}
				}
				for {
					resp, err := client.Predict(ctx, &servingapis.PredictRequest{
						ModelSpec: &servingapis.ModelSpec{Name: "bench:ps_0", SignatureName: psshard.Signature},
						Inputs:    psshard.Request("t", []int64{id})})
					if err != nil {
						b.Fatal(err)
					}
					got := make([]float32, 16)
					if err := psshard.LookupResult(resp.GetOutputs(), 1, got); err != nil {
						b.Fatal(err)
					}
					if got[0] == float32(n+1) {
						break
					}
					if time.Since(start) > time.Minute {
						b.Fatalf("id %d not visible after a minute", id)
					}
				}
				delays = append(delays, time.Since(start))
			}
			b.StopTimer()
			sort.Slice(delays, func(i, j int) bool { return delays[i] < delays[j] })
			q := func(f float64) float64 {
				return float64(delays[min(len(delays)-1, int(f*float64(len(delays))))].Microseconds()) / 1000
			}
			b.ReportMetric(q(0.5), "p50_ms")
			b.ReportMetric(q(0.99), "p99_ms")
			b.ReportMetric(float64(slices.Max(delays).Microseconds())/1000, "max_ms")
		})
	}
}
