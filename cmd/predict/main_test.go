package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/prototext"

	examplepb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/example"
	servingconfig "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/config"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/internal/syncbuf"
	"github.com/monolith-go/monolith/pkg/export"
	"github.com/monolith-go/monolith/pkg/modelserver"
	"github.com/monolith-go/monolith/pkg/modelserver/entry"
	"github.com/monolith-go/monolith/pkg/modelserver/exporttest"
	"github.com/monolith-go/monolith/pkg/modelserver/psshard"
	"github.com/monolith-go/monolith/pkg/tlsconfig"
	"github.com/monolith-go/monolith/pkg/tlsconfig/tlstest"
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
		{"compare_target not host:port", []string{"--export_base=" + base, "--random=1", "--compare_target=localhost"}, `--compare_target: "localhost" is not host:port`},
		{"compare_target without a port", []string{"--export_base=" + base, "--random=1", "--compare_target=127.0.0.1:"}, `--compare_target: "127.0.0.1:" is not host:port`},
		{"tolerance negative", []string{"--export_base=" + base, "--random=1", "--compare_target=127.0.0.1:1", "--tolerance=-1e-6"}, "--tolerance -1e-06: not a number >= 0"},
		{"tolerance NaN", []string{"--export_base=" + base, "--random=1", "--compare_target=127.0.0.1:1", "--tolerance=NaN"}, "--tolerance NaN: not a number >= 0"},
		{"compare_timeout", []string{"--export_base=" + base, "--random=1", "--compare_target=127.0.0.1:1", "--compare_timeout=0s"}, "--compare_timeout 0s is not positive"},
		{"tls without compare_target", []string{"--export_base=" + base, "--random=1", "--tls_ca=" + noDense}, "are for --compare_target"},
		{"model_name without compare_target", []string{"--export_base=" + base, "--random=1", "--model_name=ctr"}, "are for --compare_target"},
		{"missing tls_ca", []string{"--export_base=" + base, "--random=1", "--compare_target=127.0.0.1:1", "--tls_ca=" + filepath.Join(dir, "none.pem")}, "--tls_ca"},
		{"tls_cert without tls_key", []string{"--export_base=" + base, "--random=1", "--compare_target=127.0.0.1:1", "--tls_cert=" + noDense}, "--tls_"},
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

// serveExport serves the export at base as model name (its entry and its numPS PS sub-graphs,
// the PS sub-graphs on a plaintext server of their own) on model servers of this test, the entry's
// with opts (TLS); it returns the entry server's address. Everything stops when the test ends.
func serveExport(t *testing.T, base, name string, numPS int, opts ...grpc.ServerOption) string {
	t.Helper()
	var psModels []*servingconfig.ModelConfig
	for i := range numPS {
		psModels = append(psModels, exporttest.ModelConfig(t, name+":"+export.PSSubGraph(i), filepath.Join(base, export.PSSubGraph(i))))
	}
	psServer := exporttest.StartModelServer(t, modelserver.Loaders{modelserver.KindPS: psshard.Load}, psModels...)
	replicas := entry.StaticReplicas{}
	for _, mc := range psModels {
		replicas[mc.GetName()] = []string{psServer.Addr()}
	}
	loader := entry.NewLoader(entry.Config{Replicas: replicas})
	t.Cleanup(loader.Close) // after the entry's server stopped (cleanups run last first)
	mc := exporttest.ModelConfig(t, name+":entry", filepath.Join(base, export.EntrySubGraph))
	s, err := modelserver.New(&servingconfig.ModelServerConfig{Config: &servingconfig.ModelServerConfig_ModelConfigList{
		ModelConfigList: &servingconfig.ModelConfigList{Config: []*servingconfig.ModelConfig{mc}}}},
		modelserver.Options{Manager: modelserver.ManagerOptions{Loaders: modelserver.Loaders{modelserver.KindEntry: loader.Load}}, ServerOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Stop(ctx)
	})
	exporttest.WaitAvailable(t, s.Manager(), mc.GetName())
	return s.Addr()
}

// summary parses the comparison's line (key=value fields), failing the test unless stdout is that
// one line.
func summary(t *testing.T, out string) map[string]string {
	t.Helper()
	if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
		t.Fatalf("stdout %q: want one line", out)
	}
	m := map[string]string{}
	for _, kv := range strings.Fields(out) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			t.Fatalf("field %q of %q is not key=value", kv, out)
		}
		m[k] = v
	}
	for _, k := range []string{"compared", "max_abs_diff", "worst_example", "served", "local", "tolerance", "within_tolerance", "model", "target"} {
		if _, ok := m[k]; !ok {
			t.Fatalf("%q has no %s", out, k)
		}
	}
	return m
}

// num is field key of a summary; served is a float32's.
func num(t *testing.T, m map[string]string, key string) float64 {
	t.Helper()
	bits := 64
	if key == "served" {
		bits = 32
	}
	v, err := strconv.ParseFloat(m[key], bits)
	if err != nil {
		t.Fatalf("%s=%q: %v", key, m[key], err)
	}
	return v
}

