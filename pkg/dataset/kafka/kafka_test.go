package kafka_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/dataset/kafka"
	"github.com/monolith-go/monolith/pkg/dataset/kafka/embedded"
)

// wait bounds every wait of these tests: a test that has not seen what it waits for by then fails.
const wait = 60 * time.Second

func quiet() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func startBroker(t testing.TB, topic string, parts int32, ephemeral bool) *embedded.Broker {
	t.Helper()
	b, err := embedded.Start(context.Background(), embedded.Options{Topics: []string{topic}, Partitions: parts, Ephemeral: ephemeral})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	return b
}

type producer struct {
	t  testing.TB
	cl *kgo.Client
}

func newProducer(t testing.TB, addr string) *producer {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0), kgo.WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	p := &producer{t: t, cl: cl}
	t.Cleanup(cl.Close)
	return p
}

// produce writes values to topic, value i to partition i%parts, each with the event time
// header (i milliseconds after the epoch + 1e12).
func (p *producer) produce(topic string, parts int32, first int, values [][]byte) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	recs := make([]*kgo.Record, len(values))
	for i, v := range values {
		n := first + i
		recs[i] = &kgo.Record{Topic: topic, Partition: int32(n) % parts, Value: v,
			Headers: []kgo.RecordHeader{{Key: kafka.EventTimeHeader, Value: []byte(strconv.FormatInt(1e12+int64(n), 10))}}}
	}
	if err := p.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		p.t.Fatalf("produce: %v", err)
	}
}

// ids returns values "id-<first>" .. "id-<first+n-1>".
func ids(first, n int) [][]byte {
	vs := make([][]byte, n)
	for i := range vs {
		vs[i] = []byte(fmt.Sprintf("id-%d", first+i))
	}
	return vs
}

func frame(headers int, data []byte) []byte {
	// headers: number of 8-byte headers before the size (kafka_dump: 1).
	out := make([]byte, 8*headers, 8*headers+8+len(data))
	out = binary.LittleEndian.AppendUint64(out, uint64(len(data)))
	return append(out, data...)
}

func config(addr, topic, group string) kafka.Config {
	c := kafka.DefaultConfig()
	c.Topics = []string{topic}
	c.Servers = &addr
	c.GroupID = &group
	c.HasHeader = false
	c.MessagePollTimeout = 100
	c.StreamTimeout = 1000
	c.Configuration = []string{"heartbeat.interval.ms=100", "session.timeout.ms=3000", "fetch.wait.max.ms=50"}
	return c
}

func open(t testing.TB, c kafka.Config, start kafka.Offsets) *kafka.Reader {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	r, err := kafka.Open(ctx, c, start, quiet())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// readAll reads until io.EOF, returning the records.
func readAll(t testing.TB, r *kafka.Reader) []kafka.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var out []kafka.Record
	for {
		rec, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("after %d records: %v", len(out), err)
		}
		out = append(out, rec)
	}
}

// readN reads n records.
func readN(t testing.TB, r *kafka.Reader, n int) []kafka.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var out []kafka.Record
	for len(out) < n {
		rec, err := r.Next(ctx)
		if err != nil {
			t.Fatalf("after %d of %d records: %v", len(out), n, err)
		}
		out = append(out, rec)
	}
	return out
}

func values(recs []kafka.Record) map[string]int {
	m := map[string]int{}
	for _, r := range recs {
		m[string(r.Data)]++
	}
	return m
}

// checkExactly fails unless recs hold each of want exactly once.
func checkExactly(t *testing.T, recs []kafka.Record, want [][]byte) {
	t.Helper()
	got := values(recs)
	for _, w := range want {
		if got[string(w)] != 1 {
			t.Errorf("%s read %d times, want 1", w, got[string(w)])
		}
		delete(got, string(w))
	}
	for v, n := range got {
		t.Errorf("unexpected record %q read %d times", v, n)
	}
}

