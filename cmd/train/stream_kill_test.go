package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	hashtablepb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table"
	tfexamplepb "github.com/monolith-go/monolith/gen/pb/tensorflow/core/example"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/dataset/kafka"
	"github.com/monolith-go/monolith/pkg/dataset/kafka/embedded"
	"github.com/monolith-go/monolith/pkg/embedding"
	"github.com/monolith-go/monolith/pkg/featureschema"
	"github.com/monolith-go/monolith/pkg/fileops"
	"github.com/monolith-go/monolith/pkg/ps"
	"github.com/monolith-go/monolith/pkg/runner/checkpoint"
	"github.com/monolith-go/monolith/pkg/trainer/job/jobtest"
)

// The record ids of TestStreamKillResumesExactly: every record carries its own id, a string
// hashed into a slot of its own, so that the record_id table holds one entry per record trained.
const (
	recordIDTable = "record_id"
	recordIDSlot  = 4
	// killSchema is ratingsSchema with the record's id.
	killSchema = ratingsSchema + "  - {name: record_id, kind: sparse_string, slot: 4, source: record_id}\n"
	// killPartitions and killPS: the topic's partitions, the trainer's in-process parameter
	// servers.
	killPartitions = 2
	killPS         = 2
)

func recordName(id int) string { return "record-" + strconv.Itoa(id) }

// recordFid is the table id of record id's record_id entry (the decoder hashes the bytes_list
// value, a fid keeps its low 48 bits in the slot; collisionless tables key entries by fid).
func recordFid(id int) int64 {
	return int64(featureschema.FID(recordIDSlot, int64(featureschema.HashBytes([]byte(recordName(id)))&featureschema.IDMask)))
}

// placed is a produced record: its id and where the broker put it.
type placed struct {
	id        int
	partition int32
	offset    int64
}

func (p placed) String() string {
	return fmt.Sprintf("id %d (partition %d offset %d)", p.id, p.partition, p.offset)
}

// idProducer produces ratings with consecutive record ids, each id to partition id %
// killPartitions (or all to partition only, when it is not negative), and remembers where each
// one went.
type idProducer struct {
	t      *testing.T
	cl     *kgo.Client
	topic  string
	only   int32
	next   int
	placed []placed
	byFid  map[int64]placed
}

func (p *idProducer) produce(n int) {
	t := p.t
	t.Helper()
	if n <= 0 {
		return
	}
	ids := map[*kgo.Record]int{}
	var recs []*kgo.Record
	for i, r := range ratings(n, int64(p.next)+1) {
		id := p.next + i
		f := r.tfRecord()
		f[recordIDTable] = tfBytes(recordName(id))
		data, err := proto.Marshal(&tfexamplepb.Example{Features: &tfexamplepb.Features{Feature: f}})
		if err != nil {
			t.Fatal(err)
		}
		part := int32(id % killPartitions)
		if p.only >= 0 {
			part = p.only
		}
		rec := &kgo.Record{Topic: p.topic, Partition: part, Value: data}
		ids[rec] = id
		recs = append(recs, rec)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res := p.cl.ProduceSync(ctx, recs...)
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		pl := placed{id: ids[r.Record], partition: r.Record.Partition, offset: r.Record.Offset}
		fid := recordFid(pl.id)
		if other, ok := p.byFid[fid]; ok {
			t.Fatalf("%v and %v have the same fid %#x", other, pl, fid)
		}
		p.byFid[fid] = pl
		p.placed = append(p.placed, pl)
	}
	p.next += n
}

// below are the records before offsets (per partition): those a checkpoint with these offsets has
// trained on.
func (p *idProducer) below(offs kafka.Offsets) map[int64]placed {
	out := map[int64]placed{}
	for fid, pl := range p.byFid {
		if next, ok := offs.Get(p.topic, pl.partition); ok && pl.offset < next {
			out[fid] = pl
		}
	}
	return out
}

// ends are the next offsets of the partitions (all records produced).
func (p *idProducer) ends() kafka.Offsets {
	out := kafka.Offsets{}
	for _, pl := range p.placed {
		if n, _ := out.Get(p.topic, pl.partition); pl.offset+1 > n {
			out.Set(p.topic, pl.partition, pl.offset+1)
		}
	}
	return out
}

