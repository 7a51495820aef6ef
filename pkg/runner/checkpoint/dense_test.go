package checkpoint

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/monolith-go/monolith/pkg/errkind"
)

func TestDenseRoundTrip(t *testing.T) {
	prefix := filepath.Join(t.TempDir(), "model.ckpt-7")
	in := []Tensor{
		{Name: "global_step", Int64: []int64{7}},
		{Name: "dense/kernel", Shape: []int64{2, 3}, Float32: []float32{1, -2, 3.5, float32(math.Inf(1)), 0, -0.25}},
		{Name: "empty", Shape: []int64{0}, Float32: []float32{}},
		{Name: "weights64", Shape: []int64{3}, Float64: []float64{0.1, -1e300, math.SmallestNonzeroFloat64}},
	}
	if err := WriteDense(prefix, in); err != nil {
		t.Fatal(err)
	}
	out, err := ReadDense(prefix)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out[1], in[1]) || out[0].Int64[0] != 7 || out[0].DType() != Int64 || len(out[2].Float32) != 0 ||
		!reflect.DeepEqual(out[3], in[3]) || out[3].DType() != Float64 {
		t.Fatalf("read back %+v", out)
	}
	if !Exists(prefix) {
		t.Fatal("Exists(prefix) after WriteDense")
	}
}

func TestDenseWriteErrors(t *testing.T) {
	prefix := filepath.Join(t.TempDir(), "c")
	for name, ts := range map[string][]Tensor{
		"duplicate name": {{Name: "a", Float32: []float32{1}}, {Name: "a", Float32: []float32{2}}},
		"shape mismatch": {{Name: "a", Shape: []int64{3}, Float32: []float32{1}}},
		"both dtypes":    {{Name: "a", Float32: []float32{1}, Int64: []int64{1}}},
		"float32 and 64": {{Name: "a", Float32: []float32{1}, Float64: []float64{1}}},
		"empty name":     {{Float32: []float32{1}}},
	} {
		if err := WriteDense(prefix, ts); errkind.Of(err) != errkind.Value {
			t.Errorf("%s: %v, want kind Value", name, err)
		}
	}
}

// TestDenseCorrupt: a damaged or partial checkpoint is an error naming the file, never an empty read.
func TestDenseCorrupt(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, prefix string)
		kind   errkind.Kind
		file   string // suffix of the file the error must name
	}{
		{name: "missing index", damage: func(t *testing.T, p string) { os.Remove(p + ".index") }, kind: errkind.NotFound, file: ".index"},
		{name: "missing data", damage: func(t *testing.T, p string) { os.Remove(p + ".data") }, kind: errkind.NotFound, file: ".data"},
		{name: "index not json", damage: func(t *testing.T, p string) { write(t, p+".index", "{\"format\": ") }, kind: errkind.Value, file: ".index"},
		{name: "index of another format", damage: func(t *testing.T, p string) {
			write(t, p+".index", `{"format": "x", "data_file": "c.data", "data_bytes": 0, "tensors": []}`)
		}, kind: errkind.Value, file: ".index"},
		{name: "truncated data", damage: func(t *testing.T, p string) {
			b, _ := os.ReadFile(p + ".data")
			write(t, p+".data", string(b[:len(b)-3]))
		}, kind: errkind.Value, file: ".data"},
		{name: "flipped byte", damage: func(t *testing.T, p string) {
			b, _ := os.ReadFile(p + ".data")
			b[5] ^= 0x40
			write(t, p+".data", string(b))
		}, kind: errkind.Value, file: ".data"},
		{name: "data file escapes the directory", damage: func(t *testing.T, p string) {
			write(t, p+".index", `{"format": "monolith-go/dense/v1", "data_file": "../c.data", "data_bytes": 0, "tensors": []}`)
		}, kind: errkind.Value, file: ".index"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prefix := filepath.Join(t.TempDir(), "c")
			if err := WriteDense(prefix, []Tensor{{Name: "w", Shape: []int64{4}, Float32: []float32{1, 2, 3, 4}}}); err != nil {
				t.Fatal(err)
			}
			tc.damage(t, prefix)
			out, err := ReadDense(prefix)
			if err == nil || errkind.Of(err) != tc.kind || !strings.Contains(err.Error(), prefix+tc.file) {
				t.Fatalf("ReadDense = %v, %v; want kind %v naming %s", out, err, tc.kind, prefix+tc.file)
			}
		})
	}
}

func TestResolve(t *testing.T) {
	dir := t.TempDir()
	if _, err := Resolve(dir, "", quiet); !errors.Is(err, ErrNoCheckpoint) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("empty dir: %v", err)
	}
	s, _ := NewSaver(SaverOptions{Dir: dir, MaxToKeep: 3, Write: denseWriter, Log: quiet})
	for _, step := range []int64{5, 6} {
		if _, err := s.Save(context.Background(), step); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, restore string
		prep          func(t *testing.T)
		want          string
		wantStep      int64
		kind          errkind.Kind
		file          string
	}{
		{name: "latest", want: "model.ckpt-6", wantStep: 6},
		{name: "named", restore: "model.ckpt-5", want: "model.ckpt-5", wantStep: 5},
		{name: "named path", restore: filepath.Join(dir, "model.ckpt-5"), want: "model.ckpt-5", wantStep: 5},
		{name: "named missing", restore: "model.ckpt-4", kind: errkind.NotFound, file: "model.ckpt-4.index"},
		{name: "latest whose files are gone", prep: func(t *testing.T) { os.Remove(filepath.Join(dir, "model.ckpt-6.index")) }, kind: errkind.NotFound, file: "model.ckpt-6.index"},
		{name: "latest partial", prep: func(t *testing.T) {
			write(t, filepath.Join(dir, "model.ckpt-6.index"), "{")
		}, kind: errkind.Value, file: "model.ckpt-6.index"},
		{name: "corrupt state", prep: func(t *testing.T) { write(t, filepath.Join(dir, StateFile), "model_checkpoint_path: [") }, kind: errkind.Generic, file: StateFile},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.prep != nil {
				tc.prep(t)
			}
			prefix, step, tensors, err := RestoreDense(dir, tc.restore, quiet)
			if tc.kind != errkind.Unknown {
				if errkind.Of(err) != tc.kind || !strings.Contains(err.Error(), tc.file) {
					t.Fatalf("RestoreDense = %v; want kind %v naming %s", err, tc.kind, tc.file)
				}
				return
			}
			if err != nil || filepath.Base(prefix) != tc.want || step != tc.wantStep || tensors[0].Int64[0] != tc.wantStep {
				t.Fatalf("RestoreDense = %s, %d, %v, %v", prefix, step, tensors, err)
			}
		})
	}
}

