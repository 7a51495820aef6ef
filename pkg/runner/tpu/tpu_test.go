package tpu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kong"

	tpurunnerspec "github.com/monolith-go/monolith/gen/spec/tpu_runner"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/runner"
	"github.com/monolith-go/monolith/pkg/runner/tbevent"
)

var quiet = slog.New(slog.DiscardHandler)

func i64(v int64) *int64 { return &v }

// defaultFlags parses an empty command line, so tests start from the spec's defaults.
func defaultFlags(t *testing.T, args ...string) tpurunnerspec.TPURunnerFlags {
	t.Helper()
	var f tpurunnerspec.TPURunnerFlags
	p, err := kong.New(&f, kong.Exit(func(int) { t.Fatal("kong exited") }))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f
}

// fakeClock advances only when slept on; onWake runs after each sleep.
type fakeClock struct {
	now    time.Time
	onWake func(now time.Time)
}

func (c *fakeClock) Now() time.Time { return c.now }

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.now = c.now.Add(d)
	if c.onWake != nil {
		c.onWake(c.now)
	}
	return nil
}

type evalCall struct {
	steps int64
	ckpt  string
	input InputFn
}

// fakeEstimator records what the runner asks of it.
type fakeEstimator struct {
	cfg       EstimatorConfig
	trained   []*int64
	trainIn   []InputFn
	trainErr  error
	evals     []evalCall
	evaluate  func(ckpt string) (runner.Logs, error)
	evalClock *fakeClock // advanced by evalTime per evaluation
	evalTime  time.Duration
}

func (e *fakeEstimator) Train(_ context.Context, input InputFn, maxSteps *int64) error {
	e.trained = append(e.trained, maxSteps)
	e.trainIn = append(e.trainIn, input)
	return e.trainErr
}

func (e *fakeEstimator) Evaluate(_ context.Context, input InputFn, steps int64, ckpt string) (runner.Logs, error) {
	e.evals = append(e.evals, evalCall{steps: steps, ckpt: ckpt, input: input})
	if e.evalClock != nil {
		e.evalClock.now = e.evalClock.now.Add(e.evalTime)
	}
	return e.evaluate(ckpt)
}

// fakeTask is a plain task; its input functions say their mode.
type fakeTask struct {
	params  TaskParams
	modes   []ModeKey
	inputs  map[ModeKey]InputFn
	modelFn ModelFn
}

func newFakeTask(p TaskParams) *fakeTask {
	t := &fakeTask{params: p, inputs: map[ModeKey]InputFn{}}
	for _, m := range []ModeKey{ModeKeyTrain, ModeKeyEval} {
		m := m
		t.inputs[m] = func(Params) (any, error) { return string(m), nil }
	}
	t.modelFn = func(features any, mode ModeKey, _ Params) (any, error) {
		return fmt.Sprintf("model(%v, %s)", features, mode), nil
	}
	return t
}

func (t *fakeTask) CreateInputFn(mode ModeKey) (InputFn, error) {
	t.modes = append(t.modes, mode)
	return t.inputs[mode], nil
}

func (t *fakeTask) CreateModelFn() (ModelFn, error) { return t.modelFn, nil }

// fakeEmbeddingTask adds the embedding methods.
type fakeEmbeddingTask struct {
	*fakeTask
	calls            []string
	features, tables map[string]any
}

func (t *fakeEmbeddingTask) InitSlotToEnv() error {
	t.calls = append(t.calls, "init_slot_to_env")
	return nil
}

func (t *fakeEmbeddingTask) CreateFeatureAndTableConfigDict() (map[string]any, map[string]any, error) {
	t.calls = append(t.calls, "create_feature_and_table_config_dict")
	return t.features, t.tables, nil
}

func (t *fakeEmbeddingTask) ProcessFeaturesForCPUTest(features any) (any, error) {
	return fmt.Sprintf("cpu(%v)", features), nil
}

type fakeTPUClient struct {
	calls []string
	err   error
}

func (c *fakeTPUClient) ConfigureTPUVersion(_ context.Context, v string) error {
	c.calls = append(c.calls, "configure "+v)
	return c.err
}

