package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/hooks/server"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/internal/syncbuf"
	"github.com/monolith-go/monolith/pkg/dataset"
	"github.com/monolith-go/monolith/pkg/discovery/consul/consultest"
	"github.com/monolith-go/monolith/pkg/estimator"
	"github.com/monolith-go/monolith/pkg/hooks/controller"
	"github.com/monolith-go/monolith/pkg/hooks/runhook"
	"github.com/monolith-go/monolith/pkg/runner/checkpoint"
	"github.com/monolith-go/monolith/pkg/trainenv"
	"github.com/monolith-go/monolith/pkg/trainer/synth"
	"github.com/monolith-go/monolith/pkg/zk/zktest"
)

// dnnSmall is a quick demo of the dnn model: 2000 training examples in batches of 256 are 8 steps
// an epoch.
var dnnSmall = []string{"--demo_examples=2000", "--epochs=1", "--log_step_count_steps=5"}

// small is a quick demo of the logistic regression: 2000 training examples in batches of 128 are
// 16 steps an epoch.
var small = []string{"--model=logreg", "--demo_examples=2000", "--epochs=1", "--batch_size=128", "--log_step_count_steps=5"}

const smallSteps = 16

var (
	finalLine = regexp.MustCompile(`^eval auc=(0\.\d{4}|1\.0000)(?: best auc=(?:0\.\d{4}|1\.0000))? loss=(\d+\.\d{4}) steps=(\d+)$`)
	bestLine  = regexp.MustCompile(`^best auc=(0\.\d{4}|1\.0000) loss=(\d+\.\d{4})$`)
)

// result is a finished run.
type result struct {
	code           int
	stdout, stderr string
	env            map[string]string // what the run exported
}

// final parses the last line of stdout: the eval AUC, loss and global step.
func (r result) final(t *testing.T) (auc, loss float64, steps int64) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	m := finalLine.FindStringSubmatch(lines[len(lines)-1])
	if m == nil {
		t.Fatalf("last line %q is not 'eval auc=<x> loss=<y> steps=<n>'; stdout:\n%s\nstderr:\n%s", lines[len(lines)-1], r.stdout, r.stderr)
	}
	auc, _ = strconv.ParseFloat(m[1], 64)
	loss, _ = strconv.ParseFloat(m[2], 64)
	steps, _ = strconv.ParseInt(m[3], 10, 64)
	return auc, loss, steps
}

// start runs the command in the background with env as its environment and hooks in its loop.
func start(t *testing.T, args []string, env trainenv.Env, hooks ...runhook.Hook) (wait func() result) {
	t.Helper()
	wait, _, _ = startOut(t, args, env, hooks...)
	return wait
}

// startOut is start, also returning the run's stdout and stderr as they are written.
func startOut(t *testing.T, args []string, env trainenv.Env, hooks ...runhook.Hook) (wait func() result, stdout, stderr *syncbuf.Buffer) {
	t.Helper()
	if env == nil {
		env = trainenv.Env{}
	}
	stdout, stderr = new(syncbuf.Buffer), new(syncbuf.Buffer)
	exported := map[string]string{}
	done := make(chan int, 1)
	setenv := func(k, v string) error { exported[k] = v; return nil }
	go func() {
		done <- run(context.Background(), args, stdout, stderr, deps{env: env, setenv: setenv, hooks: hooks})
	}()
	return func() result {
		t.Helper()
		select {
		case code := <-done:
			return result{code: code, stdout: stdout.String(), stderr: stderr.String(), env: exported}
		case <-time.After(2 * time.Minute):
			t.Fatalf("the run did not end; stderr:\n%s", stderr.String())
			return result{}
		}
	}, stdout, stderr
}

// runOK runs the command to its end and requires exit status 0.
func runOK(t *testing.T, args ...string) result {
	t.Helper()
	r := start(t, args, nil)()
	if r.code != 0 {
		t.Fatalf("train %v: exit status %d; stdout:\n%s\nstderr:\n%s", args, r.code, r.stdout, r.stderr)
	}
	return r
}

func withArgs(base []string, more ...string) []string {
	return append(append([]string(nil), base...), more...)
}

