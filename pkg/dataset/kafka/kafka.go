// Package kafka is a record source over Kafka topics (franz-go's kgo client), the port of the
// reference's KafkaDataset (datasets.py, kernels/kafka_kernels.cc).
//
// A Reader is a member of a consumer group: partitions are balanced among the group's readers
// (cooperative-sticky by default) and a reader joining or leaving rebalances them without losing
// records. Positions are data: Next returns each record with its topic, partition and offset, the
// caller records them (Offsets.Advance) for the records it trained on and stores them in its
// checkpoint; Open with those offsets as start resumes right after them (they win over the
// group's committed offsets). Commit writes offsets to the group, for monitoring and for readers
// that start without a checkpoint.
//
// The guarantee: every record of an assigned partition is returned at least once. A reader resumed
// with start offsets returns exactly the records after them (message granularity: a framed message
// holding several records resumes at its first record unless its last one was recorded). Across
// a rebalance, a reader commits the positions of the partitions it gives up (the records Next
// has returned) before another reader starts them, so nothing is lost; a partition lost without
// a clean revoke (a member timed out) resumes from its last committed offset (records may repeat).
//
// Messages: with has_header false a message is one bare record; with has_header true it holds
// one or more framed records (pkg/instance's FrameReader, headers as kafka_dump_prefix,
// has_sort_id, kafka_dump and lagrangex_header say), as the kernel's StringStreamReader reads
// them. A malformed message is returned as a *RecordError naming topic, partition and offset
// (after the good records before it); it is consumed, so the next Next continues after it.
// Empty messages are skipped with filter_empty, else returned as a record with empty Data. The
// header EventTimeHeader carries the event time (without it, the message's timestamp).
//
// Difference from the reference: a new group starts at the earliest offset (auto.offset.reset
// earliest) so that nothing produced before the trainer started is lost; librdkafka's default is
// latest (configuration auto.offset.reset=latest gives it).
package kafka

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/monolith-go/monolith/pkg/instance"
)

// Record is one record read from Kafka.
type Record struct {
	Topic     string
	Partition int32
	// Offset is the offset of the message holding the record.
	Offset int64
	// Data is the serialized record (the caller owns it).
	Data []byte
	// EventTime is the message's EventTimeHeader, else its Kafka timestamp (by default the
	// producer's create time); zero when it has neither.
	EventTime time.Time
	// Last is true for the last record of its message (always, without has_header): recording
	// it moves the position past the message.
	Last bool
}

// RecordError is a message Next could not read.
type RecordError struct {
	Topic     string
	Partition int32
	Offset    int64
	Err       error
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("kafka: topic %s partition %d offset %d: %v", e.Topic, e.Partition, e.Offset, e.Err)
}

func (e *RecordError) Unwrap() error { return e.Err }

// ErrClosed is returned by Next after Close.
var ErrClosed = errors.New("kafka: reader closed")

// Offsets maps topic -> partition -> the next offset to read.
type Offsets map[string]map[int32]int64

// Get returns the next offset of a partition.
func (o Offsets) Get(topic string, partition int32) (int64, bool) {
	n, ok := o[topic][partition]
	return n, ok
}

// Set sets the next offset of a partition.
func (o *Offsets) Set(topic string, partition int32, next int64) {
	if *o == nil {
		*o = Offsets{}
	}
	ps := (*o)[topic]
	if ps == nil {
		ps = map[int32]int64{}
		(*o)[topic] = ps
	}
	ps[partition] = next
}

// Advance records r as consumed: the partition's next offset becomes r.Offset+1 when r is its
// message's last record, else r.Offset (the message is read again on resume). It never moves
// a position back.
func (o *Offsets) Advance(r Record) {
	next := r.Offset
	if r.Last {
		next++
	}
	if cur, ok := o.Get(r.Topic, r.Partition); ok && cur >= next {
		return
	}
	o.Set(r.Topic, r.Partition, next)
}

