package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/prototext"

	examplepb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/example"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/internal/syncbuf"
	"github.com/monolith-go/monolith/pkg/export"
	"github.com/monolith-go/monolith/pkg/modelserver/exporttest"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
	"github.com/monolith-go/monolith/pkg/trainer/synth"
)

// TestMain runs the command itself when asked to (TestSIGTERM starts this binary as cmd/predict).
func TestMain(m *testing.M) {
	if os.Getenv("PREDICT_TEST_RUN_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func parseScores(t *testing.T, out string) []float64 {
	t.Helper()
	var s []float64
	for _, line := range strings.Fields(out) {
		v, err := strconv.ParseFloat(line, 64)
		if err != nil {
			t.Fatalf("score line %q: %v", line, err)
		}
		s = append(s, v)
	}
	return s
}

// TestScoresAreTheTrainers: the export of a model trained on parameter servers scores a random
// batch of its features, and the same batch read back from --write_input, as the trainer's model
// does (within 1e-6), also with 3 PS sub-graphs re-sharding the trainer's 2 servers' ids.
// readBatch reads the batch that --write_input wrote to path, as the model's input.
func readBatch(t *testing.T, path string, schema batch.Schema) *batch.Batch {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	eb := &examplepb.ExampleBatch{}
	if err := prototext.Unmarshal(data, eb); err != nil {
		t.Fatal(err)
	}
	b, err := toBatch(context.Background(), schema, eb)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestScoresAreTheTrainers(t *testing.T) {
	leakcheck.Check(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	job := exporttest.NewJob(t, 2, []int{16, 8})
	job.Train(ctx, 30)
	for _, numPS := range []int{2, 3} {
		base := filepath.Join(t.TempDir(), "ctr")
		job.Export(ctx, base, numPS)
		in := filepath.Join(t.TempDir(), "batch.pbtxt")
		code, out, stderr := runCmd(t, "--export_base="+base, "--random=40", "--seed=3", "--write_input="+in)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		got := parseScores(t, out)
		b := readBatch(t, in, job.Spec.Schema())
		want, err := job.Model.Predict(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 40 || len(want) != 40 {
			t.Fatalf("%d scores, the trainer %d; want 40", len(got), len(want))
		}
		for i := range want {
			if math.Abs(got[i]-want[i]) > 1e-6 {
				t.Errorf("%d PS: example %d: %.9f, the trainer %.9f", numPS, i, got[i], want[i])
			}
		}
		// The written batch, scored again from the file.
		code, again, stderr := runCmd(t, "--export_base="+base, "--input_file="+in)
		if code != 0 || again != out {
			t.Errorf("--input_file of the written batch: exit %d, scores differ: %v\n%s", code, again != out, stderr)
		}
	}
}

// TestTrainingPSScores: with --training_ps the scores are the export's dense part over the
// training parameter servers' current tables (what a served model in sync with the trainer
// answers), not the export's tables, once training has gone on since the export; the lookups
// leave the tables as they were; an unreachable server is a run-time failure.
func TestTrainingPSScores(t *testing.T) {
	leakcheck.Check(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	job := exporttest.NewJob(t, 2, []int{8})
	job.Train(ctx, 20)
	base := filepath.Join(t.TempDir(), "ctr")
	res := job.Export(ctx, base, 2)
	// The job's servers on listeners of the test's own, as cmd/ps serves them.
	var addrs []string
	for _, s := range job.PS {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		g := s.NewGRPCServer()
		go g.Serve(lis)
		t.Cleanup(g.Stop)
		addrs = append(addrs, lis.Addr().String())
	}
	job.Train(ctx, 20) // the trainer moves on from the export

	in := filepath.Join(t.TempDir(), "batch.pbtxt")
	code, exported, stderr := runCmd(t, "--export_base="+base, "--random=40", "--seed=5", "--write_input="+in)
	if code != 0 {
		t.Fatalf("export's tables: exit %d: %s", code, stderr)
	}
	b := readBatch(t, in, job.Spec.Schema())
	entry, err := export.LoadEntry(res.Dirs[export.EntrySubGraph])
	if err != nil {
		t.Fatal(err)
	}
	ref, err := entry.NewModel(job.Store())
	if err != nil {
		t.Fatal(err)
	}
	want, err := ref.Predict(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	tables := func() []float32 {
		var out []float32
		for s := 1; s <= exporttest.ClickLog.NumSlots; s++ {
			var ids []int64
			for id := uint64(1); id <= uint64(exporttest.ClickLog.Vocab); id++ {
				ids = append(ids, int64(synth.FID(s, id)))
			}
			out = append(out, job.Lookup(ctx, synth.SlotFeature(s), ids)...)
		}
		return out
	}
	before := tables()
	for _, flags := range [][]string{{"--training_ps=" + strings.Join(addrs, ",")}, {"--training_ps", addrs[0] + ", " + addrs[1], "--training_ps_timeout=5s"}} {
		code, out, stderr := runCmd(t, append([]string{"--export_base=" + base, "--input_file=" + in}, flags...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", flags, code, stderr)
		}
		got := parseScores(t, out)
		if len(got) != len(want) {
			t.Fatalf("%v: %d scores, want %d", flags, len(got), len(want))
		}
		for i := range want {
			if math.Abs(got[i]-want[i]) > 1e-6 {
				t.Errorf("%v: example %d: %.9f, the export's dense part over the trainer's tables %.9f", flags, i, got[i], want[i])
			}
		}
	}
	after := tables()
	for i := range before {
		if math.Float32bits(before[i]) != math.Float32bits(after[i]) {
			t.Fatalf("the lookups changed the training tables (value %d: %v, then %v)", i, before[i], after[i])
		}
	}
	// The training since the export moved the scores: the check above shows something.
	diff := 0.0
	for i, s := range parseScores(t, exported) {
		diff += math.Abs(s - want[i])
	}
	if diff/float64(len(want)) < 1e-4 {
		t.Errorf("the export's scores are %g from the trainer's on average: the training after the export changed nothing", diff/float64(len(want)))
	}

	// A server that does not answer: a run-time failure (exit 1), within the call's deadline.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := lis.Addr().String()
	lis.Close()
	code, out, stderr := runCmd(t, "--export_base="+base, "--input_file="+in, "--training_ps="+addrs[0]+","+gone, "--training_ps_timeout=5s")
	if code != 1 || out != "" || !strings.Contains(stderr, gone) {
		t.Errorf("an unreachable training PS: exit %d, stdout %q, stderr %q; want 1 naming %s", code, out, stderr, gone)
	}
}

func TestBadInput(t *testing.T) {
	leakcheck.Check(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	job := exporttest.NewJob(t, 1, []int{4})
	job.Train(ctx, 2)
	base := filepath.Join(t.TempDir(), "ctr")
	res := job.Export(ctx, base, 1)
	dir := t.TempDir()
	noDense := filepath.Join(dir, "nodense.pbtxt")
	eb := &examplepb.ExampleBatch{BatchSize: 1, NamedFeatureList: []*examplepb.NamedFeatureList{{Name: "slot_1",
		Feature: []*examplepb.Feature{{Type: &examplepb.Feature_FidV2List{FidV2List: &examplepb.FidList{Value: []uint64{1<<48 | 1}}}}}}}}
	if err := os.WriteFile(noDense, []byte(prototext.Format(eb)), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no export_base", []string{"--random=1"}, "--export_base is required"},
		{"no examples", []string{"--export_base=" + base}, "--input_file (an ExampleBatch) or --random=N"},
		{"both", []string{"--export_base=" + base, "--random=1", "--input_file=" + noDense}, "give one"},
		{"missing export", []string{"--export_base=" + filepath.Join(dir, "none"), "--random=1"}, "no export there"},
		{"missing version", []string{"--export_base=" + base, "--export_version=" + strconv.FormatInt(res.Version+1, 10), "--random=1"}, "does not exist"},
		{"missing input file", []string{"--export_base=" + base, "--input_file=" + filepath.Join(dir, "none.pbtxt")}, "--input_file"},
		{"no dense feature", []string{"--export_base=" + base, "--input_file=" + noDense}, `example 0: batch: example has no float_list feature "dense"`},
		{"bad flag", []string{"--bogus"}, "unknown flag"},
		{"random past the maximum", []string{"--export_base=" + base, "--random=100000000"}, "--random 100000000: at most 102400 examples (MaxRandom"},
		{"training_ps not host:port", []string{"--export_base=" + base, "--random=1", "--training_ps=127.0.0.1"}, `--training_ps: "127.0.0.1" is not host:port`},
		{"training_ps_timeout", []string{"--export_base=" + base, "--random=1", "--training_ps=127.0.0.1:1", "--training_ps_timeout=0s"}, "--training_ps_timeout 0s is not positive"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, stderr := runCmd(t, tc.args...)
			if code != 2 || out != "" || !strings.Contains(stderr, tc.want) || strings.Count("\n"+stderr, "\npredict: ") != 1 {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2 and one 'predict: ' line with %q", code, out, stderr, tc.want)
			}
		})
	}
}

// TestSIGTERM runs the command as a process of its own on the largest random batch and stops it
// with SIGTERM once the export is loaded: it exits within 1 s (exit 1, one line saying it was
// stopped, no scores), not once the batch is generated, written and scored.
func TestSIGTERM(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	job := exporttest.NewJob(t, 1, []int{16, 8})
	job.Train(ctx, 2)
	base := filepath.Join(t.TempDir(), "ctr")
	job.Export(ctx, base, 1)
	cmd := exec.Command(os.Args[0], "--export_base="+base, "--random="+strconv.Itoa(MaxRandom), "--write_input="+filepath.Join(t.TempDir(), "batch.pbtxt"))
	cmd.Env = append(os.Environ(), "PREDICT_TEST_RUN_MAIN=1")
	var stdout syncbuf.Buffer
	cmd.Stdout = &stdout
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var stderr strings.Builder
	lines := bufio.NewScanner(errPipe)
	for lines.Scan() {
		stderr.WriteString(lines.Text() + "\n")
		if strings.Contains(lines.Text(), "export loaded") {
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	rest, _ := io.ReadAll(errPipe)
	stderr.Write(rest)
	err = cmd.Wait()
	took := time.Since(start)
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Errorf("exit %d (%v), want 1; stderr:\n%s", code, err, stderr.String())
	}
	if took > time.Second {
		t.Errorf("the command exited %v after SIGTERM, want under 1 s", took)
	}
	last := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if want := "predict: stopped before scoring: terminated signal received"; last[len(last)-1] != want {
		t.Errorf("stderr's last line %q, want %q", last[len(last)-1], want)
	}
	if stdout.String() != "" {
		t.Errorf("stdout %d bytes, want none", len(stdout.String()))
	}
}
