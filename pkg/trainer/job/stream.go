package job

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/estimator"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
)

// Records is an unbounded source of serialized examples: a Kafka consumer. Next blocks until a
// record comes (or ctx ends: its error), and returns io.EOF once the stream has ended (its
// timeout passed without a message).
type Records interface {
	Next(ctx context.Context) (Record, error)
	// Position is where the source is after the last record Next returned, as JSON (a Kafka
	// consumer's next offset of every partition): what a checkpoint records.
	Position() ([]byte, error)
	Close() error
}

// Record is one record of a stream.
type Record struct {
	Data []byte
	// Where names the record in errors ("topic t partition 2 offset 17").
	Where string
	// Err is set on a message the source could not read (malformed framing): a bad record.
	Err error
	// EventTime is when the record's event happened (zero: unknown).
	EventTime time.Time
}

// Stream is the Source of a stream of records: batches of BatchSize examples decoded as Inputs
// say, each carrying the stream's position after it (so that a checkpoint records it and a
// restored run reads on from there); a batch is cut short when no record comes for Linger. Every
// HoldoutEvery-th record (0: none) is held out of training into the evaluation slice that Holdout
// reads. Up to MaxBadRecords records that do not decode are skipped and counted (Bad); one more
// fails the input, naming it. The workers of a job share one stream (a consumer group divides its
// partitions among them): its shards are itself.
type Stream struct {
	// Name names the stream in errors ("--kafka_topics").
	Name string
	// OpenRecords opens the records at position (a checkpoint's; nil: where the source
	// starts).
	OpenRecords func(ctx context.Context, position []byte) (Records, error)
	Inputs      batch.Inputs
	BatchSize   int
	Linger      time.Duration
	// HoldoutEvery, HoldoutSize: every HoldoutEvery-th record goes to the evaluation slice,
	// which keeps the newest HoldoutSize of them.
	HoldoutEvery, HoldoutSize int
	MaxBadRecords             int
	// Stop, when closed, ends the stream: a batch begun goes as it is, and the next Next is
	// io.EOF (the job's orderly stop: it does not wait for records that may never come).
	Stop <-chan struct{}

	state *streamState
}

// streamState is what a stream's passes share: its evaluation slice and its bad records.
type streamState struct {
	mu      sync.Mutex
	holdout []*batch.Batch // one example each, newest last
	bad     int64
	metrics *streamMetrics
}

// NewStream returns s ready to open (its shared state made).
func NewStream(s Stream) (*Stream, error) {
	switch {
	case s.OpenRecords == nil:
		return nil, errkind.New(errkind.Value, "job: stream %s has no OpenRecords", s.Name)
	case s.BatchSize <= 0:
		return nil, errkind.New(errkind.Value, "job: stream %s: batch size %d is not positive", s.Name, s.BatchSize)
	case s.Linger <= 0:
		return nil, errkind.New(errkind.Value, "job: stream %s: linger %v is not positive", s.Name, s.Linger)
	case s.HoldoutEvery < 0 || s.HoldoutSize < 0 || (s.HoldoutEvery > 0) != (s.HoldoutSize > 0):
		return nil, errkind.New(errkind.Value, "job: stream %s: holdout every %d, size %d: give both or neither", s.Name, s.HoldoutEvery, s.HoldoutSize)
	case s.MaxBadRecords < 0:
		return nil, errkind.New(errkind.Value, "job: stream %s: max bad records %d is negative", s.Name, s.MaxBadRecords)
	}
	if _, err := batch.NewDecoder(s.Inputs); err != nil {
		return nil, err
	}
	s.state = &streamState{metrics: newStreamMetrics()}
	return &s, nil
}

// Collector is the stream's metrics: records by outcome, records/s, consumer lag in records and
// seconds, commit failures, and the age of each training batch's newest event.
func (s *Stream) Collector() prometheus.Collector { return s.state.metrics }

// Commit records position (a checkpoint's) with the open pass's source, when it can (Committer:
// the Kafka consumer group's offsets); a failure is counted, and returned.
func (s *Stream) Commit(ctx context.Context, position []byte) error {
	m := s.state.metrics
	m.mu.Lock()
	c, ok := m.open.(Committer)
	m.mu.Unlock()
	if !ok || position == nil {
		return nil
	}
	if err := c.Commit(ctx, position); err != nil {
		m.commitFailed()
		return fmt.Errorf("%s: commit the checkpoint's position: %w", s.Name, err)
	}
	return nil
}

// Shard is the stream itself: the consumer group divides the partitions.
func (s *Stream) Shard(int, int) (Source, error) { return s, nil }

// Describe names the stream.
func (s *Stream) Describe() string {
	return fmt.Sprintf("stream %s in batches of %d", s.Name, s.BatchSize)
}

// Bad is the number of records skipped as undecodable.
func (s *Stream) Bad() int64 {
	s.state.mu.Lock()
	defer s.state.mu.Unlock()
	return s.state.bad
}

// Open opens the stream at the checkpoint's position (at.Source).
func (s *Stream) Open(ctx context.Context, at Position) (estimator.Input[*batch.Batch], error) {
	dec, err := batch.NewDecoder(s.Inputs)
	if err != nil {
		return nil, err
	}
	recs, err := s.OpenRecords(ctx, at.Source)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Name, err)
	}
	s.state.metrics.setOpen(recs)
	return &streamInput{s: s, recs: recs, dec: dec}, nil
}

