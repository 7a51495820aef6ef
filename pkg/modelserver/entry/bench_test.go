package entry

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/monolith-go/monolith/pkg/instance"
)

// BenchmarkPredict measures Predict on the entry over loopback gRPC (the client, the entry's
// model server and 2 PS model servers in this process, each server on its own listener), at batch
// 1 and 256, one request at a time: ns/op and the latency's p50 and p99 in ms.
func BenchmarkPredict(b *testing.B) {
	s := serve(b, 2, 1, Config{})
	for _, batch := range []int{1, 256} {
		b.Run("batch="+strconv.Itoa(batch), func(b *testing.B) {
			in := instance.MakeTensorProto(marshalAll(b, s.job.Examples(9, batch)))
			ctx := context.Background()
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				if _, err := predict(ctx, s.client, InputExamples, in); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2])/1e6, "p50_ms")
			b.ReportMetric(float64(lat[len(lat)*99/100])/1e6, "p99_ms")
			b.ReportMetric(float64(batch)*float64(b.N)/b.Elapsed().Seconds(), "examples/s")
		})
	}
}