// The logistic regression's demo (part 1's defaults) trains to within 0.03 of the best AUC its
// generator allows, prints both, and exports the run config's environment.
func TestDemoReachesTheBestAUC(t *testing.T) {
	leakcheck.Check(t)
	r := runOK(t, "--model=logreg", "--demo_examples=40000", "--epochs=3", "--batch_size=128", "--model_dir="+t.TempDir())
	auc, _, steps := r.final(t)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	m := bestLine.FindStringSubmatch(lines[len(lines)-2])
	if m == nil {
		t.Fatalf("line before the last %q is not 'best auc=<b> loss=<l>'", lines[len(lines)-2])
	}
	best, _ := strconv.ParseFloat(m[1], 64)
	t.Logf("best auc %.4f, eval auc %.4f after %d steps", best, auc, steps)
	if auc < best-0.03 || auc > best+0.01 {
		t.Errorf("eval auc %.4f, want within 0.03 below the best %.4f", auc, best)
	}
	if want := int64(938); steps != want { // 3 epochs of 40000 examples in batches of 128: 937.5
		t.Errorf("steps %d, want %d", steps, want)
	}
	if r.env["TF_GRPC_WORKER_CACHE_THREADS"] != "16" || r.env["MONOLITH_GRPC_WORKER_SERVICE_HANDLER_MULTIPLIER"] != "1.0" {
		t.Errorf("exported %v, want the run config's TF_GRPC_WORKER_CACHE_THREADS=16 and MONOLITH_GRPC_WORKER_SERVICE_HANDLER_MULTIPLIER=1.0", r.env)
	}
}

// A second run on the same model dir restores the last checkpoint and its global step goes on;
// retention keeps the last --max_to_keep (--checkpoints_max_to_keep) checkpoints; progress is logged every
// --log_step_count_steps with step, examples/s and loss.
func TestResumeAndRetention(t *testing.T) {
	leakcheck.Check(t)
	dir := t.TempDir()
	args := withArgs(small, "--model_dir="+dir, "--save_checkpoints_steps=5", "--max_to_keep=2")
	r1 := runOK(t, args...)
	if _, _, steps := r1.final(t); steps != smallSteps {
		t.Fatalf("first run: steps %d, want %d", steps, smallSteps)
	}
	if !regexp.MustCompile(`msg="training progress" step=6 loss=0\.\d+ steps_per_sec=\S+ examples_per_sec=\S+`).MatchString(r1.stderr) {
		t.Errorf("no progress line for step 6 with loss and examples/s; stderr:\n%s", r1.stderr)
	}
	st, err := checkpoint.ReadState(dir, nil)
	if err != nil || st == nil {
		t.Fatalf("state: %v, %v", st, err)
	}
	want := []string{filepath.Join(dir, "model.ckpt-15"), filepath.Join(dir, "model.ckpt-16")}
	if fmt.Sprint(st.AllModelCheckpointPaths) != fmt.Sprint(want) {
		t.Errorf("checkpoints kept %v, want %v", st.AllModelCheckpointPaths, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "model.ckpt-10.index")); !os.IsNotExist(err) {
		t.Errorf("model.ckpt-10 not deleted by retention: %v", err)
	}

	r2 := runOK(t, args...)
	if _, _, steps := r2.final(t); steps != 2*smallSteps {
		t.Errorf("second run: steps %d, want %d (the global step goes on)", steps, 2*smallSteps)
	}
	if !strings.Contains(r2.stderr, `msg="restored checkpoint" checkpoint=`+filepath.Join(dir, "model.ckpt-16")+" global_step=16") {
		t.Errorf("second run did not restore model.ckpt-16; stderr:\n%s", r2.stderr)
	}
	// --mode=eval evaluates the last checkpoint as the training's last evaluation did.
	r3 := runOK(t, withArgs(args, "--mode=eval")...)
	last := func(s string) string { l := strings.Split(strings.TrimSpace(s), "\n"); return l[len(l)-1] }
	if last(r3.stdout) != last(r2.stdout) {
		t.Errorf("eval mode: %q, want the training's last evaluation %q", last(r3.stdout), last(r2.stdout))
	}
}

// --steps trains that many more steps, --max_steps caps the global step, and a model dir at
// --max_steps only evaluates.
func TestStepsAndMaxSteps(t *testing.T) {
	leakcheck.Check(t)
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want int64
	}{
		{[]string{"--steps=5"}, 5},
		{[]string{"--steps=5", "--max_steps=8"}, 8},
		{[]string{"--max_steps=8"}, 8},
		{[]string{"--steps=100"}, 8 + smallSteps}, // the input ends first
	} {
		r := runOK(t, withArgs(small, append(c.args, "--model_dir="+dir)...)...)
		if _, _, steps := r.final(t); steps != c.want {
			t.Errorf("%v: steps %d, want %d", c.args, steps, c.want)
		}
	}
}

