package job_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	pb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/hooks/server"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/internal/syncbuf"
	"github.com/monolith-go/monolith/pkg/hooks/controller"
	"github.com/monolith-go/monolith/pkg/ps"
	"github.com/monolith-go/monolith/pkg/trainer/job"
	"github.com/monolith-go/monolith/pkg/trainer/job/jobtest"
	"github.com/monolith-go/monolith/pkg/trainer/synth"
)

var progressLine = regexp.MustCompile(`(?m)^  step (\d+) +\d+ examples/s  loss (\d\.\d{4})  train auc 0\.\d{4}  ps lookup \d+\.\d{2} ms$`)

// dnnSmall is a quick job of the dnn model (cmd/train's --demo_examples=2000 --epochs=1
// --log_step_count_steps=5): 2000 training examples in batches of 256 are 8 steps an epoch.
func dnnSmall(t *testing.T, in input, epochs int, more map[string]any) job.Config {
	t.Helper()
	v := values("log_step_count_steps", 5)
	maps.Copy(v, more)
	return newConfig(t, job.ModelDNN, in, epochs, 256, v)
}

// A run resumed from a checkpoint trains as the uninterrupted run did: restored from the
// uninterrupted run's checkpoint of step 300 (dense parameters, Adam's slots, every table entry
// with its Adagrad state, on 2 or, re-sharded, 3 parameter servers) and going on at the input's
// batch 301, it prints the same losses and ends with the same evaluation, to the last digit.
func TestDNNResumeIsUninterrupted(t *testing.T) {
	leakcheck.Check(t)
	in := clickLog(t, job.ModelDNN, 40000)
	cfg := func(dir string, localPS int) job.Config {
		c := newConfig(t, job.ModelDNN, in, 4, 256, values("log_step_count_steps", 50, "model_dir", dir))
		c.MaxSteps, c.DNN.LocalPS = 500, localPS
		return c
	}
	ref := t.TempDir()
	r := runOK(t, cfg(ref, 2))
	refLosses := progressLine.FindAllStringSubmatch(r.stdout, -1)
	refFinal := lastLine(r.stdout)
	for _, numPS := range []int{2, 3} {
		t.Run(fmt.Sprint(numPS, " ps"), func(t *testing.T) {
			dir := t.TempDir()
			jobtest.CopyCheckpoint(t, ref, dir, 300)
			r := runOK(t, cfg(dir, numPS))
			losses := progressLine.FindAllStringSubmatch(r.stdout, -1)
			if len(losses) != 4 || len(refLosses) != 10 {
				t.Fatalf("%d progress lines after the restore, %d in the reference; want 4 and 10:\n%s", len(losses), len(refLosses), r.stdout)
			}
			for i, l := range losses {
				if want := refLosses[6+i]; l[1] != want[1] || l[2] != want[2] {
					t.Errorf("step %s loss %s, the uninterrupted run's step %s loss %s", l[1], l[2], want[1], want[2])
				}
			}
			if got := lastLine(r.stdout); got != refFinal {
				t.Errorf("resumed: %q, uninterrupted: %q", got, refFinal)
			}
			jobtest.CheckCheckpoint(t, dir, 500, numPS)
		})
	}
}