func (c *fakeTPUClient) WaitForHealthy(context.Context) error {
	c.calls = append(c.calls, "wait_for_healthy")
	return nil
}

// harness wires a runner to fakes.
type harness struct {
	est      *fakeEstimator
	client   *fakeTPUClient
	clientAt []string
	hosts    int
	env      Env
}

func newHarness() *harness {
	h := &harness{est: &fakeEstimator{}, client: &fakeTPUClient{}, hosts: 2}
	h.env = Env{
		NewTPUClient: func(_ context.Context, tpu, zone, project string) (TPUClient, error) {
			h.clientAt = []string{tpu, zone, project}
			return h.client, nil
		},
		NumHosts: func(context.Context, string, string, string) (int, error) { return h.hosts, nil },
		NewEstimator: func(_ context.Context, cfg EstimatorConfig) (Estimator, error) {
			h.est.cfg = cfg
			return h.est, nil
		},
		LatestCheckpoint: func(string) (string, error) { return "", nil },
		Logger:           quiet,
	}
	return h
}

func baseParams() TaskParams {
	return TaskParams{
		GradientMultiplier: 0.5,
		Train:              TrainParams{MaxSteps: i64(300), PerReplicaBatchSize: 16},
		Input:              InputParams{EvalExamples: 1000},
		Instantiate:        func(p TaskParams) (Task, error) { return newFakeTask(p), nil },
	}
}

func TestNew(t *testing.T) {
	date := "20200101"
	tests := []struct {
		name     string
		args     []string
		params   func(p *TaskParams)
		wantSave *int64
		wantDate *string
	}{
		{name: "defaults"},
		{name: "flag interval", args: []string{"--save_checkpoints_steps=50"}, wantSave: i64(50)},
		{name: "params win", args: []string{"--save_checkpoints_steps=50"}, params: func(p *TaskParams) { p.Train.SaveCheckpointsSteps = i64(7) }, wantSave: i64(7)},
		{name: "end date replaced", args: []string{"--overwrite_end_date=20211231"}, params: func(p *TaskParams) { p.Train.EndDate = &date }, wantDate: ptr("20211231")},
		{name: "end date kept without the flag", params: func(p *TaskParams) { p.Train.EndDate = &date }, wantDate: ptr("20200101")},
		{name: "no end date param", args: []string{"--overwrite_end_date=20211231"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := baseParams()
			if tc.params != nil {
				tc.params(&p)
			}
			before := fmt.Sprintf("%+v %v", p.Train, optStr(p.Train.EndDate))
			r, err := New(p, defaultFlags(t, tc.args...), newHarness().env)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.SaveCheckpointsSteps(); optInt(got) != optInt(tc.wantSave) {
				t.Fatalf("save_checkpoints_steps %s, want %s", optInt(got), optInt(tc.wantSave))
			}
			if got := r.Params(); got.Accelerator != "tpu" || optStr(got.Train.EndDate) != optStr(tc.wantDate) {
				t.Fatalf("params accelerator %q end_date %s, want tpu %s", got.Accelerator, optStr(got.Train.EndDate), optStr(tc.wantDate))
			}
			if after := fmt.Sprintf("%+v %v", p.Train, optStr(p.Train.EndDate)); after != before || p.Accelerator != "" {
				t.Fatalf("the caller's params changed: %s -> %s", before, after)
			}
			if r.Task() != nil {
				t.Fatal("task instantiated before Run")
			}
		})
	}
}

func ptr(s string) *string { return &s }

func optStr(s *string) string {
	if s == nil {
		return "None"
	}
	return *s
}

