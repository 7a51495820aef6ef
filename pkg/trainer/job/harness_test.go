package job_test

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/jobdiscovery"
	"github.com/monolith-go/monolith/internal/syncbuf"
	"github.com/monolith-go/monolith/pkg/estimator"
	"github.com/monolith-go/monolith/pkg/hooks/runhook"
	"github.com/monolith-go/monolith/pkg/runconfig"
	"github.com/monolith-go/monolith/pkg/trainenv"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
	"github.com/monolith-go/monolith/pkg/trainer/job"
	"github.com/monolith-go/monolith/pkg/trainer/synth"
)

// The tests run jobs as cmd/train makes them from its default flags (newConfig), changed where a
// test says, over click logs of the demo's ground truth (clickLog).

// demoClickLog is cmd/train's demo ground truth for model: for logreg the generator's default
// features, for dnn 4 slots whose ids have latent factors.
func demoClickLog(seed int, model string) synth.Config {
	if model == job.ModelLogreg {
		return synth.Config{Seed: uint64(seed), Vocab: 100}
	}
	return synth.Config{Seed: uint64(seed), NumDense: 4, NumSlots: 4, Vocab: 100, LatentDim: 4}
}

// input is a job's input files.
type input struct {
	train, eval []string
	schema      batch.Schema
}

// clickLog writes cmd/train's demo data for model (seed 42): examples training examples in 4
// files (stream 1), a quarter as many evaluation examples in one (stream 2).
func clickLog(t *testing.T, model string, examples int) input {
	t.Helper()
	g, err := synth.New(demoClickLog(42, model))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	train, err := g.Write(synth.WriteOptions{Dir: dir, Name: "train", Files: 4, Examples: examples, Stream: 1})
	if err != nil {
		t.Fatal(err)
	}
	eval, err := g.Write(synth.WriteOptions{Dir: dir, Name: "eval", Files: 1, Examples: examples / 4, Stream: 2})
	if err != nil {
		t.Fatal(err)
	}
	return input{train: train, eval: eval, schema: g.Schema()}
}

// newConfig is the job cmd/train's default flags make, on in read epochs times in batches of
// size, with the run config's values (by field name) over cmd/train's: a local run unless a
// discovery_type is given, a checkpoint every 100 steps. A run changes its config's run config:
// make a config per run.
func newConfig(t *testing.T, model string, in input, epochs, size int, values map[string]any) job.Config {
	t.Helper()
	v := map[string]any{"save_checkpoints_steps": 100}
	if _, ok := values["discovery_type"]; !ok {
		v["is_local"] = true
	}
	maps.Copy(v, values)
	rc, err := runconfig.New(runconfig.Sources{Values: v})
	if err != nil {
		t.Fatal(err)
	}
	slots := make([]int, len(in.schema.Sparse))
	for i, name := range in.schema.Sparse {
		if slots[i], err = strconv.Atoi(strings.TrimPrefix(name, "slot_")); err != nil {
			t.Fatalf("sparse feature %s: not slot_<n>", name)
		}
	}
	return job.Config{
		Run: rc, Model: model,
		Train:  job.Files{Name: "--train_data", Paths: in.train, Epochs: epochs, BatchSize: size, Schema: in.schema},
		Eval:   job.Files{Name: "--eval_data", Paths: in.eval, Epochs: 1, BatchSize: size, Schema: in.schema},
		Schema: in.schema,
		DNN: job.DNNConfig{Slots: slots, EmbeddingDim: 8, EmbeddingLearningRate: 0.3, Hidden: []int{64, 32},
			DenseOptimizer: "adam", DenseLearningRate: 0.01, LocalPS: 2, PSTimeout: 30 * time.Second},
		Logreg:         job.LogregConfig{Optimizer: "adagrad", LearningRate: 0.5, HashBuckets: 65536},
		ControllerAddr: "127.0.0.1:0", StatusAddr: "127.0.0.1:0", DiscoveryTimeout: time.Minute,
	}
}