// streamInput is one pass over a stream (the run's training input).
type streamInput struct {
	s     *Stream
	recs  Records
	dec   *batch.Decoder
	n     int64 // records read
	ended bool  // the records ended
}

func (in *streamInput) Next(ctx context.Context) (*batch.Batch, error) {
	if in.ended {
		return nil, io.EOF
	}
	b := &batch.Batch{DenseDim: in.dec.DenseDim()}
	for b.Size() < in.s.BatchSize {
		wait := time.Duration(math.MaxInt64)
		if b.Size() > 0 {
			// A batch begun waits Linger for its next record, then goes as it is.
			wait = in.s.Linger
		}
		rctx, cancel := context.WithTimeout(ctx, wait)
		if in.s.Stop != nil {
			go func() {
				select {
				case <-in.s.Stop:
					cancel()
				case <-rctx.Done():
				}
			}()
		}
		rec, err := in.recs.Next(rctx)
		cancel()
		switch {
		case errors.Is(err, io.EOF):
			in.ended = true
		case err != nil && ctx.Err() == nil && rctx.Err() != nil:
			// Linger passed, or the job stops.
			if isStopped(in.s.Stop) {
				in.ended = true
			}
		case err != nil:
			return nil, fmt.Errorf("%s: %w", in.s.Name, err)
		}
		if err != nil {
			break
		}
		in.n++
		if rec.Err != nil {
			if err := in.skip(rec, rec.Err); err != nil {
				return nil, err
			}
			continue
		}
		if k := in.s.HoldoutEvery; k > 0 && in.n%int64(k) == 0 {
			if err := in.holdout(rec); err != nil {
				return nil, err
			}
			continue
		}
		if err := in.dec.Append(b, rec.Data); err != nil {
			if err := in.skip(rec, err); err != nil {
				return nil, err
			}
			continue
		}
		in.s.state.metrics.read("trained", rec.EventTime)
		if rec.EventTime.After(b.NewestEventTime) {
			b.NewestEventTime = rec.EventTime
		}
	}
	if b.Size() == 0 {
		return nil, io.EOF
	}
	pos, err := in.recs.Position()
	if err != nil {
		return nil, fmt.Errorf("%s: position: %w", in.s.Name, err)
	}
	b.Position = pos
	in.s.state.metrics.batch(b.NewestEventTime)
	return b, nil
}

// holdout puts rec into the evaluation slice.
func (in *streamInput) holdout(rec Record) error {
	b := &batch.Batch{DenseDim: in.dec.DenseDim()}
	if err := in.dec.Append(b, rec.Data); err != nil {
		return in.skip(rec, err)
	}
	in.s.state.metrics.read("held_out", rec.EventTime)
	st := in.s.state
	st.mu.Lock()
	defer st.mu.Unlock()
	st.holdout = append(st.holdout, b)
	if n := len(st.holdout) - in.s.HoldoutSize; n > 0 {
		st.holdout = append(st.holdout[:0], st.holdout[n:]...)
	}
	return nil
}

// skip counts a record that does not decode, or fails the input when MaxBadRecords are spent.
func (in *streamInput) skip(rec Record, err error) error {
	st := in.s.state
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.bad >= int64(in.s.MaxBadRecords) {
		return fmt.Errorf("%s: %s: %w (%d bad records skipped before it; --max_bad_records allows %d)", in.s.Name, rec.Where, err, st.bad, in.s.MaxBadRecords)
	}
	st.bad++
	st.metrics.read("bad", rec.EventTime)
	return nil
}

func (in *streamInput) Close() error {
	in.s.state.metrics.setOpen(nil)
	return in.recs.Close()
}

// Holdout is the Source of a stream's evaluation slice: its newest held-out examples when an
// evaluation begins, in batches of the stream's size.
func (s *Stream) Holdout() Source { return holdout{s} }

type holdout struct{ s *Stream }

func (h holdout) Describe() string {
	return fmt.Sprintf("every %d-th record of %s", h.s.HoldoutEvery, h.s.Name)
}

func (h holdout) Open(context.Context, Position) (estimator.Input[*batch.Batch], error) {
	st := h.s.state
	st.mu.Lock()
	exs := append([]*batch.Batch(nil), st.holdout...)
	st.mu.Unlock()
	if len(exs) == 0 {
		return nil, fmt.Errorf("%s: no record held out for evaluation yet", h.s.Name)
	}
	return &holdoutInput{exs: exs, size: h.s.BatchSize}, nil
}

type holdoutInput struct {
	exs  []*batch.Batch
	size int
}

func (in *holdoutInput) Next(context.Context) (*batch.Batch, error) {
	if len(in.exs) == 0 {
		return nil, io.EOF
	}
	n := min(in.size, len(in.exs))
	b := &batch.Batch{DenseDim: in.exs[0].DenseDim}
	for _, ex := range in.exs[:n] {
		b.Labels = append(b.Labels, ex.Labels...)
		b.Dense = append(b.Dense, ex.Dense...)
		b.Fids = append(b.Fids, ex.Fids...)
	}
	in.exs = in.exs[n:]
	return b, nil
}

func (in *holdoutInput) Close() error { return nil }

// isStopped reports whether stop is closed.
func isStopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}
