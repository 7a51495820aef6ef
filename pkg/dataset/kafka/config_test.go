package kafka_test

import (
	"context"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/pkg/dataset/kafka"
)

func TestDefaultConfigIsTheReferences(t *testing.T) {
	c := kafka.DefaultConfig()
	if !c.HasHeader || c.StreamTimeout != -1 || c.MessagePollTimeout != 10000 || c.FilterEmpty ||
		c.KafkaDump || c.KafkaDumpPrefix || c.PollBatchSize != nil || c.GroupID != nil || c.Servers != nil {
		t.Errorf("DefaultConfig() = %+v, want the reference's defaults", c)
	}
}

func TestConfigErrors(t *testing.T) {
	addr := "127.0.0.1:1"
	for _, tc := range []struct {
		name string
		set  func(*kafka.Config)
		want string
	}{
		{"unknown key", func(c *kafka.Config) { c.Configuration = []string{"no.such.key=1"} }, `"no.such.key"`},
		{"unknown topic key", func(c *kafka.Config) { c.Configuration = []string{"conf.topic.nope=1"} }, `"nope"`},
		{"not key=value", func(c *kafka.Config) { c.Configuration = []string{"fetch.wait.max.ms"} }, "want key=value"},
		{"bad number", func(c *kafka.Config) { c.Configuration = []string{"session.timeout.ms=soon"} }, "session.timeout.ms=soon"},
		{"auto commit", func(c *kafka.Config) { c.Configuration = []string{"enable.auto.commit=true"} }, "enable.auto.commit"},
		{"bad reset", func(c *kafka.Config) { c.Configuration = []string{"auto.offset.reset=middle"} }, "auto.offset.reset"},
		{"bad strategy", func(c *kafka.Config) { c.Configuration = []string{"partition.assignment.strategy=best"} }, "best"},
		{"other metadata", func(c *kafka.Config) { s := "fetch.wait.max.ms=10,bogus=1"; c.KafkaOtherMetadata = &s }, `"bogus"`},
		{"no topics", func(c *kafka.Config) { c.Topics = []string{" "} }, "topics"},
		{"stream_timeout", func(c *kafka.Config) { c.StreamTimeout = -2 }, "stream_timeout"},
		{"poll timeout", func(c *kafka.Config) { c.MessagePollTimeout = 0 }, "message_poll_timeout"},
		{"poll batch", func(c *kafka.Config) { n := 0; c.PollBatchSize = &n }, "poll_batch_size"},
		{"batch.num.messages", func(c *kafka.Config) { c.Configuration = []string{"batch.num.messages=0"} }, "batch.num.messages"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := config(addr, "t", "g")
			c.Configuration = nil
			tc.set(&c)
			_, err := kafka.Open(context.Background(), c, nil, quiet())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Open: %v, want an error containing %s", err, tc.want)
			}
		})
	}
}

func TestConfigKeysAccepted(t *testing.T) {
	b := startBroker(t, "t", 1, true)
	c := config(b.Addr(), "t", "g")
	c.Configuration = []string{
		"client.id=monolith", "session.timeout.ms=3000", "heartbeat.interval.ms=100",
		"max.poll.interval.ms=20000", "auto.offset.reset=smallest", "conf.topic.auto.offset.reset=earliest",
		"partition.assignment.strategy=cooperative-sticky,range", "isolation.level=read_committed",
		"fetch.wait.max.ms=50", "fetch.min.bytes=1", "fetch.max.bytes=1048576",
		"max.partition.fetch.bytes=1048576", "socket.connection.setup.timeout.ms=5000",
		"request.timeout.ms=10000", "retry.backoff.ms=50", "metadata.max.age.ms=10000",
		"enable.auto.commit=false", "enable.partition.eof=true", "batch.num.messages=16",
		"bootstrap.servers=" + b.Addr(), "group.id=g2",
	}
	other := "fetch.wait.max.ms=20"
	c.KafkaOtherMetadata = &other
	c.StreamTimeout = 200
	newProducer(t, b.Addr()).produce("t", 1, 0, ids(0, 40))
	r := open(t, c, nil)
	if got := readAll(t, r); len(got) != 40 {
		t.Errorf("read %d records, want 40", len(got))
	}
	if n := len(kafka.ConfigurationKeys()); n < 20 {
		t.Errorf("ConfigurationKeys: %d keys", n)
	}
}

func TestOpenNoBroker(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 500*1e6)
	defer cancel()
	// Port 1 on loopback: nothing listens there.
	_, err := kafka.Open(ctx, config("127.0.0.1:1", "t", "g"), nil, quiet())
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("Open without a broker: %v, want an error naming the servers", err)
	}
}

func TestOffsets(t *testing.T) {
	var o kafka.Offsets
	o.Advance(kafka.Record{Topic: "t", Partition: 1, Offset: 5, Last: true})
	o.Advance(kafka.Record{Topic: "t", Partition: 1, Offset: 3, Last: true}) // never back
	o.Advance(kafka.Record{Topic: "t", Partition: 2, Offset: 7})             // not the message's last
	if n, _ := o.Get("t", 1); n != 6 {
		t.Errorf("t/1 = %d, want 6", n)
	}
	if n, _ := o.Get("t", 2); n != 7 {
		t.Errorf("t/2 = %d, want 7", n)
	}
	c := o.Clone()
	c.Set("t", 1, 100)
	if n, _ := o.Get("t", 1); n != 6 || o.Total() != 13 {
		t.Errorf("Clone shares state: %v", o)
	}
}
