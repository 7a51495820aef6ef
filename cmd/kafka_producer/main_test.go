package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/csvconvert"
	"github.com/monolith-go/monolith/pkg/dataset"
	"github.com/monolith-go/monolith/pkg/featureschema"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
)

const topic = "events"

// broker starts an in-process Kafka-protocol broker (franz-go's kfake, one node on 127.0.0.1)
// with topic in 3 partitions; the test's end stops it. (pkg/dataset/kafka/embedded wraps the
// same broker for cmd/train; this test uses kfake directly to depend on nothing but the client.)
func broker(t *testing.T) string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	addrs := c.ListenAddrs()
	if len(addrs) != 1 || !strings.HasPrefix(addrs[0], "127.0.0.1:") {
		t.Fatalf("broker listens on %v, want one loopback address", addrs)
	}
	return addrs[0]
}

type result struct {
	code           int
	stdout, stderr string
}

func runCmd(t *testing.T, clk clock, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code := runClock(ctx, args, &out, &errb, clk)
	return result{code, out.String(), errb.String()}
}

// writeTFRecord writes recs into a TFRecord file of compression c.
func writeTFRecord(t *testing.T, path string, c dataset.Compression, recs [][]byte) string {
	t.Helper()
	w, err := dataset.CreateFile(path, c)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func records(prefix string, n int) [][]byte {
	var recs [][]byte
	for i := range n {
		recs = append(recs, fmt.Appendf(nil, "%s-%04d %s", prefix, i, strings.Repeat("x", i%17)))
	}
	return recs
}

func write(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// consume reads n messages of topic from its start (failing after 15 s without them), then
// checks that no more come within a short wait.
func consume(t *testing.T, addr string, n int) []*kgo.Record {
	t.Helper()
	return consumeAtLeast(t, addr, n, true)
}

// consumeAtLeast reads at least n messages of topic from its start (failing after 15 s without
// them), and with exact checks that no more come within a short wait.
func consumeAtLeast(t *testing.T, addr string, n int, exact bool) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var got []*kgo.Record
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d messages before the deadline", len(got), n)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		got = append(got, fs.Records()...)
	}
	if !exact {
		return got
	}
	if len(got) > n {
		t.Fatalf("%d messages, %d expected", len(got), n)
	}
	extra, cancelExtra := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancelExtra()
	if more := cl.PollFetches(extra).Records(); len(more) > 0 {
		t.Fatalf("%d messages more than the %d expected", len(more), n)
	}
	return got
}

// checkMessages checks that got holds exactly the values want (in any order across partitions),
// each with an event-time header within [from, to] (Unix ms) equal to its Kafka timestamp.
func checkMessages(t *testing.T, got []*kgo.Record, want [][]byte, from, to time.Time) {
	t.Helper()
	var values []string
	for _, r := range got {
		values = append(values, string(r.Value))
		var stamps []string
		for _, h := range r.Headers {
			if h.Key == EventTimeHeader {
				stamps = append(stamps, string(h.Value))
			}
		}
		if len(stamps) != 1 {
			t.Fatalf("message at %d/%d has %d %s headers: %v", r.Partition, r.Offset, len(stamps), EventTimeHeader, r.Headers)
		}
		ms, err := strconv.ParseInt(stamps[0], 10, 64)
		if err != nil {
			t.Fatalf("message at %d/%d: %s %q is not decimal: %v", r.Partition, r.Offset, EventTimeHeader, stamps[0], err)
		}
		if ms < from.UnixMilli() || ms > to.UnixMilli() {
			t.Errorf("message at %d/%d: event time %d outside the run [%d, %d]", r.Partition, r.Offset, ms, from.UnixMilli(), to.UnixMilli())
		}
		if r.Timestamp.UnixMilli() != ms {
			t.Errorf("message at %d/%d: timestamp %d, event time %d", r.Partition, r.Offset, r.Timestamp.UnixMilli(), ms)
		}
	}
	var wantValues []string
	for _, w := range want {
		wantValues = append(wantValues, string(w))
	}
	slices.Sort(values)
	slices.Sort(wantValues)
	if !slices.Equal(values, wantValues) {
		t.Fatalf("the topic holds %d messages, not the %d records sent (first difference among the sorted values)", len(values), len(wantValues))
	}
}