// killedCheckpoint is what a killed run left: its newest checkpoint, copied aside.
type killedCheckpoint struct {
	step     int64
	prefix   string // of the copy
	examples int64
	offsets  kafka.Offsets
	entries  map[int64]*hashtablepb.EntryDump
	// trainedTo is the last step the killed run logged (past step: trained again after the
	// restore).
	trainedTo int64
}

var progressStep = regexp.MustCompile(`msg="training progress" step=(\d+)`)

// loggedStep is the last step a run's log reports (0: none yet).
func loggedStep(stderr string) int64 {
	var step int64
	for _, m := range progressStep.FindAllStringSubmatch(stderr, -1) {
		step, _ = strconv.ParseInt(m[1], 10, 64)
	}
	return step
}

var restoredLine = regexp.MustCompile(`msg="restored checkpoint" .*global_step=(\d+)`)

// checkRestored checks that a run's log says it restored the checkpoint of step.
func checkRestored(t *testing.T, name, stderr string, step int64) {
	t.Helper()
	m := restoredLine.FindStringSubmatch(stderr)
	if m == nil || m[1] != strconv.FormatInt(step, 10) {
		t.Errorf("%s restored %v, want the checkpoint of step %d; stderr:\n%s", name, m, step, stderr)
	}
}

// latestCheckpoint is the model dir's newest checkpoint (ok false: none yet).
func latestCheckpoint(t *testing.T, dir string) (prefix string, step int64, ok bool) {
	t.Helper()
	st, err := checkpoint.ReadState(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if st == nil {
		return "", 0, false
	}
	step, err = checkpoint.StepOf(st.ModelCheckpointPath)
	if err != nil {
		t.Fatal(err)
	}
	return st.ModelCheckpointPath, step, true
}

// readPosition reads a checkpoint's <prefix>.input.json.
func readPosition(t *testing.T, prefix string) (int64, kafka.Offsets) {
	t.Helper()
	data, err := os.ReadFile(prefix + ".input.json")
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Examples int64           `json:"examples"`
		Source   json.RawMessage `json:"source"`
	}
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatalf("%s.input.json %s: %v", prefix, data, err)
	}
	var offs kafka.Offsets
	if err := json.Unmarshal(p.Source, &offs); err != nil {
		t.Fatalf("%s.input.json %s: source: %v", prefix, data, err)
	}
	return p.Examples, offs
}

// readTable reads every server's dump of table in a checkpoint: id -> entry.
func readTable(t *testing.T, prefix, table string) map[int64]*hashtablepb.EntryDump {
	t.Helper()
	out := map[int64]*hashtablepb.EntryDump{}
	for i := range killPS {
		files, err := embedding.ShardedFiles(ps.DumpBasename(prefix+".embeddings", table, i, killPS))
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range files {
			f, err := os.Open(file)
			if err != nil {
				t.Fatal(err)
			}
			ds, err := fileops.ReadEntryDumps(f)
			f.Close()
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			for _, d := range ds {
				if _, dup := out[d.GetId()]; dup {
					t.Fatalf("%s: entry %#x dumped twice", file, d.GetId())
				}
				out[d.GetId()] = d
			}
		}
	}
	return out
}

// describeFids names at most 20 fids' records (or the fid, for one that is no record's).
func describeFids(p *idProducer, fids []int64) string {
	slices.Sort(fids)
	var words []string
	for i, fid := range fids {
		if i == 20 {
			words = append(words, fmt.Sprintf("... %d more", len(fids)-20))
			break
		}
		if pl, ok := p.byFid[fid]; ok {
			words = append(words, pl.String())
		} else {
			words = append(words, fmt.Sprintf("fid %#x (no record's)", fid))
		}
	}
	return strings.Join(words, ", ")
}

