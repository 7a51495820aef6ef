package estimator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/hooks/hookutil"
	"github.com/monolith-go/monolith/pkg/hooks/runhook"
)

// fakeClock is a clock the test model advances by a fixed amount per train step.
type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time { return c.t }

// testModel has one variable w of two values: each train step adds its batch to w[0] and 1 to
// w[1] (which so counts the steps trained into it), and returns the batch as its loss.
type testModel struct {
	w       []float32
	clock   *fakeClock
	perStep time.Duration
	nanAt   float32 // a batch of this value gives a NaN loss (0: never)
	during  func()  // called in each train step, after the update
}

func newTestModel() *testModel { return &testModel{w: []float32{0, 0}} }

func (m *testModel) Tensors() []Tensor {
	return []Tensor{{Name: "w", Shape: []int64{2}, Float32: slices.Clone(m.w)}}
}

func (m *testModel) Assign(ts []Tensor) error {
	for _, t := range ts {
		if t.Name == "w" {
			if len(t.Float32) != 2 {
				return fmt.Errorf("w has %d values, want 2", len(t.Float32))
			}
			m.w = slices.Clone(t.Float32)
			return nil
		}
	}
	return errors.New("no tensor w")
}

func (m *testModel) Spec(_ context.Context, mode Mode) (EstimatorSpec[float32], error) {
	s := EstimatorSpec[float32]{Mode: mode}
	switch mode {
	case ModeTrain:
		s.TrainOp = func(_ context.Context, x float32) (StepOutput, error) {
			if m.clock != nil {
				m.clock.t = m.clock.t.Add(m.perStep)
			}
			m.w[0] += x
			m.w[1]++
			if m.during != nil {
				m.during()
			}
			loss := float64(x)
			if m.nanAt != 0 && x == m.nanAt {
				loss = nanValue()
			}
			return StepOutput{Loss: loss, Examples: 10}, nil
		}
	case ModeEval:
		s.EvalOp = func(_ context.Context, x float32) (StepOutput, error) {
			return StepOutput{Loss: float64(m.w[0] * x), Examples: 2, Labels: []float32{1, 0}, Predictions: []float32{x, 1 - x}}, nil
		}
		s.EvalMetrics = map[string]Metric{"examples": &countMetric{}}
	}
	return s, nil
}

func nanValue() float64 { var z float64; return z / z }

// countMetric counts the labels it was updated with.
type countMetric struct{ n int }

func (c *countMetric) Update(labels, _ []float32) error { c.n += len(labels); return nil }
func (c *countMetric) Value() float64                   { return float64(c.n) }

// sliceInput yields xs, counting the calls of Next.
type sliceInput struct {
	xs    []float32
	i     int
	calls *int
}

func (s *sliceInput) Next(context.Context) (float32, error) {
	*s.calls++
	if s.i == len(s.xs) {
		return 0, fmt.Errorf("slice input: %w", io.EOF)
	}
	s.i++
	return s.xs[s.i-1], nil
}

func (s *sliceInput) Close() error { return nil }

// ones returns an input of n batches of 1 and a counter of its Next calls (over every opening).
func ones(n int) (InputFn[float32], *int) {
	calls := new(int)
	return func(context.Context, Mode) (Input[float32], error) {
		return &sliceInput{xs: slices.Repeat([]float32{1}, n), calls: calls}, nil
	}, calls
}

func quietLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