func TestNewMissingEnv(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  func(e *Env)
		want string
	}{
		{"estimator", nil, func(e *Env) { e.NewEstimator = nil }, "NewEstimator"},
		{"hosts", nil, func(e *Env) { e.NumHosts = nil }, "NumHosts"},
		{"client", nil, func(e *Env) { e.NewTPUClient = nil }, "NewTPUClient"},
		{"client not needed", []string{"--enable_tpu_version_config=false"}, func(e *Env) { e.NewTPUClient = nil }, ""},
		{"cpu test needs only the estimator", []string{"--cpu_test"}, func(e *Env) { e.NewTPUClient, e.NumHosts = nil, nil }, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := newHarness().env
			tc.env(&env)
			_, err := New(baseParams(), defaultFlags(t, tc.args...), env)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if errkind.Of(err) != errkind.Value || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want a Value error naming %s", err, tc.want)
			}
		})
	}
}

func TestCreateTPUEstimator(t *testing.T) {
	features := map[string]any{"f": 1}
	tables := map[string]any{"t": 2}
	tests := []struct {
		name             string
		args             []string
		params           func(p *TaskParams)
		features, tables map[string]any
		check            func(t *testing.T, h *harness, cfg EstimatorConfig)
	}{
		{
			name: "defaults",
			check: func(t *testing.T, h *harness, cfg EstimatorConfig) {
				want := EstimatorConfig{
					UseTPU: true, IterationsPerLoop: 10000, HostCallEveryNSteps: 500,
					PerHostInputForTraining: "PER_HOST_V2", AllowPerHostV2ParallelGetNext: true,
					DisableMetaOptimizer: true, TrainBatchSize: 256, EvalBatchSize: i64(256),
					Params: Params{EnableHostCall: true, NumReplicas: 16, Accelerator: "tpu", HostCallEveryNSteps: 500},
				}
				cfg.ModelFn = nil
				if !reflect.DeepEqual(cfg, want) {
					t.Fatalf("config\n %+v\nwant\n %+v", cfg, want)
				}
				if fmt.Sprint(h.client.calls) != "[configure nightly wait_for_healthy]" {
					t.Fatalf("TPU client calls %v", h.client.calls)
				}
			},
		},
		{
			name: "flags",
			args: []string{"--tpu=grpc://1.2.3.4:8470", "--tpu_zone=z", "--gcp_project=p", "--model_dir=/m", "--tf_version=2.4.0",
				"--iterations_per_loop=7", "--host_call_every_n_steps=0", "--enable_stopping_signals", "--save_checkpoints_steps=9"},
			params: func(p *TaskParams) { p.Eval.PerReplicaBatchSize = i64(4) },
			check: func(t *testing.T, h *harness, cfg EstimatorConfig) {
				if cfg.TPU != "grpc://1.2.3.4:8470" || cfg.TPUZone != "z" || cfg.GCPProject != "p" || cfg.ModelDir != "/m" {
					t.Fatalf("cluster %+v", cfg)
				}
				if fmt.Sprint(h.clientAt) != "[grpc://1.2.3.4:8470 z p]" || fmt.Sprint(h.client.calls) != "[configure 2.4.0 wait_for_healthy]" {
					t.Fatalf("TPU client at %v calls %v", h.clientAt, h.client.calls)
				}
				if cfg.IterationsPerLoop != 7 || cfg.HostCallEveryNSteps != 100 || !cfg.EndOfStreamFeedHook || optInt(cfg.SaveCheckpointsSteps) != "9" {
					t.Fatalf("loop settings %+v", cfg)
				}
				if *cfg.EvalBatchSize != 64 || cfg.TrainBatchSize != 256 {
					t.Fatalf("batches train %d eval %d", cfg.TrainBatchSize, *cfg.EvalBatchSize)
				}
				want := Params{ModelDir: "/m", EnableHostCall: false, NumReplicas: 16, Accelerator: "tpu", HostCallEveryNSteps: 0, EnableStoppingSignals: true}
				if cfg.Params != want {
					t.Fatalf("params %+v, want %+v", cfg.Params, want)
				}
			},
		},
		{
			name: "no version config", args: []string{"--enable_tpu_version_config=false"},
			check: func(t *testing.T, h *harness, cfg EstimatorConfig) {
				if len(h.client.calls) != 0 || h.clientAt != nil {
					t.Fatalf("TPU client used: %v", h.client.calls)
				}
			},
		},
		{
			name: "embedding", args: []string{"--pipeline_execution", "--partition_strategy=div"}, features: features, tables: tables,
			check: func(t *testing.T, h *harness, cfg EstimatorConfig) {
				e := cfg.Embedding
				if e == nil || e.PartitionStrategy != "div" || !e.PipelineExecutionWithTensorCore || e.Optimizer != "adagrad" || e.LearningRate != 1 {
					t.Fatalf("embedding %+v", e)
				}
				if !reflect.DeepEqual(e.FeatureConfigs, features) || !reflect.DeepEqual(e.TableConfigs, tables) {
					t.Fatalf("configs %v %v", e.FeatureConfigs, e.TableConfigs)
				}
				if got := e.GradientMultiplierFn(12345); got != 0.5 {
					t.Fatalf("gradient multiplier %v", got)
				}
			},
		},
		{
			name: "no embedding without tables", features: features, tables: map[string]any{},
			check: func(t *testing.T, h *harness, cfg EstimatorConfig) {
				if cfg.Embedding != nil {
					t.Fatalf("embedding %+v", cfg.Embedding)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness()
			h.hosts = 2
			p := baseParams()
			if tc.params != nil {
				tc.params(&p)
			}
			r, err := New(p, defaultFlags(t, tc.args...), h.env)
			if err != nil {
				t.Fatal(err)
			}
			modelFn := func(any, ModeKey, Params) (any, error) { return "m", nil }
			est, replicas, err := r.CreateTPUEstimator(context.Background(), modelFn, tc.features, tc.tables)
			if err != nil {
				t.Fatal(err)
			}
			if est != h.est || replicas != 16 {
				t.Fatalf("estimator %v replicas %d", est, replicas)
			}
			if out, _ := h.est.cfg.ModelFn(nil, ModeKeyTrain, Params{}); out != "m" {
				t.Fatal("the model function was not passed through")
			}
			tc.check(t, h, h.est.cfg)
		})
	}
}

func TestCreateTPUEstimatorErrors(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name string
		env  func(h *harness)
	}{
		{"client", func(h *harness) {
			h.env.NewTPUClient = func(context.Context, string, string, string) (TPUClient, error) { return nil, boom }
		}},
		{"configure", func(h *harness) { h.client.err = boom }},
		{"hosts", func(h *harness) {
			h.env.NumHosts = func(context.Context, string, string, string) (int, error) { return 0, boom }
		}},
		{"estimator", func(h *harness) {
			h.env.NewEstimator = func(context.Context, EstimatorConfig) (Estimator, error) { return nil, boom }
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness()
			tc.env(h)
			r, err := New(baseParams(), defaultFlags(t), h.env)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := r.CreateTPUEstimator(context.Background(), nil, nil, nil); !errors.Is(err, boom) {
				t.Fatalf("err %v", err)
			}
			if err := r.Run(context.Background()); !errors.Is(err, boom) {
				t.Fatalf("Run: %v", err)
			}
		})
	}
}