// TestCompareServed: --compare_target sends the examples to a model server of this test serving an
// export (its entry over its PS sub-graphs, over gRPC) and prints one line comparing the served
// scores with this process's. The served model of the same export compares equal within the
// default tolerance (exit 0), also over several Predicts of CompareBatch examples and with the
// model named; a served model of the export of a few more training steps does not (exit 1, the
// worst example named, the one where the two exports' scores differ most); a model the server
// does not serve is a run-time failure.
func TestCompareServed(t *testing.T) {
	leakcheck.Check(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	job := exporttest.NewJob(t, 2, []int{8})
	job.Train(ctx, 20)
	base := filepath.Join(t.TempDir(), "ctr")
	job.Export(ctx, base, 2)
	job.Train(ctx, 5)
	later := filepath.Join(t.TempDir(), "ctr") // the same model name, 5 steps on
	job.Export(ctx, later, 2)
	same, other := serveExport(t, base, "ctr", 2), serveExport(t, later, "ctr", 2)

	// The local scores of both exports, of the batch compared.
	in := filepath.Join(t.TempDir(), "batch.pbtxt")
	code, out, stderr := runCmd(t, "--export_base="+base, "--random=40", "--seed=9", "--write_input="+in)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	local := parseScores(t, out)
	code, out, stderr = runCmd(t, "--export_base="+later, "--input_file="+in)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	laterLocal := parseScores(t, out)
	maxDiff := 0.0
	for i := range local {
		maxDiff = max(maxDiff, math.Abs(local[i]-laterLocal[i]))
	}
	if maxDiff < 1e-4 {
		t.Fatalf("5 more training steps moved the scores by at most %g: the comparison below shows nothing", maxDiff)
	}

	tests := []struct {
		name     string
		target   string
		args     []string
		n        int
		code     int
		maxDiff  float64 // the most max_abs_diff may be
		minDiff  float64 // the least
		stderrIs string  // the 'predict: ' line on stderr has this (code 1)
	}{
		{"the same export", same, []string{"--input_file=" + in}, 40, 0, 1e-6, 0, ""},
		{"the same export, named", same, []string{"--input_file=" + in, "--model_name=ctr"}, 40, 0, 1e-6, 0, ""},
		{"several Predicts", same, []string{"--random=" + strconv.Itoa(2*CompareBatch+100), "--seed=4"}, 2*CompareBatch + 100, 0, 1e-6, 0, ""},
		{"another export", other, []string{"--input_file=" + in}, 40, 1, 1, maxDiff - 2e-6, "are not the export's: example "},
		{"another export, a tiny tolerance", other, []string{"--input_file=" + in, "--tolerance=1e-9"}, 40, 1, 1, maxDiff - 2e-6, "> --tolerance 1e-09"},
		{"another export, a large tolerance", other, []string{"--input_file=" + in, "--tolerance=0.5"}, 40, 0, 0.5, maxDiff - 2e-6, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--export_base=" + base, "--compare_target=" + tc.target, "--log_level=warn"}, tc.args...)
			code, out, stderr := runCmd(t, args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stdout %q, stderr %q", code, tc.code, out, stderr)
			}
			m := summary(t, out)
			if got := num(t, m, "compared"); int(got) != tc.n {
				t.Errorf("compared=%v, want %d", got, tc.n)
			}
			if m["model"] != "ctr:entry" || m["target"] != tc.target || m["within_tolerance"] != strconv.FormatBool(tc.code == 0) {
				t.Errorf("%q: want model=ctr:entry target=%s within_tolerance=%t", out, tc.target, tc.code == 0)
			}
			d, served, loc, w := num(t, m, "max_abs_diff"), num(t, m, "served"), num(t, m, "local"), int(num(t, m, "worst_example"))
			if d > tc.maxDiff || d < tc.minDiff {
				t.Errorf("max_abs_diff=%g, want it in [%g, %g]", d, tc.minDiff, tc.maxDiff)
			}
			if w < 0 || w >= tc.n || math.Abs(math.Abs(served-loc)-d) > 1e-12 {
				t.Errorf("worst_example=%d served=%v local=%v: not an example with |served - local| = %g", w, served, loc, d)
			}
			if tc.n == len(local) {
				if math.Abs(loc-local[w]) > 1e-8 {
					t.Errorf("local=%v, example %d's score here is %v", loc, w, local[w])
				}
				if tc.target == other && math.Abs(served-laterLocal[w]) > 1e-6 {
					t.Errorf("served=%v, example %d's score of the served export is %v", served, w, laterLocal[w])
				}
			}
			lines := strings.Count("\n"+stderr, "\npredict: ")
			if tc.code == 0 && lines != 0 || tc.code != 0 && (lines != 1 || !strings.Contains(stderr, tc.stderrIs) || !strings.Contains(stderr, "example "+m["worst_example"]+":")) {
				t.Errorf("stderr %q: want %d 'predict: ' lines with %q naming example %s", stderr, tc.code, tc.stderrIs, m["worst_example"])
			}
		})
	}

	// Run-time failures of the compare target (exit 1, one line, nothing on stdout): a model it
	// does not serve, no server there, a server that never answers (the call's deadline).
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := lis.Addr().String()
	lis.Close()
	mute := muteServer(t)
	for _, tc := range []struct {
		name, target string
		args         []string
		want         string
	}{
		{"a model not served", same, []string{"--model_name=nope"}, "Predict on nope:entry, examples 0 to 39: rpc error: code = NotFound"},
		{"no server", gone, nil, "--compare_target " + gone + ": Predict on ctr:entry, examples 0 to 39: rpc error: code = Unavailable"},
		{"a server that does not answer", mute, []string{"--compare_timeout=300ms"}, "code = DeadlineExceeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			code, out, stderr := runCmd(t, append([]string{"--export_base=" + base, "--input_file=" + in, "--compare_target=" + tc.target, "--log_level=warn"}, tc.args...)...)
			if code != 1 || out != "" || !strings.Contains(stderr, tc.want) || strings.Count("\n"+stderr, "\npredict: ") != 1 {
				t.Errorf("exit %d, stdout %q, stderr %q; want 1 and one 'predict: ' line with %q", code, out, stderr, tc.want)
			}
			if took := time.Since(start); took > 20*time.Second {
				t.Errorf("took %v", took)
			}
		})
	}
}