// checkExactly fails unless table's entries are exactly want's records.
func checkExactly(t *testing.T, p *idProducer, what string, table map[int64]*hashtablepb.EntryDump, want map[int64]placed) {
	t.Helper()
	var missing, extra []int64
	for fid := range want {
		if _, ok := table[fid]; !ok {
			missing = append(missing, fid)
		}
	}
	for fid := range table {
		if _, ok := want[fid]; !ok {
			extra = append(extra, fid)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%s: %d of the %d records it should cover have no %s entry (not trained): %s", what, len(missing), len(want), recordIDTable, describeFids(p, missing))
	}
	if len(extra) > 0 {
		t.Errorf("%s: %d %s entries of records it should not cover: %s", what, len(extra), recordIDTable, describeFids(p, extra))
	}
}

// TestStreamKillResumesExactly: online training (cmd/train on a Kafka topic, a real process)
// killed with SIGKILL resumes exactly where its newest checkpoint left off, counted by record:
// every record carries a unique id (its own entry of the record_id table, created when the record
// is trained, changed only when it is trained again). The checkpoint a run is killed after holds
// an entry for exactly the records below the offsets its .input.json records, and each of those
// entries is bit for bit the same in the final checkpoint (none of those records trained again);
// the restarted run trains every record after them (those the killed run trained past its
// checkpoint again, and those produced since), so that the final checkpoint has an entry for every
// record produced and counts each one once, with every partition's offset at its end (also a
// partition the last run read nothing of: a checkpoint without its offset would have the next run
// read it again from the group's committed offset, or from its start).
//
// The broker runs in the test process (a kill -9 of the trainer must not take it down). The
// trainer runs with --kafka_stream_timeout=-1 until it is killed (the test keeps producing so that
// it trains on, and kills it once a checkpoint of this run is there and a later step logged), and
// the last run with a short timeout, so that it ends once the topic is drained.
func TestStreamKillResumesExactly(t *testing.T) {
	cases := []struct {
		name string
		// kills is how many runs are killed before the one that drains the topic; whileDown
		// is how many records are produced while the trainer is down after each kill.
		kills, whileDown int
		// quiet, when not negative, is a partition that gets no record after the first kill;
		// the last kill waits until its checkpoint covers all of it, so that the last run
		// reads none of it (its checkpoints must still hold its offset).
		quiet int32
	}{
		{name: "killed once and records produced while down", kills: 1, whileDown: 1000, quiet: -1},
		{name: "killed twice and a partition quiet after the first kill", kills: 2, quiet: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			streamKill(t, tc.kills, tc.whileDown, tc.quiet)
		})
	}
}