// --restore_dir starts a new model dir from another's last checkpoint; --restore_ckpt picks an
// older one.
func TestRestoreDirAndCkpt(t *testing.T) {
	leakcheck.Check(t)
	a, b, c := t.TempDir(), t.TempDir(), t.TempDir()
	runOK(t, withArgs(small, "--model_dir="+a, "--save_checkpoints_steps=5")...)
	r := runOK(t, withArgs(small, "--model_dir="+b, "--restore_dir="+a, "--steps=4")...)
	if _, _, steps := r.final(t); steps != smallSteps+4 {
		t.Errorf("--restore_dir: steps %d, want %d", steps, smallSteps+4)
	}
	r = runOK(t, withArgs(small, "--model_dir="+c, "--restore_dir="+a, "--restore_ckpt=model.ckpt-10", "--steps=3")...)
	if _, _, steps := r.final(t); steps != 13 {
		t.Errorf("--restore_ckpt model.ckpt-10: steps %d, want 13", steps)
	}
	r = runOK(t, withArgs(small, "--model_dir="+a, "--restore_ckpt=model.ckpt-5", "--steps=1")...)
	if _, _, steps := r.final(t); steps != 6 {
		t.Errorf("--restore_ckpt model.ckpt-5 in the model dir: steps %d, want 6", steps)
	}
}

// writeData writes a small click log into dir: train-*.tfrecord (2 files) and eval-*.tfrecord.
func writeData(t *testing.T, dir string, c dataset.Compression) (train, eval []string) {
	t.Helper()
	g, err := synth.New(demoConfig(7, modelLogreg))
	if err != nil {
		t.Fatal(err)
	}
	if train, err = g.Write(synth.WriteOptions{Dir: dir, Name: "train", Files: 2, Examples: 600, Stream: 1, Compression: c}); err != nil {
		t.Fatal(err)
	}
	if eval, err = g.Write(synth.WriteOptions{Dir: dir, Name: "eval", Files: 1, Examples: 200, Stream: 2, Compression: c}); err != nil {
		t.Fatal(err)
	}
	return train, eval
}

