package job_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	tfexamplepb "github.com/monolith-go/monolith/gen/pb/tensorflow/core/example"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
	"github.com/monolith-go/monolith/pkg/trainer/job"
)

// memRecords is an in-memory stream: its records from position on, then it waits for more
// until its context ends, or ends (io.EOF) when ended.
type memRecords struct {
	recs  [][]byte
	next  int
	ended bool
	lag   int64
}

func (m *memRecords) Lag() int64 { return m.lag }

func (m *memRecords) Next(ctx context.Context) (job.Record, error) {
	if m.next < len(m.recs) {
		m.next++
		// Record i happened at 1e12+i ms.
		return job.Record{Data: m.recs[m.next-1], Where: fmt.Sprintf("record %d", m.next-1), EventTime: time.UnixMilli(1e12 + int64(m.next-1))}, nil
	}
	if m.ended {
		return job.Record{}, io.EOF
	}
	<-ctx.Done()
	return job.Record{}, ctx.Err()
}

func (m *memRecords) Position() ([]byte, error) { return json.Marshal(map[string]int{"next": m.next}) }
func (m *memRecords) Close() error              { return nil }

// userRecords are n tf.train.Examples of a user id (i) and a label (i % 2); bad lists records
// made undecodable.
func userRecords(t *testing.T, n int, bad ...int) [][]byte {
	t.Helper()
	var out [][]byte
	for i := range n {
		f := map[string]*tfexamplepb.Feature{
			"label":   {Kind: &tfexamplepb.Feature_Int64List{Int64List: &tfexamplepb.Int64List{Value: []int64{int64(i % 2)}}}},
			"user_id": {Kind: &tfexamplepb.Feature_Int64List{Int64List: &tfexamplepb.Int64List{Value: []int64{int64(i)}}}},
		}
		for _, b := range bad {
			if b == i {
				delete(f, "user_id")
			}
		}
		data, err := proto.Marshal(&tfexamplepb.Example{Features: &tfexamplepb.Features{Feature: f}})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, data)
	}
	return out
}

var userInputs = batch.Inputs{Format: batch.TFExample, Label: batch.LabelInput{Source: "label"},
	Sparse: []batch.SparseInput{{Name: "user", Source: "user_id", Slot: 1}}}