func TestCreateTPUEstimatorOnCPU(t *testing.T) {
	h := newHarness()
	r, err := New(baseParams(), defaultFlags(t, "--cpu_test", "--model_dir=/m", "--host_call_every_n_steps=0", "--enable_stopping_signals", "--pipeline_execution"), h.env)
	if err != nil {
		t.Fatal(err)
	}
	_, replicas, err := r.CreateTPUEstimatorOnCPU(context.Background(), nil, map[string]any{"f": 1}, map[string]any{"t": 1})
	if err != nil {
		t.Fatal(err)
	}
	cfg := h.est.cfg
	emb := cfg.Embedding
	cfg.Embedding, cfg.ModelFn = nil, nil
	want := EstimatorConfig{
		IterationsPerLoop: 10000, HostCallEveryNSteps: 100, PerHostInputForTraining: "PER_HOST_V2",
		AllowPerHostV2ParallelGetNext: true, TrainBatchSize: 128,
		Params: Params{ModelDir: "/m", NumReplicas: 1, Accelerator: "tpu", EnableStoppingSignals: true, CPUTest: true},
	}
	if replicas != 1 || !reflect.DeepEqual(cfg, want) {
		t.Fatalf("replicas %d config\n %+v\nwant\n %+v", replicas, cfg, want)
	}
	if emb == nil || emb.PartitionStrategy != "div" || !emb.PipelineExecutionWithTensorCore {
		t.Fatalf("embedding %+v", emb)
	}
	if len(h.client.calls) != 0 {
		t.Fatal("the CPU estimator touched the TPU")
	}
}