// --train_data and --eval_data train on files (here GZIP-compressed, listed by an @file).
func TestTrainOnFiles(t *testing.T) {
	leakcheck.Check(t)
	dir := t.TempDir()
	train, _ := writeData(t, dir, dataset.GZIP)
	list := filepath.Join(dir, "train.list")
	if err := os.WriteFile(list, []byte(strings.Join(train, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runOK(t, "--model=logreg", "--train_data=@"+list, "--eval_data="+filepath.Join(dir, "eval-*"), "--compression=gzip",
		"--epochs=2", "--batch_size=100", "--model_dir="+filepath.Join(dir, "model"))
	if auc, _, steps := r.final(t); steps != 12 || auc <= 0.6 {
		t.Errorf("auc %v steps %d, want 12 steps (2 epochs of 600 examples in batches of 100) and some learning", auc, steps)
	}
	if strings.Contains(r.stdout, "best auc") {
		t.Errorf("a run on files has no generator, so no best AUC: %s", r.stdout)
	}
}

// Bad input gives one "train: ..." line on stderr, no stack trace, and exit status 2 (1 for a
// failure at run time, here a corrupt checkpoint).
func TestBadInput(t *testing.T) {
	leakcheck.Check(t)
	dir := t.TempDir()
	train, eval := writeData(t, dir, dataset.NoCompression)
	data := func(trainPattern string) []string {
		return []string{"--model=logreg", "--train_data=" + trainPattern, "--eval_data=" + eval[0], "--model_dir=" + filepath.Join(t.TempDir(), "m")}
	}
	corrupt := filepath.Join(dir, "corrupt.tfrecord")
	copyFlipped(t, train[0], corrupt, 2000)
	truncated := filepath.Join(dir, "truncated.tfrecord")
	copyTruncated(t, train[0], truncated, 1500)
	notDir := filepath.Join(dir, "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	trained := t.TempDir()
	runOK(t, withArgs(small, "--model_dir="+trained)...)
	badCkpt := t.TempDir()
	runOK(t, withArgs(small, "--model_dir="+badCkpt)...)
	if err := os.WriteFile(filepath.Join(badCkpt, "model.ckpt-16.data"), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"missing files", data(filepath.Join(dir, "nothing-*.tfrecord")), 2, "no file matches"},
		{"missing eval files", []string{"--train_data=" + train[0], "--eval_data=" + filepath.Join(dir, "none"), "--model_dir=" + t.TempDir()}, 2, `--eval_data "` + filepath.Join(dir, "none")},
		{"missing file list", data("@" + filepath.Join(dir, "no.list")), 2, "no.list"},
		{"bad pattern", data(filepath.Join(dir, "train-[")), 2, "syntax error in pattern"},
		{"corrupt record", data(corrupt), 2, "train: training input: dataset: " + corrupt + " at offset"},
		{"truncated record", data(truncated), 2, "train: training input: dataset: " + truncated + " at offset"},
		{"directory as data", data(dir), 2, "training input: dataset: " + dir},
		{"not the schema", withArgs(data(train[0]), "--dense_features=other:3"), 2, `no float_list feature "other"`},
		{"bad schema flag", withArgs(data(train[0]), "--dense_features=dense"), 2, "--dense_features"},
		{"wrong compression", withArgs(data(train[0]), "--compression=gzip"), 2, "training input: dataset: " + train[0]},
		{"unknown compression", withArgs(small, "--compression=snappy"), 2, "--compression"},
		{"unwritable model_dir", withArgs(small, "--model_dir="+filepath.Join(notDir, "m")), 2, "--model_dir " + filepath.Join(notDir, "m") + " is not writable"},
		{"train without eval", []string{"--train_data=" + train[0]}, 2, "--train_data needs --eval_data"},
		{"unknown flag", []string{"--no_such_flag"}, 2, "unknown flag --no_such_flag"},
		{"bad flag value", []string{"--batch_size=many"}, 2, "--batch_size"},
		{"bad discovery type", []string{"--discovery_type=etcd"}, 2, "--discovery_type"},
		{"zero batch size", withArgs(small, "--batch_size=0"), 2, "--batch_size 0 is not positive"},
		{"zk without server", withArgs(small, "--discovery_type=zk"), 2, "--discovery_type zk needs --zk_server and --deep_insight_name"},
		{"primus without tf_config", withArgs(small, "--discovery_type=primus"), 2, "primus discovery needs tf_config"},
		{"parameter servers", withArgs(small, "--num_ps=2"), 2, "--num_ps 2"},
		{"several workers", withArgs(small, "--num_workers=2"), 2, "--num_workers 2"},
		{"infer mode", withArgs(small, "--mode=infer"), 2, "--mode infer"},
		{"eval without checkpoint", withArgs(small, "--mode=eval", "--model_dir="+t.TempDir()), 2, "--mode eval: no checkpoint"},
		{"missing restore_dir", withArgs(small, "--restore_dir="+filepath.Join(dir, "none")), 2, "--restore_dir " + filepath.Join(dir, "none") + " is not a directory"},
		{"both save intervals", withArgs(small, "--save_checkpoints_steps=5", "--save_checkpoints_secs=5"), 2, "save_checkpoints_secs and save_checkpoints_steps"},
		{"corrupt checkpoint", withArgs(small, "--model_dir="+badCkpt), 1, filepath.Join(badCkpt, "model.ckpt-16")},
		{"dnn parameter servers without discovery", withArgs(dnnSmall, "--num_ps=2"), 2, "--num_ps 2: the parameter servers are found through a service discovery"},
		{"dnn workers without parameter servers", withArgs(dnnSmall, "--num_workers=2"), 2, "--num_workers 2: the workers of a job share its tables"},
		{"unknown role", withArgs(dnnSmall, "--role=boss"), 2, `--role "boss"`},
		{"worker 0 as a worker", withArgs(dnnSmall, "--role=worker"), 2, "--role worker: worker 0 is the chief"},
		{"index out of range", withArgs(dnnSmall, "--index=3"), 2, "--index 3: this job has 1 workers"},
		{"primus worker as the chief", withArgs(dnnSmall, "--role=chief", "--num_ps=1", "--num_workers=2", "--model_dir="+t.TempDir(), "--discovery_type=primus",
			`--tf_config={"cluster":{"chief":["127.0.0.1:2220"],"worker":["127.0.0.1:2221"],"ps":["127.0.0.1:2222"]},"task":{"type":"worker","index":0}}`),
			2, "--role chief: the chief is worker 0, this process is worker 1"},
		{"several workers without a model dir", withArgs(dnnSmall, "--num_ps=1", "--num_workers=2", "--discovery_type=zk", "--zk_server=127.0.0.1:1", "--deep_insight_name=j"),
			2, "--num_workers 2: the workers of a job share --model_dir"},
		{"bad hidden layers", withArgs(dnnSmall, "--hidden=64,x"), 2, `--hidden "64,x"`},
		{"no local parameter server", withArgs(dnnSmall, "--local_ps=0"), 2, "--local_ps 0"},
		{"bad ps timeout", withArgs(dnnSmall, "--ps_timeout=0s"), 2, "--ps_timeout 0s"},
		{"sparse feature without a slot", []string{"--train_data=" + train[0], "--eval_data=" + eval[0], "--sparse_features=slot_1,clicks"},
			2, `feature "clicks": dnn needs its fid slot (give clicks:<slot>)`},
		{"dnn on a logreg checkpoint", withArgs(dnnSmall, "--model_dir="+trained), 1, "has no embedding tables"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := start(t, c.args, nil)()
			if r.code != c.code {
				t.Errorf("exit status %d, want %d; stderr:\n%s", r.code, c.code, r.stderr)
			}
			var errLines []string
			for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
				if strings.HasPrefix(l, "train: ") {
					errLines = append(errLines, l)
				}
			}
			t.Logf("exit %d: %q", r.code, errLines)
			if len(errLines) != 1 || !strings.Contains(errLines[0], c.want) {
				t.Errorf("error lines %q, want one containing %q; stderr:\n%s", errLines, c.want, r.stderr)
			}
			if strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, "panic") {
				t.Errorf("stack trace on stderr:\n%s", r.stderr)
			}
			if strings.Contains(r.stdout, "eval auc=") {
				t.Errorf("a failed run printed a result:\n%s", r.stdout)
			}
		})
	}
}