// TestStream: a stream's batches carry its position after them, a begun batch goes short after
// Linger, every k-th record is held out for evaluation (the newest kept), bad records are skipped
// within MaxBadRecords, and a restored pass opens the records at the checkpoint's position.
func TestStream(t *testing.T) {
	leakcheck.Check(t)
	recs := &memRecords{recs: userRecords(t, 25, 7)}
	var openedAt []byte
	s, err := job.NewStream(job.Stream{Name: "topic", Inputs: userInputs, BatchSize: 10, Linger: 20 * time.Millisecond,
		HoldoutEvery: 5, HoldoutSize: 3, MaxBadRecords: 1,
		OpenRecords: func(_ context.Context, pos []byte) (job.Records, error) { openedAt = pos; return recs, nil }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	in, err := s.Open(ctx, job.Position{Source: []byte(`{"next":0}`)})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if string(openedAt) != `{"next":0}` {
		t.Errorf("opened at %s", openedAt)
	}
	var sizes []int
	var positions []string
	var newest []int64
	for range 2 {
		b, err := in.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sizes, positions = append(sizes, b.Size()), append(positions, string(b.Position))
		newest = append(newest, b.NewestEventTime.UnixMilli()-1e12)
	}
	// A batch's newest event time is its newest trained record's: 12, then 23 (record 24 is held
	// out).
	if fmt.Sprint(newest) != "[12 23]" {
		t.Errorf("batches' newest events %v, want records 12 and 23", newest)
	}
	// 25 records: 5 held out (the 5th, 10th, ... 25th), record 7 bad: 19 trained, in a batch of
	// 10 and one of 9 that Linger cut short (a third would wait for a record to begin it).
	if fmt.Sprint(sizes) != "[10 9]" {
		t.Errorf("batch sizes %v, want 10 then 9", sizes)
	}
	if positions[0] != `{"next":13}` || positions[1] != `{"next":25}` {
		t.Errorf("positions %v", positions)
	}
	if s.Bad() != 1 {
		t.Errorf("%d bad records, want 1", s.Bad())
	}
	// The metrics count every record by outcome, the lag the open records report, and the age
	// of each batch's newest event (records of 2001: years old).
	recs.lag = 7
	got := streamMetrics(t, s)
	for k, want := range map[string]float64{
		`monolith_train_stream_records_total{outcome="trained"}`:  19,
		`monolith_train_stream_records_total{outcome="held_out"}`: 5,
		`monolith_train_stream_records_total{outcome="bad"}`:      1,
		`monolith_train_stream_lag_records`:                       7,
		`monolith_train_stream_event_age_seconds_count`:           2,
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v", k, got[k], want)
		}
	}
	if age := got[`monolith_train_stream_lag_seconds`]; age < float64(time.Since(time.UnixMilli(1e12+24))/time.Second)-60 {
		t.Errorf("lag %v s, want the age of the newest record read", age)
	}
	ev, err := s.Holdout().Open(ctx, job.Position{})
	if err != nil {
		t.Fatal(err)
	}
	eb, err := ev.Next(ctx)
	if err != nil || eb.Size() != 3 {
		t.Fatalf("holdout: %v, %v, want the newest 3", eb, err)
	}
	if got := eb.Fids[0][0] & (1<<48 - 1); got != 14 {
		t.Errorf("oldest held out user %d, want 14 (records 15, 20 and 25 kept)", got)
	}

	// A second bad record is one too many.
	recs2 := &memRecords{recs: userRecords(t, 10, 2, 4), ended: true}
	s2, err := job.NewStream(job.Stream{Name: "topic", Inputs: userInputs, BatchSize: 10, Linger: time.Second, MaxBadRecords: 1,
		OpenRecords: func(context.Context, []byte) (job.Records, error) { return recs2, nil }})
	if err != nil {
		t.Fatal(err)
	}
	in2, err := s2.Open(ctx, job.Position{})
	if err != nil {
		t.Fatal(err)
	}
	defer in2.Close()
	if _, err := in2.Next(ctx); err == nil || !strings.Contains(err.Error(), "topic: record 4: ") || !strings.Contains(err.Error(), "--max_bad_records allows 1") {
		t.Fatalf("err = %v, want record 4 named", err)
	}

	// Stop ends a stream waiting for records that do not come.
	stop := make(chan struct{})
	s3, err := job.NewStream(job.Stream{Name: "topic", Inputs: userInputs, BatchSize: 10, Linger: time.Hour, Stop: stop,
		OpenRecords: func(context.Context, []byte) (job.Records, error) { return &memRecords{recs: userRecords(t, 3)}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	in3, err := s3.Open(ctx, job.Position{})
	if err != nil {
		t.Fatal(err)
	}
	defer in3.Close()
	go func() { time.Sleep(10 * time.Millisecond); close(stop) }()
	if b, err := in3.Next(ctx); err != nil || b.Size() != 3 {
		t.Fatalf("stopped with a batch begun: %v, %v; want its 3 examples", b, err)
	}
	if _, err := in3.Next(ctx); err != io.EOF {
		t.Fatalf("after the stop: %v, want io.EOF", err)
	}
}

// streamMetrics scrapes the stream's metrics: "name{labels}" -> value.
func streamMetrics(t *testing.T, s *job.Stream) map[string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := reg.Register(s.Collector()); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				name += fmt.Sprintf("{%s=%q}", l.GetName(), l.GetValue())
			}
			switch {
			case m.GetCounter() != nil:
				out[name] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[name] = m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				out[name+"_count"] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}