func TestRunTrain(t *testing.T) {
	h := newHarness()
	var task *fakeEmbeddingTask
	var instantiatedWith TaskParams
	p := baseParams()
	p.Instantiate = func(p TaskParams) (Task, error) {
		instantiatedWith = p
		task = &fakeEmbeddingTask{fakeTask: newFakeTask(p), features: map[string]any{"f": 1}, tables: map[string]any{"t": 1}}
		return task, nil
	}
	r, err := New(p, defaultFlags(t, "--model_dir=/m"), h.env)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if instantiatedWith.Accelerator != "tpu" || r.Task() != Task(task) {
		t.Fatalf("task instantiated with accelerator %q", instantiatedWith.Accelerator)
	}
	if fmt.Sprint(task.calls) != "[init_slot_to_env create_feature_and_table_config_dict]" {
		t.Fatalf("embedding calls %v", task.calls)
	}
	if h.est.cfg.Embedding == nil || h.est.cfg.Embedding.PartitionStrategy != "mod" {
		t.Fatalf("embedding config %+v", h.est.cfg.Embedding)
	}
	if len(h.est.trained) != 1 || optInt(h.est.trained[0]) != "300" || len(h.est.evals) != 0 {
		t.Fatalf("trained %v evals %v", h.est.trained, h.est.evals)
	}
	if out, _ := h.est.trainIn[0](Params{}); out != "train" {
		t.Fatalf("train input %v", out)
	}
	if fmt.Sprint(task.modes) != "[train]" {
		t.Fatalf("input modes %v", task.modes)
	}
	boom := errors.New("nan loss")
	h.est.trainErr = boom
	if err := r.Run(context.Background()); !errors.Is(err, boom) {
		t.Fatalf("train error: %v", err)
	}
}

func TestRunCPUTest(t *testing.T) {
	t.Run("embedding task", func(t *testing.T) {
		h := newHarness()
		p := baseParams()
		p.Instantiate = func(p TaskParams) (Task, error) { return &fakeEmbeddingTask{fakeTask: newFakeTask(p)}, nil }
		r, err := New(p, defaultFlags(t, "--cpu_test"), h.env)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		out, err := h.est.cfg.ModelFn("feats", ModeKeyTrain, Params{})
		if err != nil || out != "model(cpu(feats), train)" {
			t.Fatalf("wrapped model fn: %v, %v", out, err)
		}
		if h.est.cfg.UseTPU || h.est.cfg.TrainBatchSize != CPUTrainBatchSize || len(h.est.trained) != 1 {
			t.Fatalf("CPU estimator %+v trained %d", h.est.cfg, len(h.est.trained))
		}
	})
	t.Run("plain task", func(t *testing.T) {
		r, err := New(baseParams(), defaultFlags(t, "--cpu_test"), newHarness().env)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Run(context.Background()); errkind.Of(err) != errkind.Attribute {
			t.Fatalf("err %v, want an Attribute error", err)
		}
	})
	t.Run("eval mode", func(t *testing.T) {
		h := newHarness()
		r, err := New(baseParams(), defaultFlags(t, "--cpu_test", "--mode=eval"), h.env)
		if err != nil {
			t.Fatal(err)
		}
		err = r.Run(context.Background())
		if errkind.Of(err) != errkind.Precondition || err.Error() != "Cpu test can only work with train mode." {
			t.Fatalf("err %v", err)
		}
		if h.est.cfg.TrainBatchSize != 0 {
			t.Fatal("an estimator was built")
		}
	})
}