func newEstimator(t *testing.T, m *testModel, cfg Config) *Estimator[float32] {
	t.Helper()
	if cfg.Log == nil {
		cfg.Log = quietLog()
	}
	e, err := New[float32](m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestTrainStepSemantics(t *testing.T) {
	tests := []struct {
		name            string
		startStep       int64 // a checkpoint at this global step exists (0: none)
		steps, maxSteps int64
		batches         int // batches the input holds
		wantStep        int64
		wantSkipped     bool
		wantNext        int // Next calls
		wantErr         string
	}{
		{name: "steps from 0", steps: 5, batches: 100, wantStep: 5, wantNext: 5},
		{name: "steps resume from a global step", startStep: 7, steps: 5, batches: 100, wantStep: 12, wantNext: 5},
		{name: "max_steps from 0", maxSteps: 6, batches: 100, wantStep: 6, wantNext: 6},
		{name: "max_steps resume", startStep: 4, maxSteps: 6, batches: 100, wantStep: 6, wantNext: 2},
		{name: "max_steps reached already: skipped", startStep: 6, maxSteps: 6, batches: 100, wantStep: 6, wantSkipped: true},
		{name: "max_steps passed already: skipped", startStep: 9, maxSteps: 6, steps: 3, batches: 100, wantStep: 9, wantSkipped: true},
		{name: "both: steps first", startStep: 2, steps: 3, maxSteps: 10, batches: 100, wantStep: 5, wantNext: 3},
		{name: "both: max_steps first", startStep: 8, steps: 5, maxSteps: 10, batches: 100, wantStep: 10, wantNext: 2},
		{name: "input ends before steps", startStep: 1, steps: 10, batches: 4, wantStep: 5, wantNext: 5},
		{name: "input ends before max_steps", maxSteps: 10, batches: 3, wantStep: 3, wantNext: 4},
		{name: "neither: until the input ends", startStep: 3, batches: 4, wantStep: 7, wantNext: 5},
		{name: "empty input", steps: 3, batches: 0, wantStep: 0, wantNext: 1},
		{name: "negative steps", steps: -1, batches: 1, wantErr: "Must specify steps > 0, given: -1"},
		{name: "negative max_steps", maxSteps: -2, batches: 1, wantErr: "Must specify max_steps > 0, given: -2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			ctx := context.Background()
			ck := &MemoryCheckpointer{}
			if tc.startStep > 0 {
				if _, err := ck.Save(ctx, tc.startStep, []Tensor{{Name: "w", Shape: []int64{2}, Float32: []float32{0, 0}},
					{Name: GlobalStepName, Int64: []int64{tc.startStep}}}); err != nil {
					t.Fatal(err)
				}
			}
			m := newTestModel()
			e := newEstimator(t, m, Config{Checkpointer: ck})
			in, calls := ones(tc.batches)
			res, err := e.Train(ctx, in, tc.steps, tc.maxSteps)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || errkind.Of(err) != errkind.Value {
					t.Fatalf("err = %v, want a Value error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			trained := tc.wantStep - tc.startStep
			if tc.wantSkipped {
				trained = 0
			}
			want := TrainResult{GlobalStep: tc.wantStep, Steps: trained, Skipped: tc.wantSkipped}
			if res != want {
				t.Errorf("result = %+v, want %+v", res, want)
			}
			if e.GlobalStep() != tc.wantStep {
				t.Errorf("GlobalStep() = %d, want %d", e.GlobalStep(), tc.wantStep)
			}
			if *calls != tc.wantNext {
				t.Errorf("input Next called %d times, want %d", *calls, tc.wantNext)
			}
			if int64(m.w[1]) != trained {
				t.Errorf("model trained %v steps, want %d", m.w[1], trained)
			}
		})
	}
}

func TestTrainTwiceContinues(t *testing.T) {
	ctx := context.Background()
	for _, ck := range []*MemoryCheckpointer{nil, {}} {
		name := "without checkpoints"
		if ck != nil {
			name = "with checkpoints"
		}
		t.Run(name, func(t *testing.T) {
			cfg := Config{}
			if ck != nil {
				cfg.Checkpointer = ck
			}
			m := newTestModel()
			e := newEstimator(t, m, cfg)
			in, _ := ones(100)
			if _, err := e.Train(ctx, in, 4, 0); err != nil {
				t.Fatal(err)
			}
			res, err := e.Train(ctx, in, 3, 0)
			if err != nil {
				t.Fatal(err)
			}
			if res.GlobalStep != 7 || m.w[1] != 7 {
				t.Errorf("after 4 then 3 steps: global step %d, steps in the variables %v; want 7, 7", res.GlobalStep, m.w[1])
			}
		})
	}
}

func TestSpecReplace(t *testing.T) {
	newBase := func() EstimatorSpec[float32] {
		return EstimatorSpec[float32]{Mode: ModeEval, HeadName: []string{"ctr"}, EvalMetrics: map[string]Metric{"a": &countMetric{}}}
	}
	tests := []struct {
		name     string
		edit     func(*EstimatorSpec[float32])
		wantHead []string
		wantErr  bool
	}{
		{name: "same mode, other fields", edit: func(s *EstimatorSpec[float32]) {
			s.HeadName[0] = "cvr"
			s.EvalMetrics["b"] = &countMetric{}
			s.Classification = []bool{true}
		}, wantHead: []string{"cvr"}},
		{name: "mode set to the same", edit: func(s *EstimatorSpec[float32]) { s.Mode = ModeEval }, wantHead: []string{"ctr"}},
		{name: "mode changed", edit: func(s *EstimatorSpec[float32]) { s.Mode = ModeTrain; s.HeadName = nil }, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base := newBase()
			got, err := base.Replace(tc.edit)
			if tc.wantErr {
				if err == nil || err.Error() != "mode of EstimatorSpec cannot be changed." || errkind.Of(err) != errkind.Value {
					t.Fatalf("err = %v, want the Value error 'mode of EstimatorSpec cannot be changed.'", err)
				}
				if got.Mode != ModeEval || !reflect.DeepEqual(got.HeadName, []string{"ctr"}) {
					t.Errorf("refused Replace returned %+v, want the spec unchanged", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Mode != ModeEval || !reflect.DeepEqual(got.HeadName, tc.wantHead) {
				t.Errorf("replaced spec %+v, want mode eval, heads %v", got, tc.wantHead)
			}
			if !reflect.DeepEqual(base.HeadName, []string{"ctr"}) || len(base.EvalMetrics) != 1 || base.Classification != nil {
				t.Errorf("Replace changed the original: %+v", base)
			}
		})
	}
}

// recHook records the calls it gets, with the run values of AfterRunValues.
type recHook struct {
	name   string
	events *[]string
}

func (h *recHook) add(ev string) { *h.events = append(*h.events, h.name+"."+ev) }

func (h *recHook) Begin(context.Context) error { h.add("Begin"); return nil }
func (h *recHook) AfterCreateSession(context.Context, *runhook.Session) error {
	h.add("AfterCreateSession")
	return nil
}
func (h *recHook) BeforeRun(_ context.Context, rc *runhook.RunContext) error {
	h.add(fmt.Sprintf("BeforeRun%d", rc.Step))
	return nil
}
func (h *recHook) AfterRun(_ context.Context, rc *runhook.RunContext) error {
	h.add(fmt.Sprintf("AfterRun%d", rc.Step))
	return nil
}
func (h *recHook) AfterRunValues(_ context.Context, _ *runhook.RunContext, v RunValues) error {
	h.add(fmt.Sprintf("Values(%s gs=%d loss=%v n=%d)", v.Mode, v.GlobalStep, v.Output.Loss, v.Output.Examples))
	return nil
}
func (h *recHook) End(_ context.Context, _ *runhook.Session, err error) error {
	h.add(fmt.Sprintf("End(%v)", err))
	return nil
}

// plainHook is a runhook.Hook without AfterRunValues.
type plainHook struct{ rec *recHook }

func (h plainHook) Begin(ctx context.Context) error { return h.rec.Begin(ctx) }
func (h plainHook) AfterCreateSession(ctx context.Context, s *runhook.Session) error {
	return h.rec.AfterCreateSession(ctx, s)
}
func (h plainHook) BeforeRun(ctx context.Context, rc *runhook.RunContext) error {
	return h.rec.BeforeRun(ctx, rc)
}
func (h plainHook) AfterRun(ctx context.Context, rc *runhook.RunContext) error {
	return h.rec.AfterRun(ctx, rc)
}
func (h plainHook) End(ctx context.Context, s *runhook.Session, err error) error {
	return h.rec.End(ctx, s, err)
}

func TestHooksOrderAndRunValues(t *testing.T) {
	leakcheck.Check(t)
	ctx := context.Background()
	var events []string
	a := &recHook{name: "a", events: &events}
	b := plainHook{rec: &recHook{name: "b", events: &events}}
	calls := new(int)
	in := func(context.Context, Mode) (Input[float32], error) {
		return &sliceInput{xs: []float32{0.5, 2}, calls: calls}, nil
	}
	e := newEstimator(t, newTestModel(), Config{})
	if _, err := e.Train(ctx, in, 0, 0, a, b); err != nil {
		t.Fatal(err)
	}
	want := []string{"a.Begin", "b.Begin", "a.AfterCreateSession", "b.AfterCreateSession",
		"a.BeforeRun0", "b.BeforeRun0", "a.AfterRun0", "a.Values(train gs=1 loss=0.5 n=10)", "b.AfterRun0",
		"a.BeforeRun1", "b.BeforeRun1", "a.AfterRun1", "a.Values(train gs=2 loss=2 n=10)", "b.AfterRun1",
		// The input is over: before_run, no after_run (TensorFlow's OutOfRangeError).
		"a.BeforeRun2", "b.BeforeRun2",
		"a.End(<nil>)", "b.End(<nil>)"}
	if !reflect.DeepEqual(events, want) {
		t.Errorf("train events:\n%s\nwant:\n%s", strings.Join(events, "\n"), strings.Join(want, "\n"))
	}

	events = nil
	if _, err := e.Evaluate(ctx, in, 0, a); err != nil {
		t.Fatal(err)
	}
	want = []string{"a.Begin", "a.AfterCreateSession",
		"a.BeforeRun0", "a.AfterRun0", "a.Values(eval gs=2 loss=1.25 n=2)",
		"a.BeforeRun1", "a.AfterRun1", "a.Values(eval gs=2 loss=5 n=2)",
		"a.BeforeRun2", "a.End(<nil>)"}
	if !reflect.DeepEqual(events, want) {
		t.Errorf("eval events:\n%s\nwant:\n%s", strings.Join(events, "\n"), strings.Join(want, "\n"))
	}
}

// failingInput fails its second Next.
type failingInput struct{ n int }

func (f *failingInput) Next(context.Context) (float32, error) {
	f.n++
	if f.n == 2 {
		return 0, errors.New("record 2 is corrupt")
	}
	return 1, nil
}
func (f *failingInput) Close() error { return nil }

func TestTrainErrors(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		model   func() *testModel
		input   InputFn[float32]
		want    string
		wantEnd string
	}{
		{name: "input error", model: newTestModel,
			input: func(context.Context, Mode) (Input[float32], error) { return &failingInput{}, nil },
			want:  "record 2 is corrupt", wantEnd: "estimator: train input"},
		{name: "NaN loss", model: func() *testModel { m := newTestModel(); m.nanAt = 3; return m },
			input: func(context.Context, Mode) (Input[float32], error) {
				return &sliceInput{xs: []float32{1, 3, 1}, calls: new(int)}, nil
			},
			want: "NaN loss during training", wantEnd: "estimator: loss is NaN"},
		{name: "input cannot open", model: newTestModel,
			input: func(context.Context, Mode) (Input[float32], error) { return nil, errors.New("no such file") },
			want:  "open the train input: no such file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			var events []string
			ck := &MemoryCheckpointer{}
			e := newEstimator(t, tc.model(), Config{Checkpointer: ck})
			_, err := e.Train(ctx, tc.input, 0, 0, &recHook{name: "h", events: &events})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
			if tc.wantEnd == "" {
				if len(events) != 0 {
					t.Errorf("hooks ran without an input: %v", events)
				}
			} else if last := events[len(events)-1]; !strings.HasPrefix(last, "h.End(") || !strings.Contains(last, tc.wantEnd) {
				t.Errorf("last hook event %q, want End with the error", last)
			}
			if p := ck.Paths(); len(p) != 0 {
				t.Errorf("a failed training saved %v", p)
			}
		})
	}
}

func TestCheckpointEveryNSteps(t *testing.T) {
	leakcheck.Check(t)
	ctx := context.Background()
	ck := &MemoryCheckpointer{}
	e := newEstimator(t, newTestModel(), Config{Checkpointer: ck, SaveCheckpointsSteps: 3})
	in, _ := ones(100)
	if _, err := e.Train(ctx, in, 10, 0); err != nil {
		t.Fatal(err)
	}
	// No save when the session starts (step 0), every 3 steps, and the last step at the end.
	want := []string{MemoryPath(3), MemoryPath(6), MemoryPath(9), MemoryPath(10)}
	if got := ck.Paths(); !reflect.DeepEqual(got, want) {
		t.Errorf("saved %v, want %v", got, want)
	}
	// Resuming at 10 with 6 more steps: saves at 13, 16 (the timer restarts at the restored step).
	if _, err := e.Train(ctx, in, 6, 0); err != nil {
		t.Fatal(err)
	}
	want = append(want, MemoryPath(13), MemoryPath(16))
	if got := ck.Paths(); !reflect.DeepEqual(got, want) {
		t.Errorf("saved %v, want %v", got, want)
	}
}

func TestCheckpointEveryNSeconds(t *testing.T) {
	leakcheck.Check(t)
	ctx := context.Background()
	clock := &fakeClock{t: time.Unix(1000, 0)}
	m := newTestModel()
	m.clock, m.perStep = clock, 4*time.Second
	ck := &MemoryCheckpointer{}
	e := newEstimator(t, m, Config{Checkpointer: ck, SaveCheckpointsSecs: 10 * time.Second, Now: clock.Now})
	in, _ := ones(100)
	if _, err := e.Train(ctx, in, 8, 0); err != nil {
		t.Fatal(err)
	}
	// Step n ends at 4n s: the first save at step 3 (12 s >= 0+10), then at step 6 (24 s >= 12+10),
	// and step 8 at the end.
	want := []string{MemoryPath(3), MemoryPath(6), MemoryPath(8)}
	if got := ck.Paths(); !reflect.DeepEqual(got, want) {
		t.Errorf("saved %v, want %v", got, want)
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"both save intervals", Config{SaveCheckpointsSteps: 1, SaveCheckpointsSecs: time.Second}, "Can not provide both save_checkpoints_secs and save_checkpoints_steps."},
		{"both log intervals", Config{LogStepCountSteps: 1, LogEvery: time.Second}, "at most one of the log intervals"},
		{"negative interval", Config{SaveCheckpointsSteps: -1}, "must not be negative"},
		{"warm start without a reader", Config{WarmStartFrom: "/x/model.ckpt-1"}, "needs a checkpoint reader"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New[float32](newTestModel(), tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) || errkind.Of(err) != errkind.Value {
				t.Fatalf("err = %v, want a Value error containing %q", err, tc.want)
			}
		})
	}
}

func TestRestoreOnStart(t *testing.T) {
	leakcheck.Check(t)
	ctx := context.Background()
	ck := &MemoryCheckpointer{}
	first := newTestModel()
	e := newEstimator(t, first, Config{Checkpointer: ck, SaveCheckpointsSteps: 2})
	in := func(context.Context, Mode) (Input[float32], error) {
		return &sliceInput{xs: []float32{1, 2, 3, 4, 5, 6, 7, 8, 9}, calls: new(int)}, nil
	}
	if _, err := e.Train(ctx, in, 5, 0); err != nil {
		t.Fatal(err)
	}
	saved := slices.Clone(first.w) // 1+2+3+4+5, 5 steps

	// A new process: a fresh model and estimator on the same model dir.
	second := newTestModel()
	var seen []float32
	probe := &probeHook{before: func() {
		if seen == nil {
			seen = slices.Clone(second.w)
		}
	}}
	e2 := newEstimator(t, second, Config{Checkpointer: ck})
	res, err := e2.Train(ctx, in, 2, 0, probe)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(seen, saved) {
		t.Errorf("variables at the first step after restore %v, want the saved %v", seen, saved)
	}
	if res.GlobalStep != 7 || second.w[1] != 7 || second.w[0] != 15+1+2 {
		t.Errorf("after resuming: global step %d, w %v; want 7, [18 7]", res.GlobalStep, second.w)
	}

	// A checkpoint without a global step is an error, not a fresh start.
	bad := &MemoryCheckpointer{}
	if _, err := bad.Save(ctx, 3, []Tensor{{Name: "w", Shape: []int64{2}, Float32: []float32{1, 1}}}); err != nil {
		t.Fatal(err)
	}
	e3 := newEstimator(t, newTestModel(), Config{Checkpointer: bad})
	if _, err := e3.Train(ctx, in, 1, 0); err == nil || !strings.Contains(err.Error(), "holds no global_step") {
		t.Errorf("restore of a checkpoint without global_step: err = %v", err)
	}
	// A checkpoint the model cannot take is an error naming it.
	if _, err := bad.Save(ctx, 4, []Tensor{{Name: "v", Float32: []float32{1}}, {Name: GlobalStepName, Int64: []int64{4}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e3.Train(ctx, in, 1, 0); err == nil || !strings.Contains(err.Error(), MemoryPath(4)+": no tensor w") {
		t.Errorf("restore of a checkpoint without w: err = %v", err)
	}
}

// probeHook calls before in every BeforeRun.
type probeHook struct {
	runhook.Base
	before func()
}

func (p *probeHook) BeforeRun(context.Context, *runhook.RunContext) error { p.before(); return nil }

func TestWarmStart(t *testing.T) {
	leakcheck.Check(t)
	ctx := context.Background()
	other := &MemoryCheckpointer{}
	path, err := other.Save(ctx, 50, []Tensor{{Name: "w", Shape: []int64{2}, Float32: []float32{100, 50}}, {Name: GlobalStepName, Int64: []int64{50}}})
	if err != nil {
		t.Fatal(err)
	}
	in, _ := ones(100)

	t.Run("empty model dir", func(t *testing.T) {
		m := newTestModel()
		ck := &MemoryCheckpointer{}
		e := newEstimator(t, m, Config{Checkpointer: ck, WarmStartFrom: path, WarmStartReader: other})
		res, err := e.Train(ctx, in, 3, 0)
		if err != nil {
			t.Fatal(err)
		}
		// The variables come from the warm start checkpoint, the global step does not.
		if res.GlobalStep != 3 || !reflect.DeepEqual(m.w, []float32{103, 53}) {
			t.Errorf("global step %d, w %v; want 3, [103 53]", res.GlobalStep, m.w)
		}
		// A restart restores its own checkpoint, not the warm start one.
		m2 := newTestModel()
		e2 := newEstimator(t, m2, Config{Checkpointer: ck, WarmStartFrom: path, WarmStartReader: other})
		if res, err := e2.Train(ctx, in, 1, 0); err != nil || res.GlobalStep != 4 || !reflect.DeepEqual(m2.w, []float32{104, 54}) {
			t.Errorf("restart: %+v, %v, w %v; want global step 4, w [104 54]", res, err, m2.w)
		}
	})
	t.Run("no checkpointer", func(t *testing.T) {
		m := newTestModel()
		e := newEstimator(t, m, Config{WarmStartFrom: path, WarmStartReader: other})
		if _, err := e.Train(ctx, in, 1, 0); err != nil || !reflect.DeepEqual(m.w, []float32{101, 51}) {
			t.Errorf("err %v, w %v; want [101 51]", err, m.w)
		}
	})
	t.Run("missing warm start checkpoint", func(t *testing.T) {
		e := newEstimator(t, newTestModel(), Config{WarmStartFrom: MemoryPath(7), WarmStartReader: other})
		if _, err := e.Train(ctx, in, 1, 0); err == nil || !strings.Contains(err.Error(), "warm start") || errkind.Of(err) != errkind.NotFound {
			t.Errorf("err = %v, want a NotFound warm start error", err)
		}
	})
}

func TestEvaluate(t *testing.T) {
	leakcheck.Check(t)
	ctx := context.Background()
	m := newTestModel()
	m.w[0] = 2
	e := newEstimator(t, m, Config{})
	tests := []struct {
		name      string
		batches   int
		steps     int64
		wantSteps int64
		wantNext  int
	}{
		{"until the input ends", 7, 0, 7, 8},
		{"steps", 7, 3, 3, 3},
		{"steps beyond the input", 2, 5, 2, 3},
		{"empty input", 0, 0, 0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in, calls := ones(tc.batches)
			res, err := e.Evaluate(ctx, in, tc.steps)
			if err != nil {
				t.Fatal(err)
			}
			want := EvalResult{GlobalStep: 0, Steps: tc.wantSteps, Examples: 2 * tc.wantSteps,
				Metrics: map[string]float64{"examples": float64(2 * tc.wantSteps)}}
			if tc.wantSteps > 0 {
				want.Loss = 2
			}
			if !reflect.DeepEqual(res, want) {
				t.Errorf("result %+v, want %+v", res, want)
			}
			if *calls != tc.wantNext {
				t.Errorf("Next called %d times, want %d", *calls, tc.wantNext)
			}
		})
	}
	if _, err := e.Evaluate(ctx, nil, -1); err == nil || errkind.Of(err) != errkind.Value {
		t.Errorf("negative steps: err = %v", err)
	}
}

func TestEvaluateRestoresLatestCheckpoint(t *testing.T) {
	leakcheck.Check(t)
	ctx := context.Background()
	ck := &MemoryCheckpointer{}
	if _, err := ck.Save(ctx, 9, []Tensor{{Name: "w", Shape: []int64{2}, Float32: []float32{3, 9}}, {Name: GlobalStepName, Int64: []int64{9}}}); err != nil {
		t.Fatal(err)
	}
	m := newTestModel()
	e := newEstimator(t, m, Config{Checkpointer: ck})
	in, _ := ones(2)
	res, err := e.Evaluate(ctx, in, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.GlobalStep != 9 || res.Loss != 3 {
		t.Errorf("evaluated global step %d with loss %v, want the checkpoint's: 9, 3", res.GlobalStep, res.Loss)
	}
}

// listener records saves and asks to stop after the save of stopAt.
type listener struct {
	hookutil.BaseListener
	stopAt int64
	events []string
}

func (l *listener) Begin(context.Context) error { l.events = append(l.events, "Begin"); return nil }
func (l *listener) BeforeSave(_ context.Context, s int64) error {
	l.events = append(l.events, fmt.Sprintf("BeforeSave%d", s))
	return nil
}
func (l *listener) AfterSave(_ context.Context, s int64) (bool, error) {
	l.events = append(l.events, fmt.Sprintf("AfterSave%d", s))
	return s == l.stopAt, nil
}
func (l *listener) End(_ context.Context, s int64) error {
	l.events = append(l.events, fmt.Sprintf("End%d", s))
	return nil
}

func TestSaverListeners(t *testing.T) {
	leakcheck.Check(t)
	ctx := context.Background()
	l := &listener{stopAt: 4}
	e := newEstimator(t, newTestModel(), Config{Checkpointer: &MemoryCheckpointer{}, SaveCheckpointsSteps: 2, SaverListeners: []hookutil.SaverListener{l}})
	in, _ := ones(100)
	res, err := e.Train(ctx, in, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.GlobalStep != 4 {
		t.Errorf("a listener asked to stop at step 4; training ended at %d", res.GlobalStep)
	}
	want := []string{"Begin", "BeforeSave2", "AfterSave2", "BeforeSave4", "AfterSave4", "End4"}
	if !reflect.DeepEqual(l.events, want) {
		t.Errorf("listener events %v, want %v", l.events, want)
	}
}

func TestTrainAndEvaluate(t *testing.T) {
	leakcheck.Check(t)
	ctx := context.Background()
	clock := &fakeClock{t: time.Unix(0, 0)}
	m := newTestModel()
	m.clock, m.perStep = clock, time.Second
	ck := &MemoryCheckpointer{}
	e := newEstimator(t, m, Config{Checkpointer: ck, SaveCheckpointsSteps: 2, Now: clock.Now})
	var evals []int64
	evalHook := &probeValues{f: func(v RunValues) {
		if len(evals) == 0 || evals[len(evals)-1] != v.GlobalStep {
			evals = append(evals, v.GlobalStep)
		}
	}}
	train, _ := ones(100)
	eval, _ := ones(3)
	res, err := e.TrainAndEvaluate(ctx, TrainSpec[float32]{Input: train, MaxSteps: 9},
		EvalSpec[float32]{Input: eval, Hooks: []runhook.Hook{evalHook}, Throttle: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// Saves at 2, 4, 6, 8 and 9 (at 2 s, 4 s, ...): evaluations after the saves at 2 (the first),
	// 6 (4 s since 2 s; the save at 4 is 2 s after) and 9 (the end; 8 is only 2 s after 6).
	if want := []int64{2, 6, 9}; !reflect.DeepEqual(evals, want) {
		t.Errorf("evaluated at global steps %v, want %v", evals, want)
	}
	if res.GlobalStep != 9 || res.Steps != 3 || res.Loss != 9 {
		t.Errorf("last evaluation %+v, want global step 9, 3 steps, loss 9", res)
	}
	// A second call has nothing to train but still evaluates (from the restored checkpoint).
	evals = nil
	res, err = e.TrainAndEvaluate(ctx, TrainSpec[float32]{Input: train, MaxSteps: 9}, EvalSpec[float32]{Input: eval, Hooks: []runhook.Hook{evalHook}})
	if err != nil || res.GlobalStep != 9 || !reflect.DeepEqual(evals, []int64{9}) {
		t.Errorf("second call: %+v, %v, evaluations %v", res, err, evals)
	}
}

// probeValues calls f with the values of every step.
type probeValues struct {
	runhook.Base
	f func(RunValues)
}

func (p *probeValues) AfterRunValues(_ context.Context, _ *runhook.RunContext, v RunValues) error {
	p.f(v)
	return nil
}

// recordHandler keeps the records logged through it.
type recordHandler struct {
	mu      sync.Mutex
	records []map[string]any
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	m := map[string]any{"msg": r.Message}
	r.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.Any(); return true })
	h.mu.Lock()
	h.records = append(h.records, m)
	h.mu.Unlock()
	return nil
}
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordHandler) WithGroup(string) slog.Handler      { return h }

func TestProgressLog(t *testing.T) {
	leakcheck.Check(t)
	ctx := context.Background()
	tests := []struct {
		name  string
		cfg   Config
		steps []int64
	}{
		{"every 3 steps", Config{LogStepCountSteps: 3}, []int64{1, 4, 7}},
		{"every 5 s", Config{LogEvery: 5 * time.Second}, []int64{1, 4, 7}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{t: time.Unix(0, 0)}
			m := newTestModel()
			m.clock, m.perStep = clock, 2*time.Second
			h := &recordHandler{}
			tc.cfg.Log, tc.cfg.Now = slog.New(h), clock.Now
			e := newEstimator(t, m, tc.cfg)
			in := func(context.Context, Mode) (Input[float32], error) {
				return &sliceInput{xs: []float32{1, 2, 3, 4, 5, 6, 7, 8}, calls: new(int)}, nil
			}
			if _, err := e.Train(ctx, in, 0, 0); err != nil {
				t.Fatal(err)
			}
			var got []map[string]any
			for _, r := range h.records {
				if r["msg"] == "training progress" {
					got = append(got, r)
				}
			}
			var steps []int64
			for _, r := range got {
				steps = append(steps, r["step"].(int64))
			}
			if !reflect.DeepEqual(steps, tc.steps) {
				t.Fatalf("progress logged at steps %v, want %v (records %v)", steps, tc.steps, got)
			}
			// At step 4: 3 steps (2, 3, 4) of 10 examples in 6 s; their mean loss (2+3+4)/3.
			r := got[1]
			if r["loss"] != 3.0 || r["steps_per_sec"] != 0.5 || r["examples_per_sec"] != 5.0 {
				t.Errorf("progress at step 4: %v, want loss 3, steps_per_sec 0.5, examples_per_sec 5", r)
			}
			if _, ok := got[0]["examples_per_sec"]; ok {
				t.Errorf("the first progress line has a rate: %v", got[0])
			}
		})
	}
}

// countingCheckpointer counts Restore calls.
type countingCheckpointer struct {
	MemoryCheckpointer
	restores int
}

func (c *countingCheckpointer) Restore(ctx context.Context, path string) ([]Tensor, error) {
	c.restores++
	return c.MemoryCheckpointer.Restore(ctx, path)
}

// The variables a model holds after training are the latest checkpoint's: training on or evaluating
// them restores nothing (a restore would round float64 variables through the checkpoint's float32),
// but a checkpoint newer than them is restored.
func TestNoRestoreOfOwnState(t *testing.T) {
	leakcheck.Check(t)
	ctx := context.Background()
	ck := &countingCheckpointer{}
	m := newTestModel()
	e := newEstimator(t, m, Config{Checkpointer: ck})
	in, _ := ones(100)
	if _, err := e.Train(ctx, in, 3, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Evaluate(ctx, in, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Train(ctx, in, 3, 0); err != nil {
		t.Fatal(err)
	}
	if ck.restores != 0 {
		t.Errorf("%d restores of the model's own state", ck.restores)
	}
	if _, err := ck.Save(ctx, 40, []Tensor{{Name: "w", Shape: []int64{2}, Float32: []float32{7, 40}}, {Name: GlobalStepName, Int64: []int64{40}}}); err != nil {
		t.Fatal(err)
	}
	res, err := e.Evaluate(ctx, in, 1)
	if err != nil || ck.restores != 1 || res.GlobalStep != 40 || res.Loss != 7 {
		t.Errorf("after a newer checkpoint: %+v, %v, %d restores; want global step 40, loss 7, 1 restore", res, err, ck.restores)
	}
}

// TriggerSave from another goroutine (the controller's SaveCheckpoint) waits for the running step
// and saves the variables after it, with the listeners told; the loop does not save that step again.
func TestTriggerSaveDuringTraining(t *testing.T) {
	leakcheck.Check(t)
	ctx := context.Background()
	ck := &MemoryCheckpointer{}
	l := &listener{}
	m := newTestModel()
	e := newEstimator(t, m, Config{Checkpointer: ck, SaveCheckpointsSteps: 4, SaverListeners: []hookutil.SaverListener{l}})
	inStep := make(chan struct{})
	release := make(chan struct{})
	m.during = func() {
		if m.w[1] == 3 {
			close(inStep)
			<-release
		}
	}
	saved := make(chan error, 1)
	go func() {
		<-inStep
		go func() { saved <- e.TriggerSave(ctx) }()
		// TriggerSave cannot complete while step 3 runs.
		select {
		case err := <-saved:
			saved <- fmt.Errorf("TriggerSave returned %v during the step", err)
		case <-time.After(50 * time.Millisecond):
		}
		close(release)
	}()
	in, _ := ones(100)
	if _, err := e.Train(ctx, in, 6, 0); err != nil {
		t.Fatal(err)
	}
	if err := <-saved; err != nil {
		t.Fatal(err)
	}
	want := []string{MemoryPath(3), MemoryPath(4), MemoryPath(6)}
	if got := ck.Paths(); !reflect.DeepEqual(got, want) {
		t.Errorf("saved %v, want %v", got, want)
	}
	ts, err := ck.Restore(ctx, MemoryPath(3))
	if err != nil {
		t.Fatal(err)
	}
	if ts[0].Float32[1] != 3 {
		t.Errorf("the triggered checkpoint holds %v steps, want 3 (the variables after step 3)", ts[0].Float32[1])
	}
	wantEvents := []string{"Begin", "BeforeSave3", "AfterSave3", "BeforeSave4", "AfterSave4", "BeforeSave6", "AfterSave6", "End6"}
	if !reflect.DeepEqual(l.events, wantEvents) {
		t.Errorf("listener events %v, want %v", l.events, wantEvents)
	}

	// Outside training: nothing before the model is trained (or restored), then a save of the
	// current variables unless they are saved already.
	ck2 := &MemoryCheckpointer{}
	e2 := newEstimator(t, newTestModel(), Config{Checkpointer: ck2})
	if err := e2.TriggerSave(ctx); err == nil || errkind.Of(err) != errkind.Runtime || len(ck2.Paths()) != 0 {
		t.Errorf("TriggerSave of an untrained model: %v, saved %v", err, ck2.Paths())
	}
	if _, err := e2.Train(ctx, in, 2, 0); err != nil {
		t.Fatal(err)
	}
	ck2.saved = ck2.saved[:0] // forget the end of training's save: TriggerSave must not repeat it
	if err := e2.TriggerSave(ctx); err != nil || len(ck2.Paths()) != 0 {
		t.Errorf("TriggerSave of the saved step 2: %v, saved %v", err, ck2.Paths())
	}
	e3 := newEstimator(t, newTestModel(), Config{Checkpointer: ck2})
	if err := e3.TriggerSave(ctx); err == nil {
		t.Error("TriggerSave before restoring: saved")
	}
	if err := newEstimator(t, newTestModel(), Config{}).TriggerSave(ctx); err == nil || errkind.Of(err) != errkind.Runtime {
		t.Errorf("TriggerSave without a checkpointer: %v", err)
	}
}

// triggerHook calls TriggerSave from another goroutine in BeforeRun of iteration at and waits
// until the request is queued.
type triggerHook struct {
	runhook.Base
	e   *Estimator[float32]
	at  int64
	err chan error
}

func (h *triggerHook) BeforeRun(ctx context.Context, rc *runhook.RunContext) error {
	if rc.Step != h.at {
		return nil
	}
	go func() { h.err <- h.e.TriggerSave(ctx) }()
	for {
		h.e.mu.Lock()
		n := len(h.e.saveRequests)
		h.e.mu.Unlock()
		if n > 0 {
			return nil
		}
		time.Sleep(time.Millisecond)
	}
}

// A save triggered during a training that then fails returns the failure; one triggered when the
// input ends is served by the end of training's save.
func TestTriggerSaveAtTheEnd(t *testing.T) {
	leakcheck.Check(t)
	ctx := context.Background()
	tests := []struct {
		name    string
		input   InputFn[float32]
		wantErr string
		want    []string
	}{
		{name: "training fails", input: func(context.Context, Mode) (Input[float32], error) { return &failingInput{}, nil },
			wantErr: "training failed before the triggered save"},
		{name: "input ends", input: func(context.Context, Mode) (Input[float32], error) {
			return &sliceInput{xs: []float32{1}, calls: new(int)}, nil
		}, want: []string{MemoryPath(1)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ck := &MemoryCheckpointer{}
			e := newEstimator(t, newTestModel(), Config{Checkpointer: ck})
			h := &triggerHook{e: e, at: 1, err: make(chan error, 1)}
			_, trainErr := e.Train(ctx, tc.input, 0, 0, h)
			err := <-h.err
			if tc.wantErr != "" {
				if trainErr == nil || err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("train: %v; triggered save: %v, want one containing %q", trainErr, err, tc.wantErr)
				}
				return
			}
			if trainErr != nil || err != nil {
				t.Fatalf("train: %v; triggered save: %v", trainErr, err)
			}
			if got := ck.Paths(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("saved %v, want %v", got, tc.want)
			}
		})
	}
}
