package ckptdir

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/estimator"
	"github.com/monolith-go/monolith/pkg/runner/checkpoint"
)

// model has one variable w of two values; each step adds its batch to w[0] and 1 to w[1].
type model struct{ w []float32 }

func (m *model) Tensors() []estimator.Tensor {
	return []estimator.Tensor{{Name: "w", Shape: []int64{2}, Float32: slices.Clone(m.w)}}
}

func (m *model) Assign(ts []estimator.Tensor) error {
	for _, t := range ts {
		if t.Name == "w" && len(t.Float32) == 2 {
			m.w = slices.Clone(t.Float32)
			return nil
		}
	}
	return errors.New("no tensor w of 2 values")
}

func (m *model) Spec(_ context.Context, mode estimator.Mode) (estimator.EstimatorSpec[float32], error) {
	return estimator.EstimatorSpec[float32]{Mode: mode,
		TrainOp: func(_ context.Context, x float32) (estimator.StepOutput, error) {
			m.w[0] += x
			m.w[1]++
			return estimator.StepOutput{Loss: float64(x), Examples: 1}, nil
		},
		EvalOp: func(_ context.Context, x float32) (estimator.StepOutput, error) {
			return estimator.StepOutput{Loss: float64(m.w[0])}, nil
		}}, nil
}

type input struct{ n int }

func (in *input) Next(context.Context) (float32, error) {
	if in.n == 0 {
		return 0, io.EOF
	}
	in.n--
	return 0.5, nil
}
func (in *input) Close() error { return nil }

func batches(n int) estimator.InputFn[float32] {
	return func(context.Context, estimator.Mode) (estimator.Input[float32], error) { return &input{n: n}, nil }
}

var quiet = slog.New(slog.DiscardHandler)

