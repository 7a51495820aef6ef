package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	tfexamplepb "github.com/monolith-go/monolith/gen/pb/tensorflow/core/example"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/dataset/kafka/embedded"
)

// msgKind is what a message of TestStreamFaults holds.
type msgKind int

const (
	validMsg   msgKind = iota // a rating as a tf.train.Example
	garbageMsg                // bytes that are no tf.train.Example
	nullMsg                   // no value at all (Value nil: a null value on the wire)
	emptyMsg                  // a value of zero bytes
)

// garbage is a message value that does not decode: its first tag has wire type 7, which
// protobuf does not have.
var garbage = []byte{0xff, 0xff, 0x01}

// faultMsg is a message to produce: what it holds and the partition it goes to.
type faultMsg struct {
	kind      msgKind
	partition int32
}

// faultStream is n messages, message i to partition i % parts, each a valid rating unless
// special says otherwise.
func faultStream(n int, parts int32, special map[int]msgKind) []faultMsg {
	out := make([]faultMsg, n)
	for i := range out {
		out[i] = faultMsg{kind: special[i], partition: int32(i) % parts}
	}
	return out
}

// faultPlaced is a produced message: what it holds and where the broker put it.
type faultPlaced struct {
	kind      msgKind
	partition int32
	offset    int64
}

// faultProducer produces messages to a topic (the partition each message names: a manual
// partitioner) and remembers where each one went, in the order given.
type faultProducer struct {
	t       *testing.T
	cl      *kgo.Client
	topic   string
	batches int64
	placed  []faultPlaced
}

func newFaultProducer(t *testing.T, addr, topic string) *faultProducer {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &faultProducer{t: t, cl: cl, topic: topic}
}

