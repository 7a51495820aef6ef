package embedded_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/dataset/kafka/embedded"
)

func consume(t *testing.T, addr, topic string, n int) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []string
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("after %d of %d records: %v", len(got), n, err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

func TestRestartKeepsData(t *testing.T) {
	leakcheck.Check(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := embedded.Start(ctx, embedded.Options{Topics: []string{"t"}, Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	addr := b.Addr()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("t"))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()
	if err := b.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if b.Addr() != addr {
		t.Errorf("address after restart %s, want %s", b.Addr(), addr)
	}
	if got := consume(t, b.Addr(), "t", 50); len(got) != 50 {
		t.Errorf("read %d records after the restart, want 50", len(got))
	}
	b.Stop()
	b.Stop() // twice is fine
	if err := b.Restart(ctx); err == nil {
		t.Error("Restart after Stop: no error")
	}
}

func TestEphemeral(t *testing.T) {
	leakcheck.Check(t)
	b, err := embedded.Start(context.Background(), embedded.Options{Topics: []string{"t"}, Ephemeral: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	if b.Cluster() == nil {
		t.Error("no cluster")
	}
	if err := b.Restart(context.Background()); err == nil {
		t.Error("Restart of an ephemeral broker: no error")
	}
}
