package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/monolith-go/monolith/internal/cli"
)

// EventTimeHeader is the header each message carries: its event time, the time it was produced,
// as decimal Unix milliseconds. The trainer's Kafka source reads it to measure lag and freshness.
const EventTimeHeader = "monolith-event-time"

// newClient is the producer's client of servers, writing to topic: each message must be
// acknowledged within timeout (retries included), spread over the partitions round-robin or by
// key.
func newClient(servers []string, topic string, keyed bool, timeout time.Duration) (*kgo.Client, error) {
	partitioner := kgo.RoundRobinPartitioner()
	if keyed {
		partitioner = kgo.StickyKeyPartitioner(nil) // murmur2 of the key, as Kafka's Java client
	}
	return kgo.NewClient(
		kgo.SeedBrokers(servers...),
		kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(partitioner),
		kgo.RecordDeliveryTimeout(timeout),
		kgo.ProduceRequestTimeout(timeout),
		kgo.RetryTimeout(timeout),
		kgo.DialTimeout(min(timeout, 10*time.Second)),
		kgo.ProducerLinger(5*time.Millisecond),
	)
}

// topicPartitions asks the brokers for topic's metadata, within timeout: the number of its
// partitions. A topic the brokers do not have is a usage error; brokers that do not answer, a
// failure at run time.
func topicPartitions(ctx context.Context, cl *kgo.Client, servers []string, topic string, timeout time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, fmt.Errorf("--servers %v: metadata of topic %q: %w", servers, topic, err)
	}
	for _, rt := range resp.Topics {
		if rt.Topic == nil || *rt.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			if errors.Is(err, kerr.UnknownTopicOrPartition) {
				return 0, cli.Usage(fmt.Errorf("--topic %q: no such topic on --servers %v", topic, servers))
			}
			return 0, fmt.Errorf("--servers %v: metadata of topic %q: %w", servers, topic, err)
		}
		if len(rt.Partitions) == 0 {
			return 0, fmt.Errorf("--servers %v: topic %q has no partitions", servers, topic)
		}
		return len(rt.Partitions), nil
	}
	return 0, cli.Usage(fmt.Errorf("--topic %q: no such topic on --servers %v", topic, servers))
}

// counts are what a producer did so far.
type counts struct {
	// Sent are the messages handed to the client; Acked those the brokers acknowledged, Bytes
	// their values' bytes; Errors the messages that failed (not acknowledged in time, refused).
	Sent, Acked, Bytes, Errors int64
}

// producer sends records to its client, paced, each stamped with its event time.
type producer struct {
	cl    *kgo.Client
	keyed bool
	pace  *pacer
	now   func() time.Time
	// end is when the run stops (--duration, by the pacer's clock); zero: none.
	end time.Time
	// ctx is the context the messages are produced under: it outlives the run's context (which
	// a signal or --duration ends) so that the messages already handed to the client are still
	// delivered by the final flush.
	ctx context.Context
	log *slog.Logger

	sent, acked, bytes, errors atomic.Int64
	errOnce                    sync.Once
	firstErr                   error
}

// send waits for the pacer, then hands a copy of rec to the client, stamped with the time now.
// It returns ctx's error when ctx ends first, errEnd at the run's end.
func (p *producer) send(ctx context.Context, rec []byte) error {
	if err := p.pace.Wait(ctx, p.end); err != nil {
		return err
	}
	v := bytes.Clone(rec)
	if v == nil {
		v = []byte{}
	}
	now := p.now()
	r := &kgo.Record{
		Value:     v,
		Timestamp: now,
		Headers:   []kgo.RecordHeader{{Key: EventTimeHeader, Value: strconv.AppendInt(nil, now.UnixMilli(), 10)}},
	}
	if p.keyed {
		r.Key = keyOf(v)
	}
	p.sent.Add(1)
	p.cl.Produce(p.ctx, r, p.promise)
	return nil
}

// keyOf is a message's key with --partitions=key: the FNV-1a 64-bit hash of its value, 16 hex
// digits.
func keyOf(v []byte) []byte {
	h := fnv.New64a()
	h.Write(v)
	return hex.AppendEncode(nil, h.Sum(nil))
}

func (p *producer) promise(r *kgo.Record, err error) {
	if err != nil {
		p.errors.Add(1)
		p.errOnce.Do(func() {
			p.firstErr = err
			p.log.Warn("a message was not delivered (further failures are counted, not logged)", "error", err)
		})
		return
	}
	p.acked.Add(1)
	p.bytes.Add(int64(len(r.Value)))
}

func (p *producer) counts() counts {
	return counts{Sent: p.sent.Load(), Acked: p.acked.Load(), Bytes: p.bytes.Load(), Errors: p.errors.Load()}
}

// errNoRecords ends a --loop whose input holds no record.
var errNoRecords = errors.New("the input holds no records")

// run sends the records of src, pass after pass with loop, until the input ends (without loop),
// the run's end (--duration), ctx's end (a signal), both not errors, or an error. It returns the
// passes begun.
func (p *producer) run(ctx context.Context, src source, loop bool) (passes int, err error) {
	emit := func(rec []byte) error { return p.send(ctx, rec) }
	for {
		before := p.sent.Load()
		passes++
		err := src.Pass(ctx, emit)
		if errors.Is(err, errEnd) || ctx.Err() != nil && (err == nil || errors.Is(err, ctx.Err())) {
			return passes, nil
		}
		if err != nil {
			return passes, err
		}
		if !loop {
			return passes, nil
		}
		if p.sent.Load() == before {
			return passes, cli.Usage(fmt.Errorf("--loop: %w", errNoRecords))
		}
	}
}