// TestTFRecord: every record of the TFRecord files (plain, GZIP, ZLIB) arrives once, with its
// event time; the summary counts them.
func TestTFRecord(t *testing.T) {
	leakcheck.Check(t)
	for _, c := range []dataset.Compression{dataset.NoCompression, "GZIP", "ZLIB"} {
		t.Run(string(c)+"_", func(t *testing.T) {
			addr := broker(t)
			dir := t.TempDir()
			a, b := records("a", 150), records("b", 77)
			writeTFRecord(t, filepath.Join(dir, "part-0.tfrecord"), c, a)
			writeTFRecord(t, filepath.Join(dir, "part-1.tfrecord"), c, b)
			from := time.Now()
			r := runCmd(t, realClock{}, "--servers="+addr, "--topic="+topic, "--input="+filepath.Join(dir, "part-*"),
				"--compression="+string(c), "--progress_interval=10ms")
			to := time.Now()
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			for _, line := range []string{"topic         events (3 partitions) on " + addr, "events        227 acknowledged", "1 pass over 2 files", "errors        0"} {
				if !strings.Contains(r.stdout, line) {
					t.Errorf("summary lacks %q:\n%s", line, r.stdout)
				}
			}
			checkMessages(t, consume(t, addr, 227), append(a, b...), from, to)
		})
	}
}

const schemaYAML = `
label: {source: rating, threshold: 4}
features:
  - {name: user_id, kind: sparse_int, slot: 1}
  - {name: genre, kind: sparse_string, slot: 3, source: genres, separator: "|", optional: true, default: []}
  - {name: price, kind: dense, dim: 1, optional: true, default: ["0.5"]}
`

// csvRows is a CSV of n rows.
func csvRows(n int, comma string) string {
	var b strings.Builder
	b.WriteString(strings.ReplaceAll("rating,user_id,genres,price\n", ",", comma))
	genres := []string{"drama|comedy", "", "action", "sci-fi|drama|war"}
	for i := range n {
		price := ""
		if i%3 != 0 {
			price = strconv.FormatFloat(float64(i)/10, 'f', 1, 64)
		}
		fmt.Fprintf(&b, "%d%s%d%s%s%s%s\n", 1+i%5, comma, 1000+i, comma, genres[i%len(genres)], comma, price)
	}
	return b.String()
}