// Clone returns a deep copy.
func (o Offsets) Clone() Offsets {
	c := make(Offsets, len(o))
	for t, ps := range o {
		c[t] = maps.Clone(ps)
	}
	return c
}

// Total is the sum of the next offsets (records before them, for partitions starting at 0).
func (o Offsets) Total() int64 {
	var n int64
	for _, ps := range o {
		for _, v := range ps {
			n += v
		}
	}
	return n
}

type item struct {
	rec  Record
	err  error
	skip bool // an empty message filtered out: advances the position only
}

// Reader reads records from a consumer group's partitions. Next, Commit, Position and Close may
// be called from different goroutines, but Next from one at a time.
type Reader struct {
	cl  *kgo.Client
	s   *settings
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	pos     Offsets // after the records Next returned
	start   Offsets // start offsets not yet applied
	hw      Offsets // high watermarks seen
	queue   []item
	lastMsg time.Time

	closeOnce sync.Once
	closed    chan struct{}
}

// callTimeout bounds the calls that get no deadline from the caller (commits in rebalance
// callbacks, Close's group leave, Open's first contact when ctx has no deadline).
const callTimeout = 10 * time.Second

// Open connects to the cluster, joins cfg's consumer group and subscribes to cfg.Topics. Partitions
// in start begin at those offsets (over the group's committed ones); others at the group's committed
// offset, or the earliest one for a new group. log may be nil (slog.Default). Open fails when no
// broker answers within ctx's deadline (10 s without one).
func Open(ctx context.Context, cfg Config, start Offsets, log *slog.Logger) (*Reader, error) {
	s, err := cfg.settings()
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	r := &Reader{
		s: s, cfg: cfg, log: log,
		start: start.Clone(),
		// A partition given a start offset is at it until it is read: a checkpoint of a run
		// that reads nothing of it keeps its offset (else the next restore would start it over).
		pos:     start.Clone(),
		hw:      Offsets{},
		lastMsg: time.Now(),
		closed:  make(chan struct{}),
	}
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(s.seeds...),
		kgo.ConsumerGroup(s.group),
		kgo.ConsumeTopics(s.topics...),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.AdjustFetchOffsetsFn(r.adjust),
		kgo.OnPartitionsRevoked(r.revoked),
		kgo.OnPartitionsLost(r.lost),
		kgo.WithLogger(logger{log}),
	}, s.opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka: client for %v: %w", s.seeds, err)
	}
	r.cl = cl
	pctx, cancel := ctx, context.CancelFunc(func() {})
	if _, ok := ctx.Deadline(); !ok {
		pctx, cancel = context.WithTimeout(ctx, callTimeout)
	}
	err = cl.Ping(pctx)
	cancel()
	if err != nil {
		cl.Close()
		return nil, fmt.Errorf("kafka: no broker of %v answers: %w", s.seeds, err)
	}
	log.Info("kafka: reader open", "servers", s.seeds, "group", s.group, "topics", s.topics, "start", start)
	return r, nil
}

// adjust applies the start offsets of newly assigned partitions, once each.
func (r *Reader) adjust(_ context.Context, offs map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for t, ps := range offs {
		for p := range ps {
			if n, ok := r.start.Get(t, p); ok {
				ps[p] = kgo.NewOffset().At(n).WithEpoch(-1)
				delete(r.start[t], p)
				r.log.Info("kafka: partition starts at the given offset", "topic", t, "partition", p, "offset", n)
			}
		}
	}
	return offs, nil
}

// revoked commits the positions of the partitions given up, so that their next owner starts
// right after the records this reader returned.
func (r *Reader) revoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	r.mu.Lock()
	commit := map[string]map[int32]kgo.EpochOffset{}
	for t, ps := range revoked {
		for _, p := range ps {
			if n, ok := r.pos.Get(t, p); ok {
				if commit[t] == nil {
					commit[t] = map[int32]kgo.EpochOffset{}
				}
				commit[t][p] = kgo.EpochOffset{Epoch: -1, Offset: n}
			}
		}
	}
	r.dropLocked(revoked)
	r.mu.Unlock()
	if len(commit) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if err := commitSync(cctx, cl, commit); err != nil {
		r.log.Warn("kafka: commit of revoked partitions failed (their next owner may read records again)", "offsets", commit, "err", err)
	}
}

