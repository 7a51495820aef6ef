package online

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/pkg/dataset/kafka"
	"github.com/monolith-go/monolith/pkg/trainer/synth"
)

// event is one produced event, kept for scoring.
type event struct {
	data  []byte // the serialized Monolith Example (its label the truth's draw)
	label float32
	ms    int64 // event time
}

// producer writes a drifting synthetic stream to the topic at a rate: events of the ground truth
// before the drift, of the drifted one after (pkg/trainer/synth's Drifted), each stamped with its
// event time (kafka.EventTimeHeader), and keeps the newest of them for the scorer.
type producer struct {
	cl       *kgo.Client
	topic    string
	rate     float64
	before   *synth.Stream
	after    *synth.Stream
	driftAt  time.Time
	fresh    *freshness
	produced atomic.Int64 // acknowledged
	failed   atomic.Int64
	drifted  atomic.Bool

	mu     sync.Mutex
	recent []event // a ring of the newest events
	next   int
	full   bool
}

func newProducer(addr, topic string, rate float64, g *synth.Generator, driftSeed uint64, driftAt time.Time, keep int, fresh *freshness) (*producer, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return nil, fmt.Errorf("producer: %w", err)
	}
	return &producer{cl: cl, topic: topic, rate: rate, before: g.Stream(1), after: g.Drifted(driftSeed).Stream(2), driftAt: driftAt,
		fresh: fresh, recent: make([]event, keep)}, nil
}

// run produces until ctx ends or until is reached, then flushes.
func (p *producer) run(ctx context.Context, until time.Time) error {
	defer p.cl.Close()
	start := time.Now()
	var sent int64
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return p.flush()
		case now := <-tick.C:
			if !now.Before(until) {
				return p.flush()
			}
			// Behind by more than a second's worth: do not burst to catch up.
			due := int64(p.rate * now.Sub(start).Seconds())
			if lag := due - sent; lag > int64(p.rate) {
				sent = due - int64(p.rate)
			}
			for ; sent < due; sent++ {
				if err := p.send(ctx, now); err != nil {
					return err
				}
			}
		}
	}
}

func (p *producer) send(ctx context.Context, now time.Time) error {
	st := p.before
	if !now.Before(p.driftAt) {
		st = p.after
		p.drifted.Store(true)
	}
	ex, _ := st.Next()
	data, err := proto.Marshal(ex)
	if err != nil {
		return err
	}
	ms := time.Now().UnixMilli()
	p.keep(event{data: data, label: ex.GetLabel()[0], ms: ms})
	p.fresh.produced(ms)
	p.cl.Produce(ctx, &kgo.Record{Value: data, Headers: []kgo.RecordHeader{{Key: kafka.EventTimeHeader, Value: []byte(strconv.FormatInt(ms, 10))}}},
		func(_ *kgo.Record, err error) {
			if err != nil {
				p.failed.Add(1)
				return
			}
			p.produced.Add(1)
		})
	return nil
}

func (p *producer) flush() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.cl.Flush(ctx); err != nil {
		return fmt.Errorf("producer: flush: %w", err)
	}
	return nil
}

func (p *producer) keep(e event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.recent[p.next] = e
	p.next = (p.next + 1) % len(p.recent)
	if p.next == 0 {
		p.full = true
	}
}

// newest are the newest events kept, oldest first.
func (p *producer) newest() []event {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.full {
		return append([]event(nil), p.recent[:p.next]...)
	}
	return append(append([]event(nil), p.recent[p.next:]...), p.recent[:p.next]...)
}