func TestRunTrainAndEvalIsRejected(t *testing.T) {
	h := newHarness()
	instantiated := false
	p := baseParams()
	p.Instantiate = func(p TaskParams) (Task, error) { instantiated = true; return newFakeTask(p), nil }
	r, err := New(p, defaultFlags(t, "--mode=train_and_eval"), h.env)
	if err != nil {
		t.Fatal(err)
	}
	err = r.Run(context.Background())
	if errkind.Of(err) != errkind.Type || err.Error() != "train_and_eval has not been supported." {
		t.Fatalf("err %v, want the reference's TypeError", err)
	}
	if instantiated || len(h.client.calls) != 0 || h.est.cfg.TrainBatchSize != 0 {
		t.Fatal("train_and_eval did work before failing")
	}
}

// evalSetup is an eval job over a real model dir: checkpoints appear at the given seconds after
// the start, the estimator evaluates each in evalTime, and summaries go to real event files.
type evalSetup struct {
	h        *harness
	clk      *fakeClock
	modelDir string
	r        *Runner
}

type ckptAt struct {
	sec  int
	path string
}

func newEvalSetup(t *testing.T, ckpts []ckptAt, params func(p *TaskParams), args ...string) *evalSetup {
	t.Helper()
	s := &evalSetup{h: newHarness(), modelDir: t.TempDir()}
	start := time.Unix(1700000000, 0)
	s.clk = &fakeClock{now: start}
	s.h.env.Clock = s.clk
	s.h.env.LatestCheckpoint = func(dir string) (string, error) {
		if dir != s.modelDir {
			return "", fmt.Errorf("unexpected dir %s", dir)
		}
		latest := ""
		for _, c := range ckpts {
			if !s.clk.now.Before(start.Add(time.Duration(c.sec) * time.Second)) {
				latest = filepath.Join(dir, c.path)
			}
		}
		return latest, nil
	}
	s.h.env.NewSummaryWriter = func(dir string) (SummaryFileWriter, error) {
		return tbevent.NewWriter(dir, tbevent.Options{Now: s.clk.Now, Hostname: "evalhost"})
	}
	s.h.est.evalClock = s.clk
	s.h.est.evalTime = 3 * time.Second
	s.h.est.evaluate = func(ckpt string) (runner.Logs, error) {
		step := ckpt[strings.LastIndexByte(ckpt, '-')+1:]
		var n float64
		fmt.Sscan(step, &n)
		return runner.Logs{{Tag: "auc", Value: n / 1000}, {Tag: "loss", Value: 1 / (1 + n)}, {Tag: "global_step", Value: n}}, nil
	}
	p := baseParams()
	p.Eval.PerReplicaBatchSize = i64(4)
	if params != nil {
		params(&p)
	}
	r, err := New(p, defaultFlags(t, append([]string{"--mode=eval", "--model_dir=" + s.modelDir}, args...)...), s.h.env)
	if err != nil {
		t.Fatal(err)
	}
	s.r = r
	return s
}