func TestCopyRestoreState(t *testing.T) {
	tests := []struct {
		name        string
		restoreCkpt *string
		modelState  bool   // model_dir has a checkpoint file already
		modelMono   string // model_dir's monolith_checkpoint ("" = none)
		noState     bool   // restore_dir has no checkpoint file
		wantCkpt    string // "" = nothing written
		wantExempt  []string
	}{
		{name: "newest", wantCkpt: "model.ckpt-20", wantExempt: []string{"model.ckpt-20"}},
		{name: "restore_ckpt", restoreCkpt: ptr("x/model.ckpt-10"), wantCkpt: "model.ckpt-10", wantExempt: []string{"model.ckpt-10"}},
		{name: "unknown restore_ckpt uses the newest", restoreCkpt: ptr("model.ckpt-99"), wantCkpt: "model.ckpt-20", wantExempt: []string{"model.ckpt-20"}},
		{name: "model_dir has a state", modelState: true},
		{name: "restore_dir has none", noState: true},
		{name: "merges model_dir's monolith state", modelMono: "exempt_model_checkpoint_paths: \"/own/model.ckpt-1\"\n", wantCkpt: "model.ckpt-20", wantExempt: []string{"/own/model.ckpt-1", "model.ckpt-20"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			restoreDir, modelDir := t.TempDir(), filepath.Join(t.TempDir(), "model")
			s, _ := NewSaver(SaverOptions{Dir: restoreDir, MaxToKeep: 3, Write: denseWriter, Log: quiet})
			for _, step := range []int64{10, 20} {
				if _, err := s.Save(context.Background(), step); err != nil {
					t.Fatal(err)
				}
			}
			// restore_dir's own monolith state: an exempt path that exists and one that does not.
			if err := WriteMonolithState(restoreDir, &MonolithState{ExemptModelCheckpointPaths: []string{"model.ckpt-10", "gone"}, LastCheckpointSaveTimestamp: ptrInt(5)}); err != nil {
				t.Fatal(err)
			}
			if tc.noState {
				os.Remove(filepath.Join(restoreDir, StateFile))
			}
			if tc.modelState {
				write(t, filepath.Join(modelDir, StateFile), "model_checkpoint_path: \"own\"\n")
			}
			if tc.modelMono != "" {
				write(t, filepath.Join(modelDir, MonolithStateFile), tc.modelMono)
			}
			if err := CopyRestoreState(restoreDir, modelDir, tc.restoreCkpt, quiet); err != nil {
				t.Fatal(err)
			}
			st, err := ReadState(modelDir, quiet)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantCkpt == "" {
				if st != nil && st.ModelCheckpointPath != filepath.Join(modelDir, "own") {
					t.Fatalf("state written: %v", st)
				}
				if _, err := os.Stat(filepath.Join(modelDir, MonolithStateFile)); err == nil {
					t.Fatal("monolith_checkpoint written")
				}
				return
			}
			want := filepath.Join(restoreDir, tc.wantCkpt)
			if st.ModelCheckpointPath != want || !reflect.DeepEqual(st.AllModelCheckpointPaths, []string{want}) {
				t.Fatalf("state %v, want %s alone", st, want)
			}
			ms, err := ReadMonolithState(modelDir, false, quiet)
			if err != nil {
				t.Fatal(err)
			}
			var wantExempt []string
			for _, p := range tc.wantExempt {
				if !filepath.IsAbs(p) {
					p = filepath.Join(restoreDir, p)
				}
				wantExempt = append(wantExempt, p)
			}
			if !reflect.DeepEqual(ms.ExemptModelCheckpointPaths, wantExempt) || ms.GetLastCheckpointSaveTimestamp() != 5 {
				t.Fatalf("monolith state %v, want exempt %v and restore_dir's timestamp", ms, wantExempt)
			}
		})
	}
}

func ptrInt(v int64) *int64 { return &v }

func TestWaitForFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, MonolithStateFile)
	err := WaitForFile(context.Background(), file, "the chief's restore", 50*time.Millisecond, 10*time.Millisecond, quiet)
	if !errors.Is(err, ErrWaitTimeout) || errkind.Of(err) != errkind.Runtime || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "the chief's restore") {
		t.Fatalf("WaitForFile without the file = %v", err)
	}
	done := make(chan error, 1)
	go func() {
		done <- WaitForFile(context.Background(), file, "the chief's restore", 10*time.Second, 5*time.Millisecond, quiet)
	}()
	time.Sleep(20 * time.Millisecond)
	write(t, file, "")
	if err := <-done; err != nil {
		t.Fatalf("WaitForFile after the file appeared = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := WaitForFile(ctx, filepath.Join(dir, "never"), "x", 0, time.Millisecond, quiet); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait = %v", err)
	}
}