// copyFlipped copies src to dst with the byte at off flipped (a CRC mismatch).
func copyFlipped(t *testing.T, src, dst string, off int) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil || len(b) <= off {
		t.Fatalf("read %s: %d bytes, %v", src, len(b), err)
	}
	b[off] ^= 0xff
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// copyTruncated copies the first n bytes of src to dst.
func copyTruncated(t *testing.T, src, dst string, n int) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil || len(b) <= n {
		t.Fatalf("read %s: %d bytes, %v", src, len(b), err)
	}
	if err := os.WriteFile(dst, b[:n], 0o644); err != nil {
		t.Fatal(err)
	}
}

// probeHook holds a training open for a test: from global step at on, each step waits a little,
// until the test closes stop; then it stops the training (cleanly: the last checkpoint and the
// evaluation follow).
type probeHook struct {
	runhook.Base
	at      int64
	reached chan struct{}
	stop    chan struct{}
	step    atomic.Int64
	once    bool
}

func newProbe(at int64) *probeHook {
	return &probeHook{at: at, reached: make(chan struct{}), stop: make(chan struct{})}
}

func (h *probeHook) AfterRunValues(ctx context.Context, rc *runhook.RunContext, v estimator.RunValues) error {
	h.step.Store(v.GlobalStep)
	if v.GlobalStep < h.at {
		return nil
	}
	if !h.once {
		h.once = true
		close(h.reached)
	}
	select {
	case <-h.stop:
		rc.RequestStop()
	case <-time.After(time.Millisecond):
	case <-ctx.Done():
	}
	return nil
}

// wait waits until the training reaches the probe.
func (h *probeHook) wait(t *testing.T, wait func() result) {
	t.Helper()
	select {
	case <-h.reached:
	case <-time.After(time.Minute):
		close(h.stop)
		r := wait()
		t.Fatalf("the training never reached step %d; exit %d, stderr:\n%s", h.at, r.code, r.stderr)
	}
}

// endless keeps the training going until the probe stops it.
var endless = []string{"--demo_examples=400", "--epochs=100000", "--save_checkpoints_steps=1000000"}