// muteServer is the address of a TCP server that accepts connections and never answers (a hung
// model server); it stops when the test ends.
func muteServer(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		lis.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return lis.Addr().String()
}

// TestCompareStops: a stop (SIGTERM's context) while the compare target's Predict hangs ends the
// command within a second (exit 1, nothing on stdout), not at the call's deadline.
func TestCompareStops(t *testing.T) {
	leakcheck.Check(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	job := exporttest.NewJob(t, 1, []int{4})
	job.Train(ctx, 2)
	base := filepath.Join(t.TempDir(), "ctr")
	job.Export(ctx, base, 1)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	runCtx, stop := context.WithCancelCause(context.Background())
	type result struct {
		code        int
		out, stderr string
	}
	res := make(chan result, 1)
	go func() {
		var out, errb syncbuf.Buffer
		code := run(runCtx, []string{"--export_base=" + base, "--random=8", "--compare_target=" + lis.Addr().String(), "--compare_timeout=1m"}, &out, &errb)
		res <- result{code, out.String(), errb.String()}
	}()
	c, err := lis.Accept() // the Predict's connection: the command is comparing
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	time.Sleep(100 * time.Millisecond)
	stop(errors.New("terminated signal received"))
	start := time.Now()
	select {
	case r := <-res:
		if took := time.Since(start); took > time.Second {
			t.Errorf("exited %v after the stop, want under 1 s", took)
		}
		last := strings.Split(strings.TrimSpace(r.stderr), "\n")
		if r.code != 1 || r.out != "" || last[len(last)-1] != "predict: stopped before scoring: terminated signal received" {
			t.Errorf("exit %d, stdout %q, stderr %q; want 1, nothing, a last line saying it stopped", r.code, r.out, r.stderr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the command did not stop within 10 s of the stop")
	}
}

// TestCompareTLS: a compare target that serves mutual TLS is compared with --tls_ca, --tls_cert
// and --tls_key (exit 0); plaintext, the default, or no client certificate fails (exit 1).
func TestCompareTLS(t *testing.T) {
	leakcheck.Check(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	job := exporttest.NewJob(t, 1, []int{4})
	job.Train(ctx, 5)
	base := filepath.Join(t.TempDir(), "ctr")
	job.Export(ctx, base, 1)
	pki := tlstest.NewPKI(t, "predict")
	serverCert, serverKey := pki.Issue("server", 2)
	clientCert, clientKey := pki.Issue("client", 3)
	opts, err := tlsconfig.Files{Cert: serverCert, Key: serverKey, CA: pki.CA}.ServerOption()
	if err != nil {
		t.Fatal(err)
	}
	target := serveExport(t, base, "ctr", 1, opts...)
	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"mutual TLS", []string{"--tls_ca=" + pki.CA, "--tls_cert=" + clientCert, "--tls_key=" + clientKey}, 0},
		{"plaintext", nil, 1},
		{"no client certificate", []string{"--tls_ca=" + pki.CA}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, stderr := runCmd(t, append([]string{"--export_base=" + base, "--random=16", "--compare_target=" + target, "--compare_timeout=5s", "--log_level=warn"}, tc.args...)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stdout %q, stderr %q", code, tc.code, out, stderr)
			}
			if code == 0 {
				if m := summary(t, out); m["compared"] != "16" || num(t, m, "max_abs_diff") > 1e-6 {
					t.Errorf("%q: want 16 compared within 1e-6", out)
				}
			} else if out != "" || strings.Count("\n"+stderr, "\npredict: ") != 1 || !strings.Contains(stderr, "--compare_target "+target) {
				t.Errorf("stdout %q, stderr %q: want nothing and one 'predict: ' line naming the target", out, stderr)
			}
		})
	}
}