func (r *Reader) lost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	r.mu.Lock()
	r.dropLocked(lost)
	r.mu.Unlock()
	r.log.Warn("kafka: partitions lost (their next owner resumes from the last committed offsets)", "partitions", lost)
}

// dropLocked removes queued records of the given partitions.
func (r *Reader) dropLocked(parts map[string][]int32) {
	if len(r.queue) == 0 {
		return
	}
	gone := func(t string, p int32) bool {
		for _, q := range parts[t] {
			if q == p {
				return true
			}
		}
		return false
	}
	kept := r.queue[:0]
	for _, it := range r.queue {
		if !gone(it.rec.Topic, it.rec.Partition) {
			kept = append(kept, it)
		}
	}
	r.queue = kept
}

func commitSync(ctx context.Context, cl *kgo.Client, offs map[string]map[int32]kgo.EpochOffset) error {
	var cerr error
	cl.CommitOffsetsSync(ctx, offs, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			cerr = err
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if e := kerrOf(p.ErrorCode); e != nil && cerr == nil {
					cerr = fmt.Errorf("topic %s partition %d offset %d: %w", t.Topic, p.Partition, offs[t.Topic][p.Partition].Offset, e)
				}
			}
		}
	})
	return cerr
}

// Next returns the next record. It returns io.EOF once stream_timeout passes without a message,
// a *RecordError for a malformed message (and continues after it on the next call), ctx's error
// when ctx ends, and ErrClosed after Close.
func (r *Reader) Next(ctx context.Context) (Record, error) {
	for {
		select {
		case <-r.closed:
			return Record{}, ErrClosed
		default:
		}
		if it, ok := r.pop(); ok {
			return it.rec, it.err
		}
		if r.s.streamTimeout >= 0 && time.Since(r.lastMsg) >= r.s.streamTimeout {
			return Record{}, io.EOF
		}
		// Everything polled has been returned: a rebalance may run now.
		r.cl.AllowRebalance()
		wait := r.s.pollTimeout
		if r.s.streamTimeout >= 0 {
			wait = min(wait, max(time.Millisecond, r.s.streamTimeout-time.Since(r.lastMsg)))
		}
		pctx, cancel := context.WithTimeout(ctx, wait)
		fs := r.cl.PollRecords(pctx, r.s.pollBatch)
		cancel()
		if err := ctx.Err(); err != nil {
			return Record{}, err
		}
		if fs.IsClientClosed() {
			return Record{}, ErrClosed
		}
		fs.EachError(func(t string, p int32, err error) {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				return
			}
			r.log.Warn("kafka: fetch error (the client retries)", "topic", t, "partition", p, "err", err)
		})
		n := 0
		r.mu.Lock()
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if p.HighWatermark > 0 {
				r.hw.Set(p.Topic, p.Partition, p.HighWatermark)
			}
		})
		fs.EachRecord(func(m *kgo.Record) {
			n++
			r.enqueueLocked(m)
		})
		if n > 0 {
			r.lastMsg = time.Now()
		}
		r.mu.Unlock()
	}
}

func (r *Reader) pop() (item, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(r.queue) > 0 {
		it := r.queue[0]
		r.queue[0] = item{}
		r.queue = r.queue[1:]
		if it.rec.Last {
			r.pos.Set(it.rec.Topic, it.rec.Partition, it.rec.Offset+1)
		} else if _, ok := r.pos.Get(it.rec.Topic, it.rec.Partition); !ok {
			r.pos.Set(it.rec.Topic, it.rec.Partition, it.rec.Offset)
		}
		if it.skip {
			continue
		}
		return it, true
	}
	return item{}, false
}