func train(t *testing.T, dir string, m *model, cfg estimator.Config, steps int64) estimator.TrainResult {
	t.Helper()
	c, err := Open(Options{Dir: dir, MaxToKeep: 2, Now: func() time.Time { return time.Unix(1700000000, 0) }, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Checkpointer, cfg.Log = c, quiet
	e, err := estimator.New[float32](m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Train(context.Background(), batches(100), steps, 0)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func checkpoints(t *testing.T, dir string) []string {
	t.Helper()
	idx, err := filepath.Glob(filepath.Join(dir, "model.ckpt-*.index"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range idx {
		out = append(out, strings.TrimSuffix(filepath.Base(p), ".index"))
	}
	slices.Sort(out)
	return out
}

// Training saves dense checkpoints with the state files and max_to_keep retention; a new process
// on the same directory resumes from the newest, and retention goes on across the restart.
func TestSaveRestoreRetention(t *testing.T) {
	leakcheck.Check(t)
	dir := filepath.Join(t.TempDir(), "model")
	first := &model{w: []float32{0, 0}}
	if res := train(t, dir, first, estimator.Config{SaveCheckpointsSteps: 3}, 10); res.GlobalStep != 10 {
		t.Fatalf("global step %d", res.GlobalStep)
	}
	if got, want := checkpoints(t, dir), []string{"model.ckpt-10", "model.ckpt-9"}; !reflect.DeepEqual(got, want) {
		t.Errorf("checkpoints %v, want %v (max_to_keep 2)", got, want)
	}
	st, err := checkpoint.ReadState(dir, quiet)
	if err != nil || st == nil {
		t.Fatalf("state: %v, %v", st, err)
	}
	if st.ModelCheckpointPath != filepath.Join(dir, "model.ckpt-10") || len(st.AllModelCheckpointPaths) != 2 {
		t.Errorf("state %v", st)
	}
	ms, err := checkpoint.ReadMonolithState(dir, false, quiet)
	if err != nil || ms == nil || ms.GetLastCheckpointSaveTimestamp() != 1700000000 {
		t.Errorf("monolith_checkpoint %v, %v; want a last save time of 1700000000", ms, err)
	}

	second := &model{w: []float32{0, 0}}
	res := train(t, dir, second, estimator.Config{SaveCheckpointsSteps: 3}, 5)
	if res.GlobalStep != 15 || !reflect.DeepEqual(second.w, []float32{7.5, 15}) {
		t.Errorf("resumed: global step %d, w %v; want 15, [7.5 15]", res.GlobalStep, second.w)
	}
	// Saves at 13 and 15 after the restart: 9 and 10 go.
	if got, want := checkpoints(t, dir), []string{"model.ckpt-13", "model.ckpt-15"}; !reflect.DeepEqual(got, want) {
		t.Errorf("checkpoints %v, want %v", got, want)
	}
}

func TestLatestAndErrors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c, err := Open(Options{Dir: dir, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if p, _, ok, err := c.Latest(ctx); ok || err != nil {
		t.Errorf("empty directory: latest %q, %v, %v", p, ok, err)
	}
	p, err := c.Save(ctx, 4, []estimator.Tensor{{Name: "w", Shape: []int64{2}, Float32: []float32{1, 2}}, {Name: estimator.GlobalStepName, Int64: []int64{4}}})
	if err != nil {
		t.Fatal(err)
	}
	if got, step, ok, err := c.Latest(ctx); got != p || step != 4 || !ok || err != nil {
		t.Errorf("latest %q %d %v %v, want %q 4", got, step, ok, err, p)
	}
	ts, err := c.Restore(ctx, p)
	if err != nil || len(ts) != 2 || !reflect.DeepEqual(ts[0].Float32, []float32{1, 2}) || ts[1].Int64[0] != 4 {
		t.Errorf("restored %+v, %v", ts, err)
	}

	// A corrupt checkpoint fails the restore on start, naming the file; training does not start fresh.
	data := p + ".data"
	raw, err := os.ReadFile(data)
	if err != nil {
		t.Fatal(err)
	}
	raw[0] ^= 0xff
	if err := os.WriteFile(data, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := estimator.New[float32](&model{w: []float32{0, 0}}, estimator.Config{Checkpointer: c, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Train(ctx, batches(3), 1, 0); err == nil || !strings.Contains(err.Error(), data) || !strings.Contains(err.Error(), "CRC") {
		t.Errorf("train on a corrupt checkpoint: %v, want an error naming %s", err, data)
	}
	// The state file naming a checkpoint whose files are gone is an error too.
	for _, f := range []string{p + ".data", p + ".index"} {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, _, err := c.Latest(ctx); err == nil || !strings.Contains(err.Error(), p) || errkind.Of(err) != errkind.NotFound {
		t.Errorf("latest with missing files: %v", err)
	}

	// A model directory that cannot be created is an error naming it.
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{Dir: filepath.Join(file, "model")}); err == nil || !strings.Contains(err.Error(), file) {
		t.Errorf("Open under a file: %v", err)
	}
}

// Warm start reads a checkpoint of another directory, named by its prefix or by the directory.
func TestWarmStart(t *testing.T) {
	leakcheck.Check(t)
	other := filepath.Join(t.TempDir(), "other")
	train(t, other, &model{w: []float32{0, 0}}, estimator.Config{}, 4) // w = [2 4] at step 4
	for _, from := range []string{other, filepath.Join(other, "model.ckpt-4")} {
		t.Run(fmt.Sprintf("from %s", filepath.Base(from)), func(t *testing.T) {
			m := &model{w: []float32{0, 0}}
			res := train(t, filepath.Join(t.TempDir(), "model"), m, estimator.Config{WarmStartFrom: from, WarmStartReader: Reader{Log: quiet}}, 1)
			if res.GlobalStep != 1 || !reflect.DeepEqual(m.w, []float32{2.5, 5}) {
				t.Errorf("warm started: global step %d, w %v; want 1, [2.5 5]", res.GlobalStep, m.w)
			}
		})
	}
	m := &model{w: []float32{0, 0}}
	c, err := Open(Options{Dir: t.TempDir(), Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	e, err := estimator.New[float32](m, estimator.Config{Checkpointer: c, WarmStartFrom: filepath.Join(other, "model.ckpt-3"), WarmStartReader: Reader{}, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Train(context.Background(), batches(1), 1, 0); err == nil || !strings.Contains(err.Error(), "model.ckpt-3.index") {
		t.Errorf("warm start from a missing checkpoint: %v", err)
	}
}
