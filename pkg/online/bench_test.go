package online

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/pkg/dataset/kafka"
	"github.com/monolith-go/monolith/pkg/dataset/kafka/embedded"
	"github.com/monolith-go/monolith/pkg/trainer/inprocess"
	"github.com/monolith-go/monolith/pkg/trainer/job"
)

// BenchmarkTrainFromStream is the trainer's sustained rate from the stream: records already in
// the topic (20,000 per iteration, produced with the timer stopped) read by the Kafka client,
// decoded and trained by the demo dnn (4 slots, dim 8, MLP 64-32, batch 256) on 2 parameter
// servers over loopback gRPC; no serving. events/s is the figure.
func BenchmarkTrainFromStream(b *testing.B) {
	const perIter = 20000
	ctx := context.Background()
	cfg := DefaultConfig()
	broker, err := embedded.Start(ctx, embedded.Options{Topics: []string{Topic}, Partitions: 1, Ephemeral: true})
	if err != nil {
		b.Fatal(err)
	}
	defer broker.Stop()
	tj, err := inprocess.Start(inprocess.Config{Data: Data, Dim: cfg.Dim, NumPS: cfg.NumPS, Hidden: cfg.Hidden})
	if err != nil {
		b.Fatal(err)
	}
	defer tj.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker.Addr()), kgo.DefaultProduceTopic(Topic))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	events := tj.Gen.Stream(1)
	produce := func() {
		recs := make([]*kgo.Record, perIter)
		now := []byte(strconv.FormatInt(time.Now().UnixMilli(), 10))
		for i := range recs {
			ex, _ := events.Next()
			data, err := proto.Marshal(ex)
			if err != nil {
				b.Fatal(err)
			}
			recs[i] = &kgo.Record{Value: data, Headers: []kgo.RecordHeader{{Key: kafka.EventTimeHeader, Value: now}}}
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
	}
	tr := &trainer{job: tj, cfg: cfg, stop: make(chan struct{}), log: slog.New(slog.DiscardHandler)}
	s, err := tr.stream(broker.Addr())
	if err != nil {
		b.Fatal(err)
	}
	in, err := s.Open(ctx, job.Position{})
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	var trained int64
	var took time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		produce()
		b.StartTimer()
		start := time.Now()
		for n := 0; n < perIter; {
			bt, err := in.Next(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := tj.Model.Step(ctx, bt); err != nil {
				b.Fatal(err)
			}
			n += bt.Size()
			trained += int64(bt.Size())
		}
		took += time.Since(start)
	}
	b.ReportMetric(float64(trained)/took.Seconds(), "events/s")
}