func (r *Reader) enqueueLocked(m *kgo.Record) {
	base := Record{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset}
	if m.Timestamp.UnixMilli() > 0 {
		base.EventTime = m.Timestamp
	}
	fail := func(err error) {
		rec := base
		rec.Last = true
		r.queue = append(r.queue, item{rec: rec, err: &RecordError{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Err: err}})
	}
	for _, h := range m.Headers {
		if h.Key == EventTimeHeader {
			ms, err := strconv.ParseInt(string(h.Value), 10, 64)
			if err != nil {
				fail(fmt.Errorf("header %s %q: want decimal Unix milliseconds", EventTimeHeader, h.Value))
				return
			}
			base.EventTime = time.UnixMilli(ms)
		}
	}
	if len(m.Value) == 0 {
		rec := base
		rec.Last = true
		r.queue = append(r.queue, item{rec: rec, skip: r.cfg.FilterEmpty})
		return
	}
	if !r.cfg.HasHeader {
		rec := base
		rec.Data, rec.Last = m.Value, true
		r.queue = append(r.queue, item{rec: rec})
		return
	}
	h := instance.Header{
		Lagrangex:       r.cfg.LagrangexHeader,
		KafkaDumpPrefix: r.cfg.KafkaDumpPrefix,
		HasSortID:       r.cfg.HasSortID,
		KafkaDump:       r.cfg.KafkaDump,
	}
	fr := instance.NewFrameReader(bytes.NewReader(m.Value), h)
	for {
		f, err := fr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fail(err)
			return
		}
		rec := base
		rec.Data = f.Data
		r.queue = append(r.queue, item{rec: rec, skip: len(f.Data) == 0 && r.cfg.FilterEmpty})
	}
	// The message's last item moves the position past it.
	r.queue[len(r.queue)-1].rec.Last = true
}

// Position returns the offsets after the records Next has returned (and the messages it
// skipped), per partition this reader has read or was given a start offset for.
func (r *Reader) Position() Offsets {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pos.Clone()
}

// Lag is the number of messages between Position and the high watermarks the last fetches
// reported, summed over the partitions this reader has read.
func (r *Reader) Lag() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var lag int64
	for t, ps := range r.hw {
		for p, hw := range ps {
			if n, ok := r.pos.Get(t, p); ok && hw > n {
				lag += hw - n
			}
		}
	}
	return lag
}

// Commit commits offs to the consumer group (for monitoring, and as the start of readers opened
// without start offsets). ctx bounds it (10 s without a deadline). An error names the partition.
func (r *Reader) Commit(ctx context.Context, offs Offsets) error {
	if len(offs) == 0 {
		return nil
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, callTimeout)
		defer cancel()
	}
	m := map[string]map[int32]kgo.EpochOffset{}
	for t, ps := range offs {
		m[t] = map[int32]kgo.EpochOffset{}
		for p, n := range ps {
			m[t][p] = kgo.EpochOffset{Epoch: -1, Offset: n}
		}
	}
	if err := commitSync(ctx, r.cl, m); err != nil {
		return fmt.Errorf("kafka: commit to group %s: %w", r.s.group, err)
	}
	return nil
}

// Close leaves the group (committing the positions of its partitions, so that the readers that
// take them over start after the records this one returned) and stops the client's goroutines.
// The leave is bounded by 10 s.
func (r *Reader) Close() error {
	r.closeOnce.Do(func() {
		close(r.closed)
		r.cl.AllowRebalance()
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		if err := r.cl.LeaveGroupContext(ctx); err != nil {
			r.log.Warn("kafka: leaving the group", "group", r.s.group, "err", err)
		}
		cancel()
		r.cl.Close()
	})
	return nil
}

// logger sends kgo's warnings and errors to slog.
type logger struct{ l *slog.Logger }

func (l logger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (l logger) Log(level kgo.LogLevel, msg string, kv ...any) {
	switch level {
	case kgo.LogLevelError:
		l.l.Error("kafka: "+msg, kv...)
	default:
		l.l.Warn("kafka: "+msg, kv...)
	}
}