func streamKill(t *testing.T, kills, whileDown int, quiet int32) {
	leakcheck.Check(t)
	const (
		topic = "ratings"
		// live is how many records at most are produced while the killed runs train (in
		// chunks, so that each run has records to train on when it is killed).
		live, chunk = 6000, 100
		// sessionMs: the killed run's group membership ends this long after its last
		// heartbeat, then the restarted run gets its partitions.
		sessionMs = 3000
	)
	ctx := context.Background()
	b, err := embedded.Start(ctx, embedded.Options{Topics: []string{topic}, Partitions: killPartitions})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	p := &idProducer{t: t, cl: cl, topic: topic, only: -1, byFid: map[int64]placed{}}

	dir := t.TempDir()
	modelDir := filepath.Join(dir, "m")
	schema := writeFile(t, filepath.Join(dir, "schema.yaml"), killSchema)
	// The evaluation records' ids are no produced record's (an evaluation only looks them up).
	eval := tfRatings(t, filepath.Join(dir, "eval.tfrecord"), 200, 99, func(i int, f map[string]*tfexamplepb.Feature) {
		f[recordIDTable] = tfBytes("eval-" + strconv.Itoa(i))
	})
	args := func(timeoutMs int) []string {
		return []string{"--schema=" + schema, "--input_format=tf_example", "--kafka_servers=" + b.Addr(), "--kafka_topics=" + topic,
			"--kafka_group_id=kill", "--kafka_stream_timeout=" + strconv.Itoa(timeoutMs),
			fmt.Sprintf("--kafka_configuration=session.timeout.ms=%d,heartbeat.interval.ms=250", sessionMs),
			"--holdout_every=0", "--eval_data=" + eval, "--batch_size=100", "--embedding_dim=4", "--hidden=8",
			"--stream_linger=50ms", "--save_checkpoints_steps=5", "--checkpoints_max_to_keep=1000", "--log_step_count_steps=1",
			"--local_ps=" + strconv.Itoa(killPS), "--status_addr=", "--model_dir=" + modelDir}
	}

	start := time.Now()
	var killed []killedCheckpoint
	committedAny := false // some killed run had committed a checkpoint's offsets
	restoredStep := int64(0)
	for k := range kills {
		name := fmt.Sprintf("run %d", k+1)
		proc := startProc(t, name, os.Args[0], []string{runAsTrain + "=1"}, args(-1)...)
		deadline := time.Now().Add(90 * time.Second)
		for {
			// Killed once a checkpoint of this run is there and a later step has trained; the
			// first run once its checkpoint covers records of every partition, the last one
			// once it covers the quiet partition to its end.
			if prefix, step, ok := latestCheckpoint(t, modelDir); ok && step > restoredStep && loggedStep(proc.stderr.String()) > step {
				_, offs := readPosition(t, prefix)
				quietEnd, _ := p.ends().Get(topic, quiet)
				quietAt, _ := offs.Get(topic, quiet)
				if (k > 0 || len(offs[topic]) == killPartitions) && (k < kills-1 || quiet < 0 || quietAt == quietEnd) {
					break
				}
			}
			select {
			case <-proc.done:
				t.Fatalf("%s exited (status %d) before it was killed; stdout:\n%s\nstderr:\n%s", name, proc.cmd.ProcessState.ExitCode(), proc.stdout.String(), proc.tail())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no checkpoint after step %d and a step past it within 90 s (%d records produced); stdout:\n%s\nstderr:\n%s",
					name, restoredStep, len(p.placed), proc.stdout.String(), proc.tail())
			}
			if len(p.placed) < live {
				p.produce(chunk)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err := proc.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-proc.done
		if ws, ok := proc.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("%s: %v, want killed by SIGKILL", name, proc.cmd.ProcessState)
		}
		prefix, step, _ := latestCheckpoint(t, modelDir)
		if k > 0 {
			checkRestored(t, name, proc.stderr.String(), killed[k-1].step)
		}
		// The checkpoint as the kill left it (the next run writes more).
		snap := filepath.Join(dir, fmt.Sprintf("killed-%d", k+1))
		jobtest.CopyCheckpoint(t, modelDir, snap, step)
		kc := killedCheckpoint{step: step, prefix: filepath.Join(snap, filepath.Base(prefix)), trainedTo: loggedStep(proc.stderr.String())}
		kc.examples, kc.offsets = readPosition(t, kc.prefix)
		kc.entries = readTable(t, kc.prefix, recordIDTable)
		t.Logf("%s killed at step %d (logged) after %v: its checkpoint of step %d covers %d examples, offsets %v; %d records produced",
			name, kc.trainedTo, time.Since(start).Round(time.Millisecond), step, kc.examples, kc.offsets, len(p.placed))
		if checkCommitted(t, name, committedOffsets(t, b.Addr(), "kill", topic), modelDir, kc.offsets[topic]) {
			committedAny = true
		}
		killed = append(killed, kc)
		restoredStep = step
		if quiet >= 0 {
			p.only = (quiet + 1) % killPartitions
		}
		p.produce(whileDown)
	}
	if !committedAny {
		t.Errorf("no killed run had committed its checkpoints' offsets to the group")
	}
	// The rest of the live records, then the run that drains the topic: it ends once no message
	// came for its --kafka_stream_timeout (counted from its start, so longer than the killed
	// run's membership of the group lasts; the reader waits its poll timeout, 10 s, at least).
	p.produce(live - len(p.placed))
	last := startProc(t, "the last run", os.Args[0], []string{runAsTrain + "=1"}, args(sessionMs+3000)...)
	if code := last.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("the last run: exit status %d; stdout:\n%s\nstderr:\n%s", code, last.stdout.String(), last.tail())
	}
	t.Logf("the last run ended after %v", time.Since(start).Round(time.Millisecond))
	restored := killed[len(killed)-1]
	checkRestored(t, "the last run", last.stderr.String(), restored.step)
	finalPrefix, finalStep, ok := latestCheckpoint(t, modelDir)
	if !ok || finalStep <= restored.step {
		t.Fatalf("the last run's checkpoint: %s (step %d), want one after step %d", finalPrefix, finalStep, restored.step)
	}
	finalExamples, finalOffsets := readPosition(t, finalPrefix)
	final := readTable(t, finalPrefix, recordIDTable)

	// (a) Every record produced is trained: exactly they have entries (an evaluation's lookups
	// create none), and the final position counts each once.
	all := p.below(p.ends())
	if len(all) != len(p.placed) {
		t.Fatalf("%d records below the partitions' ends, %d produced", len(all), len(p.placed))
	}
	checkExactly(t, p, fmt.Sprintf("the final checkpoint (step %d)", finalStep), final, all)
	if finalExamples != int64(len(p.placed)) {
		t.Errorf("the final checkpoint counts %d examples trained, want the %d produced", finalExamples, len(p.placed))
	}
	for part := int32(0); part < killPartitions; part++ {
		got, _ := finalOffsets.Get(topic, part)
		want, _ := p.ends().Get(topic, part)
		if got != want {
			t.Errorf("the final checkpoint's offset of partition %d is %d, want its end %d (offsets %v)", part, got, want, finalOffsets)
		}
	}
	for _, kc := range killed {
		what := fmt.Sprintf("the checkpoint of step %d (killed at step %d, offsets %v)", kc.step, kc.trainedTo, kc.offsets)
		// (b) A killed run's checkpoint covers exactly the records below its offsets.
		covered := p.below(kc.offsets)
		checkExactly(t, p, what, kc.entries, covered)
		if kc.examples != int64(len(covered)) {
			t.Errorf("%s counts %d examples, its offsets cover %d records", what, kc.examples, len(covered))
		}
		// (c) None of them was trained again: their entries are the same, bit for bit, in the
		// final checkpoint.
		var changed []int64
		for fid, e := range kc.entries {
			if f, ok := final[fid]; ok && !proto.Equal(e, f) {
				changed = append(changed, fid)
			}
		}
		if len(changed) > 0 {
			t.Errorf("%s: %d entries changed by the later runs (records trained again): %s", what, len(changed), describeFids(p, changed))
		}
	}
	// (d) The records after the restored offsets (trained again, or produced since) were trained
	// by the last run.
	before := p.below(restored.offsets)
	var untrained []int64
	for fid := range all {
		if _, ok := before[fid]; !ok {
			if _, ok := final[fid]; !ok {
				untrained = append(untrained, fid)
			}
		}
	}
	if len(untrained) > 0 {
		t.Errorf("the last run did not train %d of the %d records after the restored offsets %v: %s", len(untrained), len(all)-len(before), restored.offsets, describeFids(p, untrained))
	}
	t.Logf("the last run: step %d -> %d, %d records after the restored offsets trained (%d produced in all, %d before the restored offsets)",
		restored.step, finalStep, len(all)-len(before), len(p.placed), len(before))
}

// checkCommitted: the offsets the killed run committed to the group are those of one of its
// checkpoints (never a position no checkpoint holds, which a restore could not bring back), and
// not ahead of the newest one's (-1: none committed yet). It reports whether any was committed.
func checkCommitted(t *testing.T, name string, committed map[int32]int64, modelDir string, newest map[int32]int64) bool {
	t.Helper()
	none := true
	for part, off := range committed {
		if off >= 0 {
			none = false
		}
		if off > newest[part] {
			t.Errorf("%s: committed offset %d of partition %d is ahead of the newest checkpoint's %d", name, off, part, newest[part])
		}
	}
	if none {
		return false
	}
	files, err := filepath.Glob(filepath.Join(modelDir, "model.ckpt-*.input.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		_, offs := readPosition(t, strings.TrimSuffix(f, ".input.json"))
		if fmt.Sprint(offs["ratings"]) == fmt.Sprint(committed) {
			return true
		}
	}
	t.Errorf("%s: committed offsets %v are no checkpoint's (%d checkpoints)", name, committed, len(files))
	return true
}