// produce writes msgs (the valid ones: ratings of a seed of their own) and returns where they
// went.
func (p *faultProducer) produce(msgs []faultMsg) []faultPlaced {
	t := p.t
	t.Helper()
	p.batches++
	rs := ratings(len(msgs), p.batches)
	recs := make([]*kgo.Record, len(msgs))
	for i, m := range msgs {
		var value []byte
		switch m.kind {
		case validMsg:
			data, err := proto.Marshal(&tfexamplepb.Example{Features: &tfexamplepb.Features{Feature: rs[i].tfRecord()}})
			if err != nil {
				t.Fatal(err)
			}
			value = data
		case garbageMsg:
			value = garbage
		case emptyMsg:
			value = []byte{}
		}
		recs[i] = &kgo.Record{Topic: p.topic, Partition: m.partition, Value: value}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res := p.cl.ProduceSync(ctx, recs...)
	if err := res.FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	// ProduceSync's results come by partition, not in the order given.
	index := make(map[*kgo.Record]int, len(recs))
	for i, r := range recs {
		index[r] = i
	}
	out := make([]faultPlaced, len(msgs))
	for _, r := range res {
		i := index[r.Record]
		out[i] = faultPlaced{kind: msgs[i].kind, partition: r.Record.Partition, offset: r.Record.Offset}
	}
	p.placed = append(p.placed, out...)
	return out
}

// count is the number of produced messages of kind.
func (p *faultProducer) count(kind msgKind) int {
	n := 0
	for _, pl := range p.placed {
		if pl.kind == kind {
			n++
		}
	}
	return n
}

// ends are the next offsets of the partitions written to.
func (p *faultProducer) ends() map[int32]int64 {
	out := map[int32]int64{}
	for _, pl := range p.placed {
		out[pl.partition] = max(out[pl.partition], pl.offset+1)
	}
	return out
}

var (
	statusURL    = regexp.MustCompile(`(?m)^  status       (http://127\.0\.0\.1:\d+) `)
	streamRecord = regexp.MustCompile(`(?m)^monolith_train_stream_records_total\{outcome="(\w+)"\} (\d+)$`)
)

// streamRecords scrapes a run's /metrics (the status line of its stdout) for the stream's
// records by outcome, polling until trained reach want or the run exits (ok false).
func streamRecords(t *testing.T, p *proc, want int64) (counts map[string]int64, ok bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return counts, false
		default:
		}
		if m := statusURL.FindStringSubmatch(p.stdout.String()); m != nil {
			if c, err := scrapeRecords(m[1]); err == nil {
				counts = c
				if c["trained"] >= want {
					return c, true
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return counts, false
}

func scrapeRecords(url string) (map[string]int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/metrics: %d, %v", url, resp.StatusCode, err)
	}
	out := map[string]int64{}
	for _, m := range streamRecord.FindAllStringSubmatch(string(body), -1) {
		out[m[1]], _ = strconv.ParseInt(m[2], 10, 64)
	}
	return out, nil
}

// TestStreamFaults: faults of online training (cmd/train on a Kafka topic, a real process,
// through the real client over TCP to a broker in the test) and what the trainer does with them.
//
//   - Messages that are no tf.train.Example, within --max_bad_records, are skipped and counted
//     (the stream's records{outcome="bad"} on /metrics): the run trains on every valid record and
//     its checkpoint's offsets are past the bad ones.
//   - One bad message more than --max_bad_records allows fails the run with exit status 2,
//     naming the topic, partition and offset of exactly that message.
//   - With --kafka_filter_empty, empty messages (a null value, a value of zero bytes) are skipped
//     and are no bad records; without it an empty message is a bad record (it has no label).
//   - The broker restarted mid-stream (on the same port, its data kept): the trainer reconnects
//     and trains on: the final checkpoint counts every record produced exactly once, and its
//     offsets are the partitions' ends.
//
// Each case has its own broker and model dir and runs in parallel with the others: a run that
// ends with the stream waits max(--kafka_stream_timeout, the 10 s poll timeout) after its last
// record.
func TestStreamFaults(t *testing.T) {
	leakcheck.Check(t)
	cases := []struct {
		name  string
		parts int32
		msgs  []faultMsg
		args  []string
		// timeoutMs is --kafka_stream_timeout (0: 1000; the stream ends 10 s after its last
		// message, the poll timeout, unless it is longer).
		timeoutMs int
		// restart: the broker restarts mid-stream (the messages produced half before, half
		// after).
		restart bool
		// code is the exit status; for 0, the run trains on every valid message and bad is how
		// many records it counted bad; for 2, failAt is the message (an index of msgs) its
		// error names, after skipped bad records before it.
		code    int
		bad     int64
		failAt  int
		skipped int
	}{
		{name: "malformed messages skipped", parts: 2,
			msgs: faultStream(400, 2, map[int]msgKind{7: garbageMsg, 150: garbageMsg, 333: garbageMsg}),
			args: []string{"--max_bad_records=3"}, code: 0, bad: 3},
		{name: "one bad record too many", parts: 2,
			msgs: faultStream(200, 2, map[int]msgKind{121: garbageMsg}),
			args: []string{"--max_bad_records=0"}, code: 2, failAt: 121},
		{name: "the bad record after max_bad_records skipped", parts: 1,
			msgs: faultStream(200, 1, map[int]msgKind{30: garbageMsg, 90: garbageMsg}),
			args: []string{"--max_bad_records=1"}, code: 2, failAt: 90, skipped: 1},
		{name: "empty messages filtered", parts: 2,
			msgs: faultStream(400, 2, map[int]msgKind{0: nullMsg, 5: emptyMsg, 6: nullMsg, 99: emptyMsg, 250: nullMsg}),
			args: []string{"--kafka_filter_empty", "--max_bad_records=0"}, code: 0, bad: 0},
		{name: "an empty message unfiltered is a bad record", parts: 2,
			msgs: faultStream(200, 2, map[int]msgKind{77: nullMsg}),
			args: []string{"--max_bad_records=0"}, code: 2, failAt: 77},
		{name: "empty messages unfiltered skipped as bad records", parts: 2,
			msgs: faultStream(400, 2, map[int]msgKind{10: nullMsg, 211: emptyMsg}),
			args: []string{"--max_bad_records=2"}, code: 0, bad: 2},
		{name: "broker restart mid-stream", parts: 2, restart: true,
			msgs: faultStream(1200, 2, nil),
			args: []string{"--save_checkpoints_steps=3"}, timeoutMs: 15000, code: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const topic = "faults"
			start := time.Now()
			ctx := context.Background()
			b, err := embedded.Start(ctx, embedded.Options{Topics: []string{topic}, Partitions: tc.parts})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Stop()
			p := newFaultProducer(t, b.Addr(), topic)
			dir := t.TempDir()
			modelDir := filepath.Join(dir, "m")
			schema := writeFile(t, filepath.Join(dir, "schema.yaml"), ratingsSchema)
			eval := tfRatings(t, filepath.Join(dir, "eval.tfrecord"), 200, 99, nil)
			timeoutMs := tc.timeoutMs
			if timeoutMs == 0 {
				timeoutMs = 1000
			}
			args := append([]string{"--schema=" + schema, "--input_format=tf_example", "--kafka_servers=" + b.Addr(), "--kafka_topics=" + topic,
				"--kafka_group_id=faults", "--kafka_stream_timeout=" + strconv.Itoa(timeoutMs), "--holdout_every=0", "--eval_data=" + eval,
				"--batch_size=50", "--embedding_dim=4", "--hidden=8", "--stream_linger=50ms", "--log_step_count_steps=1",
				"--checkpoints_max_to_keep=1000", "--model_dir=" + modelDir}, tc.args...)

			var placed []faultPlaced
			var run *proc
			if !tc.restart {
				placed = p.produce(tc.msgs)
				run = startProc(t, tc.name, os.Args[0], []string{runAsTrain + "=1"}, args...)
			} else {
				// The trainer waits for the stream (15 s without a message ends it); the first half is
				// produced, and the broker restarted once the run has trained some of it (a
				// checkpoint of step 3 or later: the chief has committed its offsets to the
				// group too).
				run = startProc(t, tc.name, os.Args[0], []string{runAsTrain + "=1"}, args...)
				half := len(tc.msgs) / 2
				placed = p.produce(tc.msgs[:half])
				deadline := time.Now().Add(2 * time.Minute)
				for {
					if _, step, ok := latestCheckpoint(t, modelDir); ok && step >= 3 {
						break
					}
					select {
					case <-run.done:
						t.Fatalf("the run exited (status %d) before the restart; stdout:\n%s\nstderr:\n%s", run.cmd.ProcessState.ExitCode(), run.stdout.String(), run.tail())
					default:
					}
					if time.Now().After(deadline) {
						t.Fatalf("no checkpoint of step 3 or later within 2 minutes; stdout:\n%s\nstderr:\n%s", run.stdout.String(), run.tail())
					}
					time.Sleep(20 * time.Millisecond)
				}
				at := loggedStep(run.stderr.String())
				rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				err := b.Restart(rctx)
				cancel()
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("broker restarted after step %d (%d of %d records produced)", at, half, len(tc.msgs))
				placed = append(placed, p.produce(tc.msgs[half:])...)
			}

			valid := int64(p.count(validMsg))
			var counts map[string]int64
			if tc.code == 0 {
				var ok bool
				if counts, ok = streamRecords(t, run, valid); !ok {
					t.Errorf("/metrics never showed %d records trained (last scraped %v)", valid, counts)
				}
			}
			code := run.wait(t, 4*time.Minute)
			stdout, stderr := run.stdout.String(), run.stderr.String()
			t.Logf("exit %d after %v; error lines %q", code, time.Since(start).Round(time.Millisecond), run.errorLines())
			if code != tc.code {
				t.Fatalf("exit status %d, want %d; stdout:\n%s\nstderr:\n%s", code, tc.code, stdout, run.tail())
			}

			if tc.code != 0 {
				// The error names exactly the message, and no other bad record.
				pl := placed[tc.failAt]
				where := fmt.Sprintf("topic %s partition %d offset %d", topic, pl.partition, pl.offset)
				errs := run.errorLines()
				wantAllows := fmt.Sprintf("(%d bad records skipped before it; ", tc.skipped)
				if len(errs) != 1 || !strings.Contains(errs[0], where+": ") || !strings.Contains(errs[0], wantAllows) {
					t.Errorf("error lines %q, want one naming %q after %d bad records skipped; stderr:\n%s", errs, where, tc.skipped, run.tail())
				}
				if n := strings.Count(stderr, "partition "); n != 1 {
					t.Errorf("stderr names %d partitions, want only the bad record's:\n%s", n, run.tail())
				}
				return
			}

			// Every valid record trained, once.
			m := streamStop.FindStringSubmatch(stdout)
			if m == nil {
				t.Fatalf("no stop line; stdout:\n%s\nstderr:\n%s", stdout, run.tail())
			}
			if got := m[2]; got != strconv.FormatInt(valid, 10) {
				t.Errorf("trained %s examples, want the %d valid records (%d messages); stdout:\n%s", got, valid, len(placed), stdout)
			}
			if counts != nil && (counts["trained"] != valid || counts["bad"] != tc.bad || counts["held_out"] != 0) {
				t.Errorf("/metrics records by outcome %v, want trained %d, bad %d, held_out 0", counts, valid, tc.bad)
			}
			// The final checkpoint: every valid record, the partitions read to their ends (the
			// skipped messages too).
			prefix, step, ok := latestCheckpoint(t, modelDir)
			if !ok {
				t.Fatalf("no checkpoint in %s", modelDir)
			}
			if s, _ := strconv.ParseInt(m[1], 10, 64); s != step {
				t.Errorf("the newest checkpoint is of step %d, the run stopped at step %s", step, m[1])
			}
			examples, offs := readPosition(t, prefix)
			if examples != valid {
				t.Errorf("the final checkpoint counts %d examples, want the %d valid records", examples, valid)
			}
			if got, want := offs[topic], p.ends(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("the final checkpoint's offsets %v, want the partitions' ends %v", got, want)
			}
			// The chief committed the final checkpoint's offsets to the group (after a restart:
			// the broker kept the group).
			if tc.parts == 2 {
				if got := committedOffsets(t, b.Addr(), "faults", topic); fmt.Sprint(got) != fmt.Sprint(offs[topic]) {
					t.Errorf("the group's committed offsets %v, the final checkpoint's %v", got, offs[topic])
				}
			}
			if tc.restart {
				var kafkaLines []string
				for _, l := range strings.Split(stderr, "\n") {
					if strings.Contains(l, `msg="kafka: `) {
						kafkaLines = append(kafkaLines, l)
					}
				}
				t.Logf("the run ended at step %d with %d examples; its client's log:\n%s", step, examples, strings.Join(kafkaLines, "\n"))
			}
		})
	}
}
