package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/internal/syncbuf"
	"github.com/monolith-go/monolith/pkg/dataset"
	"github.com/monolith-go/monolith/pkg/hooks/runhook"
	"github.com/monolith-go/monolith/pkg/trainenv"
	"github.com/monolith-go/monolith/pkg/trainer/job"
	"github.com/monolith-go/monolith/pkg/trainer/job/jobtest"
	"github.com/monolith-go/monolith/pkg/trainer/synth"
	"github.com/monolith-go/monolith/pkg/trainer/traininput"
)

// dnnSmall is a quick demo of the dnn model: 2000 training examples in batches of 256 are 8 steps
// an epoch.
var dnnSmall = []string{"--demo_examples=2000", "--epochs=1", "--log_step_count_steps=5"}

// small is a quick demo of the logistic regression: 2000 training examples in batches of 128 are
// 16 steps an epoch.
var small = []string{"--model=logreg", "--demo_examples=2000", "--epochs=1", "--batch_size=128", "--log_step_count_steps=5"}

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

// writeData writes a small click log into dir: train-*.tfrecord (2 files) and eval-*.tfrecord.
func writeData(t *testing.T, dir string, c dataset.Compression) (train, eval []string) {
	t.Helper()
	g, err := synth.New(traininput.DemoConfig(7, job.ModelLogreg))
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
	jobtest.CopyFlipped(t, train[0], corrupt, 2000)
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
		{"corrupt record", data(corrupt), 2, "train: --train_data: dataset: " + corrupt + " at offset"},
		{"truncated record", data(truncated), 2, "train: --train_data: dataset: " + truncated + " at offset"},
		{"directory as data", data(dir), 2, "--train_data: dataset: " + dir},
		{"not the schema", withArgs(data(train[0]), "--dense_features=other:3"), 2, `feature "other" (source "other") is missing; the record has dense, slot_1, slot_2, slot_3, slot_4`},
		{"bad schema flag", withArgs(data(train[0]), "--dense_features=dense"), 2, "--dense_features"},
		{"wrong compression", withArgs(data(train[0]), "--compression=gzip"), 2, "--train_data: dataset: " + train[0] + " at offset 0: gzip header"},
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
		{"missing restore_ckpt", withArgs(small, "--model_dir="+trained, "--restore_ckpt=model.ckpt-77"), 2,
			"--restore_ckpt model.ckpt-77: --model_dir " + trained + " has no such checkpoint (its checkpoints: model.ckpt-16)"},
		{"restore_ckpt without checkpoints", withArgs(small, "--model_dir="+t.TempDir(), "--restore_ckpt=model.ckpt-77"), 2,
			"has no such checkpoint (it has none)"},
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
			2, `feature "clicks" needs its fid slot (give clicks:<slot>)`},
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