// values is a run config's values from key, value pairs.
func values(kv ...any) map[string]any {
	m := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

// result is a finished run.
type result struct {
	err error
	// code is the exit status cmd/train gives err: 0 none, 2 a *job.ConfigError or *job.InputError,
	// 1 another.
	code int
	// line is the error as cmd/train reports it (without its "train: "): an input error by itself,
	// on one line.
	line           string
	stdout, stderr string
}

func newResult(err error, stdout, stderr string) result {
	r := result{err: err, stdout: stdout, stderr: stderr}
	var ie *job.InputError
	switch {
	case err == nil:
		return r
	case errors.As(err, new(*job.ConfigError)):
		r.code, r.line = 2, err.Error()
	case errors.As(err, &ie):
		r.code, r.line = 2, ie.Error()
	default:
		r.code, r.line = 1, err.Error()
	}
	r.line = strings.ReplaceAll(r.line, "\n", "; ")
	return r
}

var finalLine = regexp.MustCompile(`^eval auc=(0\.\d{4}|1\.0000)(?: best auc=(?:0\.\d{4}|1\.0000))? loss=(\d+\.\d{4}) steps=(\d+)$`)

// final parses the last line of stdout: the eval AUC, loss and global step.
func (r result) final(t *testing.T) (auc, loss float64, steps int64) {
	t.Helper()
	last := lastLine(r.stdout)
	m := finalLine.FindStringSubmatch(last)
	if m == nil {
		t.Fatalf("last line %q is not 'eval auc=<x> loss=<y> steps=<n>'; stdout:\n%s\nstderr:\n%s", last, r.stdout, r.stderr)
	}
	auc, _ = strconv.ParseFloat(m[1], 64)
	loss, _ = strconv.ParseFloat(m[2], 64)
	steps, _ = strconv.ParseInt(m[3], 10, 64)
	return auc, loss, steps
}

// lastLine is s's last line.
func lastLine(s string) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return l[len(l)-1]
}

// start runs the job in the background with env as its environment and hooks in its loop.
func start(t *testing.T, cfg job.Config, env trainenv.Env, hooks ...runhook.Hook) (wait func() result) {
	t.Helper()
	wait, _, _ = startOut(t, cfg, env, hooks...)
	return wait
}

// startOut is start, also returning the run's stdout and log as they are written.
func startOut(t *testing.T, cfg job.Config, env trainenv.Env, hooks ...runhook.Hook) (wait func() result, stdout, stderr *syncbuf.Buffer) {
	t.Helper()
	if env == nil {
		env = trainenv.Env{}
	}
	stdout, stderr = new(syncbuf.Buffer), new(syncbuf.Buffer)
	log := slog.New(slog.NewTextHandler(stderr, nil))
	cfg.Hooks = append(cfg.Hooks, hooks...)
	var err error
	if cfg.Discovery, err = jobdiscovery.Options(cfg.Run, env, log); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- job.Run(context.Background(), cfg, stdout, log) }()
	return func() result {
		t.Helper()
		select {
		case err := <-done:
			return newResult(err, stdout.String(), stderr.String())
		case <-time.After(2 * time.Minute):
			t.Fatalf("the run did not end; stderr:\n%s", stderr.String())
			return result{}
		}
	}, stdout, stderr
}

// runOK runs the job to its end and requires it to succeed.
func runOK(t *testing.T, cfg job.Config) result {
	t.Helper()
	r := start(t, cfg, nil)()
	if r.err != nil {
		t.Fatalf("exit status %d: %v; stdout:\n%s\nstderr:\n%s", r.code, r.err, r.stdout, r.stderr)
	}
	return r
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

// endless is a dnn job that keeps training until a probe stops it: cmd/train's
// --demo_examples=400 --epochs=100000 --save_checkpoints_steps=1000000.
func endless(t *testing.T, more map[string]any) job.Config {
	t.Helper()
	v := values("save_checkpoints_steps", 1000000)
	maps.Copy(v, more)
	return newConfig(t, job.ModelDNN, clickLog(t, job.ModelDNN, 400), 100000, 256, v)
}
