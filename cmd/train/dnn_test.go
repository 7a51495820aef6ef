package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	pb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/hooks/server"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/internal/syncbuf"
	"github.com/monolith-go/monolith/pkg/hooks/controller"
	"github.com/monolith-go/monolith/pkg/ps"
	"github.com/monolith-go/monolith/pkg/runner/checkpoint"
	"github.com/monolith-go/monolith/pkg/trainer/synth"
)

var (
	dnnFinalLine   = regexp.MustCompile(`^eval auc=(0\.\d{4}) best auc=(0\.\d{4}) loss=(\d+\.\d{4}) steps=(\d+)$`)
	throughputLine = regexp.MustCompile(`(?m)^throughput   (\d+) examples/s: (\d+) examples in (\d+) steps, \S+ s; time split: read \d+%, input \d+%, lookup \d+%, layout \d+%, dense \d+%, apply \d+%, other \d+%$`)
	progressLine   = regexp.MustCompile(`(?m)^  step (\d+) +\d+ examples/s  loss (\d\.\d{4})  train auc 0\.\d{4}  ps lookup \d+\.\d{2} ms$`)
)

// dnnFinal parses the dnn demo's last line: eval AUC, best AUC and global step.
func dnnFinal(t *testing.T, stdout string) (auc, best float64, steps int64) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	m := dnnFinalLine.FindStringSubmatch(lines[len(lines)-1])
	if m == nil {
		t.Fatalf("last line %q is not 'eval auc=<x> best auc=<b> loss=<y> steps=<n>'; stdout:\n%s", lines[len(lines)-1], stdout)
	}
	auc, _ = strconv.ParseFloat(m[1], 64)
	best, _ = strconv.ParseFloat(m[2], 64)
	steps, _ = strconv.ParseInt(m[4], 10, 64)
	return auc, best, steps
}