// The controller hook server runs while training does: SaveCheckpoint saves a checkpoint of the
// current step through the estimator, GetTrainingStatus reads the global step.
func TestControllerSaveCheckpoint(t *testing.T) {
	leakcheck.Check(t)
	dir := t.TempDir()
	probe := newProbe(3)
	wait := start(t, withArgs(endless, "--model_dir="+dir), nil, probe)
	probe.wait(t, wait)
	stopped := false
	defer func() {
		if !stopped {
			close(probe.stop)
			wait()
		}
	}()

	client, err := controller.DialModelDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	before := probe.step.Load()
	if _, err := client.SaveCheckpoint(ctx, &pb.SaveCheckpointRequest{}); err != nil {
		t.Fatalf("SaveCheckpoint: %v", err)
	}
	st, err := checkpoint.ReadState(dir, nil)
	if err != nil || st == nil {
		t.Fatalf("no checkpoint state after SaveCheckpoint: %v", err)
	}
	saved, err := checkpoint.StepOf(st.ModelCheckpointPath)
	if err != nil {
		t.Fatal(err)
	}
	if saved < before || saved > probe.step.Load() {
		t.Errorf("SaveCheckpoint saved step %d, want one between %d and %d", saved, before, probe.step.Load())
	}
	status, err := client.GetTrainingStatus(ctx, &pb.GetTrainingStatusRequest{})
	if err != nil {
		t.Fatalf("GetTrainingStatus: %v", err)
	}
	if status.GetGlobalStep() < saved {
		t.Errorf("GetTrainingStatus global step %d, before the saved %d", status.GetGlobalStep(), saved)
	}

	close(probe.stop)
	stopped = true
	r := wait()
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	if _, _, steps := r.final(t); steps < saved {
		t.Errorf("final step %d before the saved %d", steps, saved)
	}
	if !strings.Contains(r.stdout, "  controller   127.0.0.1:") {
		t.Errorf("stdout does not say where the controller listens:\n%s", r.stdout)
	}
}

// With --discovery_type=zk the worker registers /monolith/<deep_insight_name>/worker.0 holding its
// (the controller's) address on a real ZooKeeper while it trains; the node is gone after.
func TestZKDiscovery(t *testing.T) {
	leakcheck.Check(t)
	srv := zktest.Start(t)
	conn, _ := srv.Connect(t, 10*time.Second)
	dir := t.TempDir()
	probe := newProbe(2)
	wait := start(t, withArgs(endless, "--model_dir="+dir, "--discovery_type=zk", "--zk_server="+srv.Addr(),
		"--deep_insight_name=demo_job"), nil, probe)
	probe.wait(t, wait)

	node := "/monolith/demo_job/worker.0"
	got, _, err := conn.Get(node)
	addr, rerr := controller.ReadAddr(dir)
	close(probe.stop)
	r := wait()
	if err != nil || rerr != nil {
		t.Fatalf("while training: get %s: %v; controller address: %v; stderr:\n%s", node, err, rerr, r.stderr)
	}
	if string(got) != addr {
		t.Errorf("%s holds %q, want the controller's address %q", node, got, addr)
	}
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	if ok, _, err := conn.Exists(node); err != nil || ok {
		t.Errorf("after the run: %s exists=%v (%v), want it gone", node, ok, err)
	}
	if !strings.Contains(r.stdout, "  registered   worker.0 at "+addr+" (1 of 1 workers visible)") {
		t.Errorf("stdout does not report the registration:\n%s", r.stdout)
	}
}