// converted is what csvconvert makes of data: the records the producer must send.
func converted(t *testing.T, schemaPath, data string, comma rune, format batch.Format) [][]byte {
	t.Helper()
	s, err := featureschema.Load(schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := csvconvert.PlanOf(s)
	if err != nil {
		t.Fatal(err)
	}
	var w memWriter
	conv, err := csvconvert.NewConverter(plan, []csvconvert.RecordWriter{&w}, csvconvert.Options{Format: format, Comma: comma})
	if err != nil {
		t.Fatal(err)
	}
	if err := conv.Convert(context.Background(), "data", strings.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	return w.recs
}

type memWriter struct{ recs [][]byte }

func (w *memWriter) Write(rec []byte) error {
	w.recs = append(w.recs, bytes.Clone(rec))
	return nil
}

// TestCSV: CSV and TSV rows arrive as the Examples csvconvert makes of them (both kinds), each
// with its event time.
func TestCSV(t *testing.T) {
	leakcheck.Check(t)
	for _, tc := range []struct {
		format, example string
		comma           rune
	}{
		{"csv", "tf_example", ','},
		{"tsv", "monolith", '\t'},
	} {
		t.Run(tc.format+"_"+tc.example, func(t *testing.T) {
			addr := broker(t)
			dir := t.TempDir()
			schema := write(t, filepath.Join(dir, "schema.yaml"), schemaYAML)
			data := csvRows(120, string(tc.comma))
			input := write(t, filepath.Join(dir, "rows."+tc.format), data)
			want := converted(t, schema, data, tc.comma, batch.Format(tc.example))
			if len(want) != 120 {
				t.Fatalf("csvconvert made %d records of 120 rows", len(want))
			}
			from := time.Now()
			r := runCmd(t, realClock{}, "--servers="+addr, "--topic="+topic, "--input="+input, "--format="+tc.format,
				"--schema="+schema, "--example="+tc.example, "--partitions=key", "--log_format=json")
			to := time.Now()
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			if !strings.Contains(r.stdout, "events        120 acknowledged") {
				t.Errorf("summary:\n%s", r.stdout)
			}
			checkMessages(t, consume(t, addr, 120), want, from, to)
		})
	}
}

// TestLoopDuration: with --loop the input is replayed until --duration; at 100 events/s for 1 s
// (by a fake clock) that is 100 messages exactly, 15 passes over a file of 7 records, and each
// message's event time is the clock's time when it was sent.
func TestLoopDuration(t *testing.T) {
	leakcheck.Check(t)
	addr := broker(t)
	dir := t.TempDir()
	recs := records("r", 7)
	input := writeTFRecord(t, filepath.Join(dir, "r.tfrecord"), dataset.NoCompression, recs)
	// The clock starts now: the client times a message's delivery from its timestamp.
	clk := &fakeClock{now: time.Now()}
	from := clk.Now()
	r := runCmd(t, clk, "--servers="+addr, "--topic="+topic, "--input="+input, "--loop", "--rate=100", "--duration=1s")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "events        100 acknowledged") || !strings.Contains(r.stdout, "15 passes over 1 file") {
		t.Errorf("summary:\n%s", r.stdout)
	}
	var want [][]byte
	for i := range 100 {
		want = append(want, recs[i%7])
	}
	got := consume(t, addr, 100)
	checkMessages(t, got, want, from, from.Add(990*time.Millisecond))
	// The event times are the pacer's schedule: 10 ms apart.
	var stamps []int64
	for _, m := range got {
		stamps = append(stamps, m.Timestamp.UnixMilli())
	}
	slices.Sort(stamps)
	for i, s := range stamps {
		if s != from.UnixMilli()+int64(10*i) {
			t.Fatalf("event time %d: %d ms after the start, want %d", i, s-from.UnixMilli(), 10*i)
		}
	}
}

// TestPartitionsByKey: with --partitions=key each message is keyed by its record's hash, and the
// same record goes to the same partition every time; round_robin sends unkeyed messages to
// every partition.
func TestPartitionsByKey(t *testing.T) {
	leakcheck.Check(t)
	addr := broker(t)
	dir := t.TempDir()
	recs := records("k", 30)
	input := writeTFRecord(t, filepath.Join(dir, "k.tfrecord"), dataset.NoCompression, recs)
	for range 2 {
		if r := runCmd(t, realClock{}, "--servers="+addr, "--topic="+topic, "--input="+input, "--partitions=key"); r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
	}
	partitionOf := map[string]int32{}
	used := map[int32]bool{}
	for _, m := range consume(t, addr, 60) {
		if want := keyOf(m.Value); !bytes.Equal(m.Key, want) {
			t.Errorf("message %q has key %q, want %q", m.Value, m.Key, want)
		}
		if p, ok := partitionOf[string(m.Value)]; ok && p != m.Partition {
			t.Errorf("record %q went to partitions %d and %d", m.Value, p, m.Partition)
		}
		partitionOf[string(m.Value)] = m.Partition
		used[m.Partition] = true
	}
	if len(partitionOf) != 30 || len(used) < 2 {
		t.Errorf("%d distinct records over %d partitions", len(partitionOf), len(used))
	}

	addr = broker(t)
	if r := runCmd(t, realClock{}, "--servers="+addr, "--topic="+topic, "--input="+input); r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	perPartition := map[int32]int{}
	for _, m := range consume(t, addr, 30) {
		if m.Key != nil {
			t.Errorf("round_robin message %q has key %q", m.Value, m.Key)
		}
		perPartition[m.Partition]++
	}
	if len(perPartition) != 3 {
		t.Errorf("round_robin used partitions %v, want all 3", perPartition)
	}
}

// freePort is a loopback port nothing listens on.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestBadInput: a bad command line or bad input exits 2 with one line on stderr naming the
// fault.
func TestBadInput(t *testing.T) {
	leakcheck.Check(t)
	addr := broker(t)
	dir := t.TempDir()
	good := writeTFRecord(t, filepath.Join(dir, "good.tfrecord"), dataset.NoCompression, records("g", 5))
	empty := writeTFRecord(t, filepath.Join(dir, "empty.tfrecord"), dataset.NoCompression, nil)
	corrupt := filepath.Join(dir, "corrupt.tfrecord")
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-10] ^= 0xff
	write(t, corrupt, string(data))
	schema := write(t, filepath.Join(dir, "schema.yaml"), schemaYAML)
	badSchema := write(t, filepath.Join(dir, "bad.yaml"), "label: {source: rating}\nfeatures:\n  - {name: u, kind: sparse_intt, slot: 1}\n")
	rows := write(t, filepath.Join(dir, "rows.csv"), csvRows(10, ","))
	badRow := write(t, filepath.Join(dir, "bad.csv"), "rating,user_id,genres,price\n1,12,a,0.5\n1,notanumber,a,0.5\n")
	noColumn := write(t, filepath.Join(dir, "nocol.csv"), "rating,genres,price\n1,a,0.5\n")
	base := []string{"--servers=" + addr, "--topic=" + topic, "--log_level=error"}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no servers", []string{"--topic=t", "--input=" + good}, "--servers is required"},
		{"bad servers", []string{"--servers=localhost", "--topic=t", "--input=" + good}, `--servers: "localhost" is not host:port`},
		{"no topic", []string{"--servers=" + addr, "--input=" + good}, "--topic is required"},
		{"no input", base, "--input is required"},
		{"unknown flag", append(base, "--input="+good, "--nope"), "unknown flag --nope"},
		{"bad format", append(base, "--input="+good, "--format=xml"), "--format must be one of"},
		{"bad rate", append(base, "--input="+good, "--rate=-1"), "--rate -1"},
		{"bad rate value", append(base, "--input="+good, "--rate=fast"), "--rate"},
		{"bad duration", append(base, "--input="+good, "--duration=-1s"), "--duration -1s is negative"},
		{"bad timeout", append(base, "--input="+good, "--timeout=500ms"), "--timeout 500ms: want at least 1s"},
		{"bad compression", append(base, "--input="+good, "--compression=LZ4"), "--compression"},
		{"schema with tfrecord", append(base, "--input="+good, "--schema="+schema), "--schema is for --format=csv or tsv"},
		{"csv without schema", append(base, "--input="+rows, "--format=csv"), "--schema is required with --format=csv"},
		{"compression with csv", append(base, "--input="+rows, "--format=csv", "--schema="+schema, "--compression=GZIP"), "--compression is for --format=tfrecord"},
		{"missing files", append(base, "--input="+filepath.Join(dir, "nope-*.tfrecord")), "--input"},
		{"missing schema", append(base, "--input="+rows, "--format=csv", "--schema="+filepath.Join(dir, "nope.yaml")), "--schema"},
		{"bad schema", append(base, "--input="+rows, "--format=csv", "--schema="+badSchema), "sparse_intt"},
		{"no such topic", []string{"--servers=" + addr, "--topic=nope", "--input=" + good, "--log_level=error"}, `--topic "nope": no such topic`},
		{"corrupt file", append(base, "--input="+corrupt), "corrupt.tfrecord"},
		{"bad row", append(base, "--input="+badRow, "--format=csv", "--schema="+schema), "bad.csv:3"},
		{"missing column", append(base, "--input="+noColumn, "--format=csv", "--schema="+schema), "user_id"},
		{"loop over nothing", append(base, "--input="+empty, "--loop"), "--loop: the input holds no records"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCmd(t, realClock{}, tc.args...)
			if r.code != 2 {
				t.Fatalf("exit %d, want 2; stdout %q stderr %q", r.code, r.stdout, r.stderr)
			}
			if strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "kafka_producer: ") || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr %q: want one line naming %q", r.stderr, tc.want)
			}
		})
	}
}

