package kafka_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkRead1KiB is the Kafka read alone: a Reader over kfake on loopback, 1 KiB messages,
// 4 partitions, has_header false. Reports records/s and MB/s (ns/op is per record).
func BenchmarkRead1KiB(b *testing.B) {
	const parts, size = 4, 1024
	br := startBroker(b, "bench", parts, true)
	p := newProducer(b, br.Addr())
	value := make([]byte, size)
	for i := range value {
		value[i] = byte(i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for done := 0; done < b.N; {
		n := min(b.N-done, 10000)
		recs := make([]*kgo.Record, n)
		for i := range recs {
			recs[i] = &kgo.Record{Topic: "bench", Partition: int32(done+i) % parts, Value: value}
		}
		if err := p.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
		done += n
	}
	c := config(br.Addr(), "bench", "g")
	c.Configuration = nil
	batch := 1024
	c.PollBatchSize = &batch
	r := open(b, c, nil)
	b.SetBytes(size)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := r.Next(ctx); err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				b.Fatalf("after %d records: %v", i, err)
			}
			b.Fatal(err)
		}
	}
	el := time.Since(start).Seconds()
	b.ReportMetric(float64(b.N)/el, "records/s")
}