// While it trains, the worker's status endpoint serves its Prometheus metrics: global step, loss,
// AUC, examples/s, the PS lookup latency histogram and the step phase times.
func TestStatusMetrics(t *testing.T) {
	leakcheck.Check(t)
	probe := newProbe(120)
	wait, out, _ := startOut(t, endless(t, values("model_dir", t.TempDir(), "log_step_count_steps", 50)), nil, probe)
	probe.wait(t, wait)
	defer func() {
		close(probe.stop)
		if r := wait(); r.err != nil {
			t.Errorf("exit %d: %v; stderr:\n%s", r.code, r.err, r.stderr)
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
	in := clickLog(t, job.ModelDNN, 2000)
	tfConfig := `{"cluster":{"chief":["127.0.0.1:2240"],"worker":[],"ps":["` + strings.Join(addrs, `","`) + `"]},"task":{"type":"chief","index":0}}`
	cfg := func(dir string, epochs int) job.Config {
		return dnnSmall(t, in, epochs, values("discovery_type", "primus", "tf_config", tfConfig, "num_ps", 2, "model_dir", dir))
	}
	dir := t.TempDir()
	r := runOK(t, cfg(dir, 1))
	if !strings.Contains(r.stdout, "  ps           2 parameter servers from the service discovery: "+strings.Join(addrs, ", ")) {
		t.Errorf("stdout does not name the servers %v:\n%s", addrs, r.stdout)
	}
	jobtest.CheckCheckpoint(t, dir, 8, 2)

	r = start(t, cfg(t.TempDir(), 1), nil)()
	if r.code != 1 || !regexp.MustCompile(`^ps 0 \(127\.0\.0\.1:\d+\): table "slot_1" holds \d+ entries, and --model_dir has no checkpoint`).MatchString(r.line) {
		t.Errorf("a new job on the servers: exit %d (%q); stderr:\n%s", r.code, r.line, r.stderr)
	}

	resumed := cfg(dir, 2)
	resumed.Steps = 2
	r = runOK(t, resumed)
	if _, _, steps := r.final(t); steps != 10 {
		t.Errorf("resumed: steps %d, want 10", steps)
	}
}

// startJob starts the chief and worker 1 of a job in the test's process, on the parameter servers
// addrs (Primus' TF_CONFIG names them and the workers' roles), over train and eval in batches of
// 100; edit changes both workers' configs.
func startJob(t *testing.T, addrs []string, in input, epochs int, modelDir string, edit func(*job.Config)) (chief, worker func() result, chiefLog *syncbuf.Buffer) {
	t.Helper()
	cfg := func(typ string) job.Config {
		tfConfig := fmt.Sprintf(`{"cluster":{"chief":["127.0.0.1:2250"],"worker":["127.0.0.1:2251"],"ps":["%s"]},"task":{"type":%q,"index":0}}`,
			strings.Join(addrs, `","`), typ)
		c := newConfig(t, job.ModelDNN, in, epochs, 100, values("discovery_type", "primus", "tf_config", tfConfig, "num_ps", 2, "num_workers", 2, "model_dir", modelDir))
		c.DNN.PSTimeout = 2 * time.Second
		if edit != nil {
			edit(&c)
		}
		return c
	}
	worker = start(t, cfg("worker"), nil)
	chief, _, chiefLog = startOut(t, cfg("chief"), nil)
	return chief, worker, chiefLog
}

// Two workers of a job (here in one process, on parameter servers of the test's) train in step:
// with unequal shares of the input both stop when the first share ends; a StopTraining holds both
// (worker 1 at the barrier, the chief waiting for it) until ResumeTraining; a worker that fails
// makes the other fail too, told why or at its deadline.
func TestTwoWorkers(t *testing.T) {
	leakcheck.Check(t)
	dir := t.TempDir()
	g, err := synth.New(demoClickLog(5, job.ModelDNN))
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
	jobtest.CopyFlipped(t, train[1], corrupt, int(fi.Size())-300)
	files := func(train ...string) input { return input{train: train, eval: eval, schema: g.Schema()} }

	t.Run("unequal shares", func(t *testing.T) {
		// Worker 0 has files 0 and 2 (12 batches), worker 1 file 1 (6 batches).
		chief, worker, _ := startJob(t, startServers(t, 2), files(train...), 1, t.TempDir(), nil)
		w, c := worker(), chief()
		if w.err != nil || c.err != nil {
			t.Fatalf("errors %v and %v; stderr:\n%s\n%s", c.err, w.err, c.stderr, w.stderr)
		}
		if _, _, steps := c.final(t); steps != 6 || !strings.Contains(w.stdout, "trained steps=6 (the chief evaluates)") {
			t.Errorf("chief: %d steps, worker:\n%s\nwant both at 6", steps, w.stdout)
		}
	})

	t.Run("stop and resume", func(t *testing.T) {
		dir := t.TempDir()
		chief, worker, chiefLog := startJob(t, startServers(t, 2), files(train...), 1000, dir, func(c *job.Config) { c.MaxSteps = 400 })
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
		if w.err != nil || c.err != nil {
			t.Fatalf("errors %v and %v; stderr:\n%s\n%s", c.err, w.err, c.stderr, w.stderr)
		}
		if _, _, steps := c.final(t); steps != 400 || !strings.Contains(w.stdout, "trained steps=400 ") {
			t.Errorf("chief: %d steps, worker:\n%s\nwant both at 400", steps, w.stdout)
		}
	})

	t.Run("a worker fails", func(t *testing.T) {
		// Worker 1's file is corrupt: it fails in its 6th step.
		chief, worker, _ := startJob(t, startServers(t, 2), files(train[0], corrupt), 4, t.TempDir(), nil)
		w, c := worker(), chief()
		if w.code != 2 || !strings.HasPrefix(w.line, "training input: dataset: "+corrupt) {
			t.Errorf("worker 1: exit %d (%q), want 2 naming the corrupt file; stderr:\n%s", w.code, w.line, w.stderr)
		}
		t.Logf("chief: %q", c.line)
		if c.code != 1 || !regexp.MustCompile(`(aborted by worker 1: .*z-corrupt\.tfrecord|waiting for the other workers before step)`).MatchString(c.line) {
			t.Errorf("chief: exit %d (%q), want 1 with worker 1's failure or the wait for it; stderr:\n%s", c.code, c.line, c.stderr)
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