// `train` with no flags (here with a model dir): an in-process cluster of 2 parameter servers and
// a worker over loopback gRPC trains the dnn model on the latent-factor click log to within 0.02
// of the generator's best AUC, printing progress, the throughput with its time split, and the
// final line; the checkpoint holds the dense parameters and both servers' dumps of every table.
func TestDNNDemo(t *testing.T) {
	leakcheck.Check(t)
	dir := t.TempDir()
	r := runOK(t, "--model_dir="+dir)
	auc, best, steps := dnnFinal(t, r.stdout)
	t.Logf("eval auc %.4f, best %.4f, %d steps\n%s", auc, best, steps, throughputLine.FindString(r.stdout))
	if auc < best-0.02 || auc > best+0.005 {
		t.Errorf("eval auc %.4f, want within 0.02 below the best %.4f", auc, best)
	}
	if want := int64(1563); steps != want { // 4 epochs of 100000 examples in batches of 256: 1562.5
		t.Errorf("steps %d, want %d", steps, want)
	}
	if m := throughputLine.FindStringSubmatch(r.stdout); m == nil || m[2] != "400000" || m[3] != "1563" {
		t.Errorf("no throughput line of 400000 examples in 1563 steps:\n%s", r.stdout)
	}
	if got := len(progressLine.FindAllString(r.stdout, -1)); got != 15 {
		t.Errorf("%d progress lines, want 15 (every 100 steps):\n%s", got, r.stdout)
	}
	for _, want := range []string{"  ps           2 parameter servers in this process, gRPC on 127.0.0.1:", "chief (worker 0 of 1)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	checkCheckpoint(t, dir, 1563, 2)
}

// checkCheckpoint checks that the model dir's newest checkpoint is of step, with its dense files
// and a dump of every table by each of numPS servers.
func checkCheckpoint(t *testing.T, dir string, step int64, numPS int) {
	t.Helper()
	st, err := checkpoint.ReadState(dir, nil)
	if err != nil || st == nil {
		t.Fatalf("checkpoint state of %s: %v, %v", dir, st, err)
	}
	prefix := filepath.Join(dir, "model.ckpt-"+strconv.FormatInt(step, 10))
	if st.ModelCheckpointPath != prefix {
		t.Fatalf("newest checkpoint %s, want %s", st.ModelCheckpointPath, prefix)
	}
	for _, f := range []string{".data", ".index"} {
		if _, err := os.Stat(prefix + f); err != nil {
			t.Errorf("dense checkpoint: %v", err)
		}
	}
	for slot := 1; slot <= 4; slot++ {
		for i := 0; i < numPS; i++ {
			f := filepath.Join(prefix+".embeddings", synth.SlotFeature(slot), "ps_"+strconv.Itoa(i)+"_of_"+strconv.Itoa(numPS)+"-00000-of-00001")
			if fi, err := os.Stat(f); err != nil || fi.Size() == 0 {
				t.Errorf("table dump: %v", err)
			}
		}
	}
}

// A run resumed from a checkpoint trains as the uninterrupted run did: restored from the
// uninterrupted run's checkpoint of step 300 (dense parameters, Adam's slots, every table entry
// with its Adagrad state, on 2 or, re-sharded, 3 parameter servers) and going on at the input's
// batch 301, it prints the same losses and ends with the same evaluation, to the last digit.
func TestDNNResumeIsUninterrupted(t *testing.T) {
	leakcheck.Check(t)
	args := []string{"--demo_examples=40000", "--epochs=4", "--log_step_count_steps=50"}
	ref := t.TempDir()
	r := runOK(t, withArgs(args, "--model_dir="+ref, "--max_steps=500")...)
	refLosses := progressLine.FindAllStringSubmatch(r.stdout, -1)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	refFinal := lines[len(lines)-1]
	for _, numPS := range []string{"2", "3"} {
		t.Run(numPS+" ps", func(t *testing.T) {
			dir := t.TempDir()
			copyCheckpoint(t, ref, dir, 300)
			r := runOK(t, withArgs(args, "--model_dir="+dir, "--max_steps=500", "--local_ps="+numPS)...)
			losses := progressLine.FindAllStringSubmatch(r.stdout, -1)
			if len(losses) != 4 || len(refLosses) != 10 {
				t.Fatalf("%d progress lines after the restore, %d in the reference; want 4 and 10:\n%s", len(losses), len(refLosses), r.stdout)
			}
			for i, l := range losses {
				if want := refLosses[6+i]; l[1] != want[1] || l[2] != want[2] {
					t.Errorf("step %s loss %s, the uninterrupted run's step %s loss %s", l[1], l[2], want[1], want[2])
				}
			}
			lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
			if got := lines[len(lines)-1]; got != refFinal {
				t.Errorf("resumed: %q, uninterrupted: %q", got, refFinal)
			}
			checkCheckpoint(t, dir, 500, mustAtoi(t, numPS))
		})
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// copyCheckpoint copies checkpoint step of model dir src (dense files and table dumps) into dst,
// with a state file naming it.
func copyCheckpoint(t *testing.T, src, dst string, step int64) {
	t.Helper()
	name := "model.ckpt-" + strconv.FormatInt(step, 10)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	err := filepath.Walk(src, func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if !strings.HasPrefix(rel, name+".") {
			return nil
		}
		if fi.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	state := "model_checkpoint_path: \"" + name + "\"\nall_model_checkpoint_paths: \"" + name + "\"\n"
	if err := os.WriteFile(filepath.Join(dst, checkpoint.StateFile), []byte(state), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The dnn model trains on files too, its sparse features named with their fid slots; the final
// line has no best AUC then.
func TestDNNOnFiles(t *testing.T) {
	leakcheck.Check(t)
	dir := t.TempDir()
	g, err := synth.New(synth.Config{Seed: 3, NumDense: 2, NumSlots: 2, Vocab: 50, LatentDim: 2})
	if err != nil {
		t.Fatal(err)
	}
	train, err := g.Write(synth.WriteOptions{Dir: dir, Name: "clicks", Files: 2, Examples: 2000, Stream: 1})
	if err != nil {
		t.Fatal(err)
	}
	eval, err := g.Write(synth.WriteOptions{Dir: dir, Name: "heldout", Examples: 500, Stream: 2})
	if err != nil {
		t.Fatal(err)
	}
	r := runOK(t, "--train_data="+strings.Join(train, ","), "--eval_data="+eval[0], "--dense_features=dense:2",
		"--sparse_features=slot_1:1,slot_2:2", "--batch_size=100", "--epochs=2", "--embedding_dim=4", "--hidden=16",
		"--model_dir="+filepath.Join(dir, "model"))
	if auc, _, steps := r.final(t); steps != 40 || auc <= 0.6 {
		t.Errorf("auc %v steps %d, want 40 steps (2 epochs of 2000 examples in batches of 100) and some learning", auc, steps)
	}
	if strings.Contains(r.stdout, "best auc") {
		t.Errorf("a run on files has no generator, so no best AUC: %s", r.stdout)
	}
	if !strings.Contains(r.stdout, "dnn(2 features in 2 tables, pooled 8 + dense 2, hidden [16]") {
		t.Errorf("stdout does not describe the model:\n%s", r.stdout)
	}
}

// While it trains, the worker's status endpoint serves its Prometheus metrics: global step, loss,
// AUC, examples/s, the PS lookup latency histogram and the step phase times.
func TestStatusMetrics(t *testing.T) {
	leakcheck.Check(t)
	probe := newProbe(120)
	wait, out, _ := startOut(t, withArgs(endless, "--model_dir="+t.TempDir(), "--log_step_count_steps=50"), nil, probe)
	probe.wait(t, wait)
	defer func() {
		close(probe.stop)
		if r := wait(); r.code != 0 {
			t.Errorf("exit %d; stderr:\n%s", r.code, r.stderr)
		}
	}()
	// The status line was printed before the first step.
	r := out.String()
	m := regexp.MustCompile(`  status       (http://127\.0\.0\.1:\d+) `).FindStringSubmatch(r)
	if m == nil {
		t.Fatalf("no status line:\n%s", r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, m[1]+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d, %v", resp.StatusCode, err)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^monolith_train_global_step \d{3,}$`),
		regexp.MustCompile(`(?m)^monolith_train_loss 0\.\d+`),
		regexp.MustCompile(`(?m)^monolith_train_train_auc 0\.\d+`),
		regexp.MustCompile(`(?m)^monolith_train_examples_per_second \d+`),
		regexp.MustCompile(`(?m)^monolith_train_examples_total \d+`),
		regexp.MustCompile(`(?m)^monolith_train_ps_lookup_seconds_count\{table="slot_1"\} \d{3,}$`),
		regexp.MustCompile(`(?m)^monolith_train_ps_lookup_seconds_bucket\{table="slot_4",le="\+Inf"\} \d{3,}$`),
		regexp.MustCompile(`(?m)^monolith_train_ps_apply_seconds_count\{table="slot_2"\} \d{3,}$`),
		regexp.MustCompile(`(?m)^monolith_train_step_phase_seconds_total\{phase="lookup"\} \d`),
		regexp.MustCompile(`(?m)^monolith_train_step_phase_seconds_total\{phase="dense"\} \d`),
		regexp.MustCompile(`(?m)^monolith_train_input_read_seconds_total \d`),
	} {
		if !want.Match(body) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// startServers starts n parameter servers in the test's process, stopped when it ends.
func startServers(t *testing.T, n int) []string {
	t.Helper()
	var addrs []string
	for i := 0; i < n; i++ {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		r, err := ps.Start(lis, ps.Config{Index: i, NumPS: n, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			r.Stop(ctx)
		})
		addrs = append(addrs, r.Addr())
	}
	return addrs
}

// A worker finds parameter servers of other processes through Primus' TF_CONFIG, creates its
// tables there and trains; a new job (a model dir without a checkpoint) on servers that hold a
// job's tables is refused, naming a table and its entries, where restoring a checkpoint replaces
// what they hold.
func TestDNNOnParameterServersOfTheJob(t *testing.T) {
	leakcheck.Check(t)
	addrs := startServers(t, 2)
	tfConfig := `--tf_config={"cluster":{"chief":["127.0.0.1:2240"],"worker":[],"ps":["` + strings.Join(addrs, `","`) + `"]},"task":{"type":"chief","index":0}}`
	args := withArgs(dnnSmall, "--discovery_type=primus", tfConfig, "--num_ps=2")
	dir := t.TempDir()
	r := runOK(t, withArgs(args, "--model_dir="+dir)...)
	if !strings.Contains(r.stdout, "  ps           2 parameter servers from the service discovery: "+strings.Join(addrs, ", ")) {
		t.Errorf("stdout does not name the servers %v:\n%s", addrs, r.stdout)
	}
	checkCheckpoint(t, dir, 8, 2)

	r = start(t, withArgs(args, "--model_dir="+t.TempDir()), nil)()
	if r.code != 1 || !regexp.MustCompile(`train: ps 0 \(127\.0\.0\.1:\d+\): table "slot_1" holds \d+ entries, and --model_dir has no checkpoint`).MatchString(r.stderr) {
		t.Errorf("a new job on the servers: exit %d; stderr:\n%s", r.code, r.stderr)
	}

	r = runOK(t, withArgs(args, "--model_dir="+dir, "--epochs=2", "--steps=2")...)
	if _, _, steps := r.final(t); steps != 10 {
		t.Errorf("resumed: steps %d, want 10", steps)
	}
}

// startJob starts the chief and worker 1 of a job in the test's process, on the parameter servers
// addrs (Primus' TF_CONFIG names them and the workers' roles).
func startJob(t *testing.T, addrs []string, args ...string) (chief, worker func() result, chiefLog *syncbuf.Buffer) {
	t.Helper()
	tfConfig := func(typ string) string {
		return fmt.Sprintf(`--tf_config={"cluster":{"chief":["127.0.0.1:2250"],"worker":["127.0.0.1:2251"],"ps":["%s"]},"task":{"type":%q,"index":0}}`,
			strings.Join(addrs, `","`), typ)
	}
	common := append([]string{"--discovery_type=primus", "--num_ps=2", "--num_workers=2", "--ps_timeout=2s"}, args...)
	worker = start(t, withArgs(common, tfConfig("worker")), nil)
	chief, _, chiefLog = startOut(t, withArgs(common, tfConfig("chief")), nil)
	return chief, worker, chiefLog
}

// Two workers of a job (here in one process, on parameter servers of the test's) train in step:
// with unequal shares of the input both stop when the first share ends; a StopTraining holds both
// (worker 1 at the barrier, the chief waiting for it) until ResumeTraining; a worker that fails
// makes the other fail too, told why or at its deadline.
func TestTwoWorkers(t *testing.T) {
	leakcheck.Check(t)
	dir := t.TempDir()
	g, err := synth.New(demoConfig(5, modelDNN))
	if err != nil {
		t.Fatal(err)
	}
	train, err := g.Write(synth.WriteOptions{Dir: dir, Name: "train", Files: 3, Examples: 1800, Stream: 1})
	if err != nil {
		t.Fatal(err)
	}
	eval, err := g.Write(synth.WriteOptions{Dir: dir, Name: "eval", Examples: 300, Stream: 2})
	if err != nil {
		t.Fatal(err)
	}
	// A copy of file 1 with a record near its end broken, named to sort after the others.
	corrupt := filepath.Join(dir, "z-corrupt.tfrecord")
	fi, err := os.Stat(train[1])
	if err != nil {
		t.Fatal(err)
	}
	copyFlipped(t, train[1], corrupt, int(fi.Size())-300)
	files := func(train ...string) []string {
		return []string{"--train_data=" + strings.Join(train, ","), "--eval_data=" + eval[0], "--batch_size=100"}
	}

	t.Run("unequal shares", func(t *testing.T) {
		// Worker 0 has files 0 and 2 (12 batches), worker 1 file 1 (6 batches).
		chief, worker, _ := startJob(t, startServers(t, 2), withArgs(files(train...), "--epochs=1", "--model_dir="+t.TempDir())...)
		w, c := worker(), chief()
		if w.code != 0 || c.code != 0 {
			t.Fatalf("exit %d and %d; stderr:\n%s\n%s", c.code, w.code, c.stderr, w.stderr)
		}
		if _, _, steps := c.final(t); steps != 6 || !strings.Contains(w.stdout, "trained steps=6 (the chief evaluates)") {
			t.Errorf("chief: %d steps, worker:\n%s\nwant both at 6", steps, w.stdout)
		}
	})

	t.Run("stop and resume", func(t *testing.T) {
		dir := t.TempDir()
		chief, worker, chiefLog := startJob(t, startServers(t, 2), withArgs(files(train...), "--epochs=1000", "--max_steps=400", "--model_dir="+dir)...)
		client := dialController(t, dir)
		defer client.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := client.StopTraining(ctx, &pb.StopTrainingRequest{}); err != nil {
			t.Fatal(err)
		}
		for {
			st, err := client.GetBlockStatus(ctx, &pb.GetBlockStatusRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if len(st.GetBlockedIndices()) == 2 {
				break // 0: the barrier, 1: worker 1 waiting at it
			}
			time.Sleep(10 * time.Millisecond)
		}
		// The chief, at the step gate without worker 1, waits for the barrier's removal.
		for !strings.Contains(chiefLog.String(), `msg="the job's barrier is placed: waiting for its removal"`) {
			if ctx.Err() != nil {
				t.Fatalf("the chief does not wait for the barrier's removal; stderr:\n%s", chiefLog.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
		if _, err := client.ResumeTraining(ctx, &pb.ResumeTrainingRequest{}); err != nil {
			t.Fatal(err)
		}
		w, c := worker(), chief()
		if w.code != 0 || c.code != 0 {
			t.Fatalf("exit %d and %d; stderr:\n%s\n%s", c.code, w.code, c.stderr, w.stderr)
		}
		if _, _, steps := c.final(t); steps != 400 || !strings.Contains(w.stdout, "trained steps=400 ") {
			t.Errorf("chief: %d steps, worker:\n%s\nwant both at 400", steps, w.stdout)
		}
	})

	t.Run("a worker fails", func(t *testing.T) {
		// Worker 1's file is corrupt: it fails in its 6th step.
		chief, worker, _ := startJob(t, startServers(t, 2), withArgs(files(train[0], corrupt), "--model_dir="+t.TempDir())...)
		w, c := worker(), chief()
		if w.code != 2 || !strings.Contains(w.stderr, "train: training input: dataset: "+corrupt) {
			t.Errorf("worker 1: exit %d, want 2 naming the corrupt file; stderr:\n%s", w.code, w.stderr)
		}
		t.Logf("chief: %q", lastLine(c.stderr))
		if c.code != 1 || !regexp.MustCompile(`train: .*(aborted by worker 1: .*z-corrupt\.tfrecord|waiting for the other workers before step)`).MatchString(c.stderr) {
			t.Errorf("chief: exit %d, want 1 with worker 1's failure or the wait for it; stderr:\n%s", c.code, c.stderr)
		}
	})
}

// dialController connects to the controller of the chief training in dir, once it serves.
func dialController(t *testing.T, dir string) *controller.Client {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := controller.ReadAddr(dir); err == nil {
			c, err := controller.DialModelDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("no controller address in %s after a minute", dir)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// lastLine is s's last line.
func lastLine(s string) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return l[len(l)-1]
}