func TestConsumeAll(t *testing.T) {
	leakcheck.Check(t)
	for _, tc := range []struct {
		name   string
		parts  int32
		header bool
	}{
		{"one partition bare", 1, false},
		{"three partitions bare", 3, false},
		{"three partitions framed", 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := startBroker(t, "events", tc.parts, true)
			want := ids(0, 500)
			msgs := want
			if tc.header {
				// Two framed records per message.
				msgs = nil
				for i := 0; i < len(want); i += 2 {
					msgs = append(msgs, append(frame(0, want[i]), frame(0, want[i+1])...))
				}
			}
			newProducer(t, b.Addr()).produce("events", tc.parts, 0, msgs)
			c := config(b.Addr(), "events", "g")
			c.HasHeader = tc.header
			r := open(t, c, nil)
			recs := readAll(t, r)
			checkExactly(t, recs, want)
			for _, rec := range recs {
				if rec.EventTime.IsZero() || rec.Topic != "events" {
					t.Fatalf("record %+v: want topic events and an event time", rec)
				}
			}
			pos := r.Position()
			if pos.Total() != int64(len(msgs)) {
				t.Errorf("position %v sums to %d, want %d messages", pos, pos.Total(), len(msgs))
			}
		})
	}
}

func TestResumeFromOffsets(t *testing.T) {
	leakcheck.Check(t)
	const parts = 3
	b := startBroker(t, "events", parts, true)
	want := ids(0, 300)
	newProducer(t, b.Addr()).produce("events", parts, 0, want)
	c := config(b.Addr(), "events", "g")
	r := open(t, c, nil)
	first := readN(t, r, 120)
	var offs kafka.Offsets
	for _, rec := range first {
		offs.Advance(rec)
	}
	r.Close()
	// The group's committed offsets (Close commits the position) differ from offs: set them
	// back to 0 so that only the start offsets can give the right answer.
	r0 := open(t, c, nil)
	if err := r0.Commit(context.Background(), kafka.Offsets{"events": {0: 0, 1: 0, 2: 0}}); err != nil {
		t.Fatal(err)
	}
	r0.Close()
	r2 := open(t, c, offs)
	rest := readAll(t, r2)
	checkExactly(t, append(first, rest...), want)
	if len(rest) != len(want)-len(first) {
		t.Errorf("resumed reader read %d records, want the other %d", len(rest), len(want)-len(first))
	}
}

func TestStreamTimeoutEnds(t *testing.T) {
	leakcheck.Check(t)
	b := startBroker(t, "events", 1, true)
	for _, tc := range []struct {
		name    string
		records int
	}{{"empty topic", 0}, {"after the records", 10}} {
		t.Run(tc.name, func(t *testing.T) {
			topic := "events"
			if tc.records > 0 {
				newProducer(t, b.Addr()).produce(topic, 1, 0, ids(0, tc.records))
			}
			c := config(b.Addr(), topic, "g-"+strings.ReplaceAll(tc.name, " ", "-"))
			c.StreamTimeout = 300
			r := open(t, c, nil)
			if got := readAll(t, r); len(got) != tc.records {
				t.Errorf("read %d records, want %d", len(got), tc.records)
			}
		})
	}
}

func TestFilterEmpty(t *testing.T) {
	leakcheck.Check(t)
	for _, tc := range []struct {
		name   string
		filter bool
		header bool
		want   int
	}{
		{"bare kept", false, false, 6},
		{"bare filtered", true, false, 4},
		{"framed filtered", true, true, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := startBroker(t, "events", 1, true)
			msgs := [][]byte{[]byte("a"), {}, []byte("b"), []byte("c"), {}, []byte("d")}
			if tc.header {
				for i, m := range msgs {
					if len(m) > 0 {
						msgs[i] = frame(0, m)
					}
				}
				// A framed empty record is filtered too.
				msgs = append(msgs, frame(0, nil))
			}
			newProducer(t, b.Addr()).produce("events", 1, 0, msgs)
			c := config(b.Addr(), "events", "g")
			c.FilterEmpty, c.HasHeader = tc.filter, tc.header
			r := open(t, c, nil)
			got := readAll(t, r)
			if len(got) != tc.want {
				t.Errorf("read %d records (%v), want %d", len(got), values(got), tc.want)
			}
			if pos, _ := r.Position().Get("events", 0); pos != int64(len(msgs)) {
				t.Errorf("position %d, want %d (skipped messages count)", pos, len(msgs))
			}
		})
	}
}