// TestUnreachable: brokers that do not answer are a failure at run time (exit 1), within
// --timeout.
func TestUnreachable(t *testing.T) {
	leakcheck.Check(t)
	dir := t.TempDir()
	good := writeTFRecord(t, filepath.Join(dir, "good.tfrecord"), dataset.NoCompression, records("g", 5))
	r := runCmd(t, realClock{}, "--servers="+freePort(t), "--topic="+topic, "--input="+good, "--timeout=1s", "--log_level=error")
	if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "metadata of topic") {
		t.Errorf("exit %d, stderr %q: want 1 and one line", r.code, r.stderr)
	}
}

// TestHelpVersion: --help lists the flags, --version prints the build; both exit 0.
func TestHelpVersion(t *testing.T) {
	r := runCmd(t, realClock{}, "--help")
	for _, flag := range []string{"--servers", "--topic", "--input", "--format", "--schema", "--example", "--compression",
		"--rate", "--duration", "--loop", "--partitions", "--timeout", "--progress_interval", "--log_format", "--version"} {
		if !strings.Contains(r.stdout, flag) {
			t.Errorf("--help lacks %s", flag)
		}
	}
	if r.code != 0 {
		t.Errorf("--help: exit %d", r.code)
	}
	if r := runCmd(t, realClock{}, "--version"); r.code != 0 || !strings.HasPrefix(r.stdout, "kafka_producer ") {
		t.Errorf("--version: exit %d, %q", r.code, r.stdout)
	}
}