func (s *evalSetup) scalars(t *testing.T) []tbevent.Scalar {
	t.Helper()
	files, err := tbevent.Files(filepath.Join(s.modelDir, "eval"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 {
		t.Fatalf("event files %v, want one", files)
	}
	events, err := tbevent.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	return tbevent.Scalars(events)
}

func TestRunEval(t *testing.T) {
	s := newEvalSetup(t, []ckptAt{{5, "model.ckpt-100"}, {20, "model.ckpt-200"}, {21, "model.ckpt-250"}, {22, "model.ckpt-260"}, {40, "model.ckpt-300"}, {50, "model.ckpt-400"}}, nil)
	if err := s.r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	// 2 hosts x 8 replicas x 4 per replica = 64 per batch; 1000 // 64 = 15 steps. ckpt-100 is found
	// at +5 s and evaluated in 3 s; ckpt-200 at +20 s; when its evaluation ends (+23 s) ckpt-260 is
	// the latest, so ckpt-250 is never evaluated; the loop stops after ckpt-300 (max_steps 300), so
	// ckpt-400 is never looked at.
	var got []string
	for _, e := range s.h.est.evals {
		if e.steps != 15 {
			t.Fatalf("eval steps %d, want 15", e.steps)
		}
		if out, _ := e.input(Params{}); out != "eval" {
			t.Fatalf("eval input %v", out)
		}
		got = append(got, filepath.Base(e.ckpt))
	}
	if fmt.Sprint(got) != "[model.ckpt-100 model.ckpt-200 model.ckpt-260 model.ckpt-300]" {
		t.Fatalf("evaluated %v", got)
	}
	start := time.Unix(1700000000, 0)
	var lines, want []string
	for _, sc := range s.scalars(t) {
		lines = append(lines, fmt.Sprintf("%s@%d=%v +%gs", sc.Tag, sc.Step, sc.Value, sc.WallTime-float64(start.Unix())))
	}
	for _, e := range []struct {
		step int64
		at   int
	}{{100, 8}, {200, 23}, {260, 26}, {300, 43}} {
		n := float64(e.step)
		want = append(want,
			fmt.Sprintf("auc@%d=%v +%ds", e.step, float32(n/1000), e.at),
			fmt.Sprintf("loss@%d=%v +%ds", e.step, float32(1/(1+n)), e.at),
			fmt.Sprintf("global_step@%d=%v +%ds", e.step, float32(n), e.at))
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("summaries\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}

func TestRunEvalSkipsDeletedCheckpoints(t *testing.T) {
	s := newEvalSetup(t, []ckptAt{{1, "model.ckpt-100"}, {2, "model.ckpt-200"}, {10, "model.ckpt-300"}}, nil)
	evaluate := s.h.est.evaluate
	s.h.est.evaluate = func(ckpt string) (runner.Logs, error) {
		if strings.HasSuffix(ckpt, "-200") {
			return nil, errkind.New(errkind.NotFound, "%s.index not found", ckpt)
		}
		return evaluate(ckpt)
	}
	if err := s.r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	var steps []int64
	for _, sc := range s.scalars(t) {
		if sc.Tag == "global_step" {
			steps = append(steps, sc.Step)
		}
	}
	if fmt.Sprint(steps) != "[100 300]" || len(s.h.est.evals) != 3 {
		t.Fatalf("summaries at %v after %d evaluations", steps, len(s.h.est.evals))
	}
}

func TestRunEvalTimesOut(t *testing.T) {
	s := newEvalSetup(t, []ckptAt{{10, "model.ckpt-100"}}, nil)
	if err := s.r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	// ckpt-100 at +10 s, evaluated in 3 s; then 5 h without a new checkpoint.
	if got, want := s.clk.now.Sub(time.Unix(1700000000, 0)), 13*time.Second+EvalTimeout; got != want {
		t.Fatalf("gave up at +%v, want +%v", got, want)
	}
	if n := len(s.scalars(t)); n != 3 {
		t.Fatalf("%d scalars, want the 3 of step 100", n)
	}

	// No checkpoint at all: no event file either.
	s = newEvalSetup(t, nil, nil)
	s.h.env.EvalTimeout = time.Minute
	s.r.env.EvalTimeout = time.Minute
	if err := s.r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	files, err := tbevent.Files(filepath.Join(s.modelDir, "eval"))
	if err != nil || len(files) != 0 {
		t.Fatalf("event files %v, %v", files, err)
	}
}

func TestRunEvalErrors(t *testing.T) {
	boom := errors.New("tpu worker lost")
	tests := []struct {
		name   string
		ckpts  []ckptAt
		params func(p *TaskParams)
		args   []string
		setup  func(s *evalSetup)
		check  func(err error) bool
	}{
		{name: "evaluate fails", ckpts: []ckptAt{{1, "model.ckpt-1"}},
			setup: func(s *evalSetup) {
				s.h.est.evaluate = func(string) (runner.Logs, error) { return nil, boom }
			},
			check: func(err error) bool { return errors.Is(err, boom) }},
		{name: "checkpoint without step", ckpts: []ckptAt{{1, "model.ckpt"}},
			check: func(err error) bool { return errkind.Of(err) == errkind.Value }},
		{name: "no eval batch", params: func(p *TaskParams) { p.Eval.PerReplicaBatchSize = nil },
			check: func(err error) bool { return errkind.Of(err) == errkind.Type }},
		{name: "zero eval batch", params: func(p *TaskParams) { p.Eval.PerReplicaBatchSize = i64(0) },
			check: func(err error) bool { return errkind.Of(err) == errkind.Value }},
		{name: "no max steps", params: func(p *TaskParams) { p.Train.MaxSteps = nil },
			check: func(err error) bool { return errkind.Of(err) == errkind.Type }},
		{name: "no model dir", args: []string{"--model_dir="},
			check: func(err error) bool { return errkind.Of(err) == errkind.Type }},
		{name: "summary writer fails", ckpts: []ckptAt{{1, "model.ckpt-1"}},
			setup: func(s *evalSetup) {
				s.r.env.NewSummaryWriter = func(string) (SummaryFileWriter, error) { return nil, boom }
			},
			check: func(err error) bool { return errors.Is(err, boom) }},
		{name: "discovery fails", ckpts: []ckptAt{{1, "model.ckpt-1"}},
			setup: func(s *evalSetup) {
				s.r.env.LatestCheckpoint = func(string) (string, error) { return "", boom }
			},
			check: func(err error) bool { return errors.Is(err, boom) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newEvalSetup(t, tc.ckpts, tc.params, tc.args...)
			if tc.setup != nil {
				tc.setup(s)
			}
			if err := s.r.Run(context.Background()); !tc.check(err) {
				t.Fatalf("err %v", err)
			}
		})
	}
	// A cancelled context stops the wait.
	s := newEvalSetup(t, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	s.clk.onWake = func(now time.Time) {
		if now.Sub(time.Unix(1700000000, 0)) > time.Minute {
			cancel()
		}
	}
	if err := s.r.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

func TestMainRunsTask(t *testing.T) {
	var buf bytes.Buffer
	h := newHarness()
	h.env.Logger = slog.New(slog.NewTextHandler(&buf, nil))
	reg := RegistryFunc(func(name string) (TaskParams, error) {
		if name != "my_task" {
			return TaskParams{}, errkind.New(errkind.NotFound, "no task %s", name)
		}
		return baseParams(), nil
	})
	if err := Main(context.Background(), defaultFlags(t, "--task=my_task", "--model_dir=/m"), reg, h.env); err != nil {
		t.Fatal(err)
	}
	if len(h.est.trained) != 1 {
		t.Fatal("Main did not train")
	}
	for _, line := range []string{"FLAGS:", "task: my_task", "model_dir: /m", "mode: train", "enable_tpu_version_config: true", "task_param: "} {
		if !strings.Contains(buf.String(), line) {
			t.Fatalf("log lacks %q:\n%s", line, buf.String())
		}
	}
	if err := Main(context.Background(), defaultFlags(t, "--task=other"), reg, h.env); errkind.Of(err) != errkind.NotFound {
		t.Fatalf("unknown task: %v", err)
	}
	if err := Main(context.Background(), defaultFlags(t), nil, h.env); errkind.Of(err) != errkind.Value {
		t.Fatalf("no registry: %v", err)
	}
}

func TestFlags(t *testing.T) {
	f := defaultFlags(t)
	want := tpurunnerspec.TPURunnerFlags{TFVersion: "nightly", Mode: "train", IterationsPerLoop: 10000, EnableTPUVersionConfig: true, HostCallEveryNSteps: 500, PartitionStrategy: "mod"}
	if f != want {
		t.Fatalf("defaults %+v\nwant %+v", f, want)
	}
	f = defaultFlags(t, "--enable_tpu_version_config=false", "--mode", "eval", "--cpu_test", "--save_checkpoints_steps=10")
	if f.EnableTPUVersionConfig || f.Mode != "eval" || !f.CPUTest || f.SaveCheckpointsSteps != 10 {
		t.Fatalf("parsed %+v", f)
	}
	var g tpurunnerspec.TPURunnerFlags
	p, err := kong.New(&g)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Parse([]string{"--mode=predict"}); err == nil {
		t.Fatal("an unknown mode was accepted")
	}
}