// The other discoveries: Primus (TF_CONFIG fixes the address and the role; registration is a
// no-op), MLP (the MLP_* variables fix them) and Consul (the reference's HTTP protocol, against
// consultest's agent, which sees the registration while training runs and the deregistration).
func TestOtherDiscoveries(t *testing.T) {
	leakcheck.Check(t)
	tfConfig := func(typ string, index int) string {
		return fmt.Sprintf(`--tf_config={"cluster":{"chief":["127.0.0.1:2220"],"worker":["127.0.0.1:2221"]},"task":{"type":%q,"index":%d}}`, typ, index)
	}
	t.Run("primus chief", func(t *testing.T) {
		r := runOK(t, withArgs(small, "--model_dir="+t.TempDir(), "--discovery_type=primus", tfConfig("chief", 0))...)
		if !strings.Contains(r.stdout, "  registered   worker.0 at 127.0.0.1:2220 (") {
			t.Errorf("stdout:\n%s", r.stdout)
		}
		r.final(t)
	})
	t.Run("primus worker 1", func(t *testing.T) {
		r := start(t, withArgs(small, "--model_dir="+t.TempDir(), "--discovery_type=primus", tfConfig("worker", 0)), nil)()
		if r.code != 2 || !strings.Contains(r.stderr, "train: primus discovery makes this process worker 1") {
			t.Errorf("exit %d, stderr:\n%s", r.code, r.stderr)
		}
	})
	t.Run("mlp", func(t *testing.T) {
		env := trainenv.Env{"MLP_ROLE": "worker", "MLP_ROLE_INDEX": "0", "MLP_WORKER_NUM": "1", "MLP_PORT": "2230",
			"YARN_INET_ADDR": "127.0.0.1", "MLP_WORKER_0_PRIMARY_HOST": "127.0.0.1", "MLP_WORKER_0_PORT": "2230"}
		wait := start(t, withArgs(small, "--model_dir="+t.TempDir(), "--discovery_type=mlp"), env)
		r := wait()
		if r.code != 0 || !strings.Contains(r.stdout, "  registered   worker.0 at 127.0.0.1:2230 (1 of 1 workers visible)") {
			t.Errorf("exit %d; stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("consul", func(t *testing.T) {
		agent := consultest.Start(t)
		host, port := agent.HostPort()
		env := trainenv.Env{"CONSUL_HTTP_HOST": host, "CONSUL_HTTP_PORT": strconv.Itoa(port)}
		dir := t.TempDir()
		probe := newProbe(2)
		wait := start(t, withArgs(endless, "--model_dir="+dir, "--discovery_type=consul", "--uuid=demo-uuid"), env, probe)
		probe.wait(t, wait)
		n := 0
		for _, req := range agent.Requests() {
			if strings.HasPrefix(req.Path, "/v1/agent/service/register") {
				n++
			}
		}
		close(probe.stop)
		r := wait()
		if r.code != 0 {
			t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
		}
		if n == 0 {
			t.Errorf("no registration reached the agent while training ran: %v", agent.Requests())
		}
		deregistered := false
		for _, req := range agent.Requests() {
			deregistered = deregistered || strings.HasPrefix(req.Path, "/v1/agent/service/deregister/")
		}
		if !deregistered {
			t.Errorf("no deregistration after the run: %v", agent.Requests())
		}
	})
}

// --help lists the RunnerConfig's flags and the command's own; --version prints the build.
func TestHelpAndVersion(t *testing.T) {
	leakcheck.Check(t)
	r := start(t, []string{"--help"}, nil)()
	if r.code != 0 {
		t.Fatalf("--help: exit %d", r.code)
	}
	for _, flag := range []string{"--model_dir=", "--save_checkpoints_steps=", "--checkpoints_max_to_keep=", "--discovery_type=",
		"--restore_dir=", "--log_step_count_steps=", "--train_data=", "--eval_data=", "--steps=", "--max_steps=", "--controller_addr="} {
		if !strings.Contains(r.stdout, flag) {
			t.Errorf("--help lacks %s", flag)
		}
	}
	r = start(t, []string{"--version"}, nil)()
	if r.code != 0 || !strings.HasPrefix(r.stdout, "train ") {
		t.Errorf("--version: exit %d, %q", r.code, r.stdout)
	}
}

// Without --model_dir the demo trains into a new temporary model dir, which it prints and keeps
// (its data dir is removed); a run that fails before its first checkpoint leaves nothing behind.
func TestTemporaryDirectories(t *testing.T) {
	leakcheck.Check(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	r := runOK(t, small...)
	entries, _ := os.ReadDir(tmp)
	if len(entries) != 1 || !strings.HasPrefix(entries[0].Name(), "monolith-train-model-") {
		t.Fatalf("after a demo run %s holds %v, want the model dir alone", tmp, entries)
	}
	modelDir := filepath.Join(tmp, entries[0].Name())
	if !strings.Contains(r.stdout, "run again with --model_dir="+modelDir+" to resume") {
		t.Errorf("stdout does not name the model dir %s:\n%s", modelDir, r.stdout)
	}
	if _, err := os.Stat(filepath.Join(modelDir, "model.ckpt-16.index")); err != nil {
		t.Errorf("no final checkpoint: %v", err)
	}
	if err := os.RemoveAll(modelDir); err != nil {
		t.Fatal(err)
	}
	r = start(t, withArgs(small, "--save_checkpoints_steps=5", "--save_checkpoints_secs=5"), nil)()
	if r.code != 2 {
		t.Fatalf("exit %d, want 2; stderr:\n%s", r.code, r.stderr)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Errorf("after a failed run %s holds %v, want nothing", tmp, entries)
	}
}