func TestMalformedFraming(t *testing.T) {
	leakcheck.Check(t)
	for _, tc := range []struct {
		name string
		set  func(*kafka.Config)
		good func([]byte) []byte
		bad  []byte
	}{
		{"has_header truncated", func(c *kafka.Config) {}, func(d []byte) []byte { return frame(0, d) },
			frame(0, []byte("truncated"))[:12]},
		{"kafka_dump header missing", func(c *kafka.Config) { c.KafkaDump = true },
			func(d []byte) []byte { return frame(1, d) }, []byte{1, 2, 3}},
		{"kafka_dump_prefix implausible size", func(c *kafka.Config) { c.KafkaDumpPrefix = true },
			// A zero prefix is followed by a second (the sort id size), then the record size.
			func(d []byte) []byte { return frame(2, d) }, binary.LittleEndian.AppendUint64(make([]byte, 16), 1<<63)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := startBroker(t, "events", 1, true)
			msgs := [][]byte{tc.good([]byte("a")), tc.bad, tc.good([]byte("b"))}
			newProducer(t, b.Addr()).produce("events", 1, 0, msgs)
			c := config(b.Addr(), "events", "g")
			c.HasHeader = true
			tc.set(&c)
			r := open(t, c, nil)
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			rec, err := r.Next(ctx)
			if err != nil || string(rec.Data) != "a" {
				t.Fatalf("first: %q, %v; want a", rec.Data, err)
			}
			_, err = r.Next(ctx)
			var re *kafka.RecordError
			if !errors.As(err, &re) || re.Topic != "events" || re.Partition != 0 || re.Offset != 1 {
				t.Fatalf("second: %v; want a RecordError at events/0/1", err)
			}
			if !strings.Contains(err.Error(), "topic events partition 0 offset 1") {
				t.Errorf("error %q does not name topic, partition and offset", err)
			}
			rec, err = r.Next(ctx)
			if err != nil || string(rec.Data) != "b" {
				t.Fatalf("third: %q, %v; want b (reading goes on after a bad message)", rec.Data, err)
			}
		})
	}
}

func TestBrokerRestartMidStream(t *testing.T) {
	leakcheck.Check(t)
	const parts = 2
	b := startBroker(t, "events", parts, false)
	p := newProducer(t, b.Addr())
	want := ids(0, 400)
	p.produce("events", parts, 0, want[:200])
	c := config(b.Addr(), "events", "g")
	c.StreamTimeout = 3000
	r := open(t, c, nil)
	got := readN(t, r, 100)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := b.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	p.produce("events", parts, 200, want[200:])
	got = append(got, readN(t, r, 300)...)
	checkExactly(t, got, want)
}

func TestRebalanceTwoReaders(t *testing.T) {
	leakcheck.Check(t)
	const parts = 4
	b := startBroker(t, "events", parts, true)
	p := newProducer(t, b.Addr())
	c := config(b.Addr(), "events", "g")
	c.StreamTimeout = -1

	var mu sync.Mutex
	seen := map[string]int{}
	perReader := map[string]int{}
	reader := func(name string, r *kafka.Reader, stop <-chan struct{}, done chan<- error) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		for {
			rec, err := r.Next(ctx)
			if err != nil {
				if ctx.Err() != nil {
					err = nil
				}
				done <- err
				return
			}
			mu.Lock()
			seen[string(rec.Data)]++
			perReader[name]++
			mu.Unlock()
		}
	}
	count := func(name string) (distinct, of int) {
		mu.Lock()
		defer mu.Unlock()
		return len(seen), perReader[name]
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(wait)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("waited %v for %s", wait, what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	n := 0
	produce := func(k int) { p.produce("events", parts, n, ids(n, k)); n += k }
	produce(400)
	ra := open(t, c, nil)
	stopA, doneA := make(chan struct{}), make(chan error, 1)
	go reader("a", ra, stopA, doneA)
	waitFor("reader a's first records", func() bool { _, a := count("a"); return a > 0 })

	// b joins: the group rebalances while a reads.
	rb := open(t, c, nil)
	stopB, doneB := make(chan struct{}), make(chan error, 1)
	go reader("b", rb, stopB, doneB)
	waitFor("reader b's records after the rebalance", func() bool {
		if _, bn := count("b"); bn > 0 {
			return true
		}
		produce(8)
		return false
	})

	// a leaves mid-stream: b takes its partitions over from a's committed positions.
	produce(400)
	close(stopA)
	if err := <-doneA; err != nil {
		t.Fatalf("reader a: %v", err)
	}
	ra.Close()
	produce(400)
	total := n
	waitFor("every record", func() bool { d, _ := count("b"); return d == total })
	close(stopB)
	if err := <-doneB; err != nil {
		t.Fatalf("reader b: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for i := 0; i < total; i++ {
		if seen[fmt.Sprintf("id-%d", i)] == 0 {
			t.Errorf("id-%d never read", i)
		}
	}
	dups := 0
	for _, k := range seen {
		dups += k - 1
	}
	t.Logf("%d records, a read %d, b read %d, %d read twice", total, perReader["a"], perReader["b"], dups)
}