// TestProgress: while producing, a progress line is logged every --progress_interval with the
// events acknowledged, the events/s, the bytes and the errors.
func TestProgress(t *testing.T) {
	leakcheck.Check(t)
	addr := broker(t)
	input := writeTFRecord(t, filepath.Join(t.TempDir(), "p.tfrecord"), dataset.NoCompression, records("p", 30))
	r := runCmd(t, realClock{}, "--servers="+addr, "--topic="+topic, "--input="+input, "--rate=100", "--progress_interval=50ms")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	n := 0
	for _, line := range strings.Split(r.stderr, "\n") {
		if !strings.Contains(line, "msg=progress") {
			continue
		}
		n++
		for _, field := range []string{" events=", " events_per_s=", " bytes=", " errors=0"} {
			if !strings.Contains(line, field) {
				t.Errorf("progress line %q lacks %q", line, field)
			}
		}
	}
	if n == 0 {
		t.Errorf("no progress line in 0.3 s at a 50 ms interval:\n%s", r.stderr)
	}
	consume(t, addr, 30)
}

// TestSignal: a --loop without --duration runs until its context ends (SIGINT, SIGTERM); then the
// messages handed to the client are delivered, the summary counts them and the exit status is 0.
func TestSignal(t *testing.T) {
	leakcheck.Check(t)
	addr := broker(t)
	input := writeTFRecord(t, filepath.Join(t.TempDir(), "s.tfrecord"), dataset.NoCompression, records("s", 10))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type done struct {
		code   int
		stdout string
	}
	ch := make(chan done, 1)
	go func() {
		var out, errb bytes.Buffer
		code := runClock(ctx, []string{"--servers=" + addr, "--topic=" + topic, "--input=" + input, "--loop", "--rate=500", "--log_level=error"}, &out, &errb, realClock{})
		ch <- done{code, out.String() + errb.String()}
	}()
	consumeAtLeast(t, addr, 25, false) // the stream is flowing
	cancel()
	var d done
	select {
	case d = <-ch:
	case <-time.After(30 * time.Second):
		t.Fatal("the producer did not stop after its context ended")
	}
	if d.code != 0 {
		t.Fatalf("exit %d: %s", d.code, d.stdout)
	}
	var acked int
	if _, err := fmt.Sscanf(d.stdout[strings.Index(d.stdout, "events        "):], "events        %d acknowledged", &acked); err != nil || acked < 25 {
		t.Fatalf("summary %q: %d acknowledged (%v)", d.stdout, acked, err)
	}
	var want [][]byte
	recs := records("s", 10)
	for i := range acked {
		want = append(want, recs[i%10])
	}
	checkMessages(t, consume(t, addr, acked), want, time.Time{}, time.Now())
}

// TestUndelivered: a message the brokers refuse (larger than their limit) is counted an error,
// the others are delivered, and the exit status is 1 after the summary.
func TestUndelivered(t *testing.T) {
	leakcheck.Check(t)
	addr := broker(t)
	recs := records("u", 4)
	recs = slices.Insert(recs, 2, bytes.Repeat([]byte("z"), 3<<20))
	input := writeTFRecord(t, filepath.Join(t.TempDir(), "u.tfrecord"), dataset.NoCompression, recs)
	r := runCmd(t, realClock{}, "--servers="+addr, "--topic="+topic, "--input="+input, "--log_level=error")
	if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "1 of 5 messages not delivered") {
		t.Fatalf("exit %d, stderr %q: want 1 and one line", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "events        4 acknowledged") || !strings.Contains(r.stdout, "errors        1") {
		t.Errorf("summary:\n%s", r.stdout)
	}
	checkMessages(t, consume(t, addr, 4), slices.Delete(recs, 2, 3), time.Time{}, time.Now())
}
