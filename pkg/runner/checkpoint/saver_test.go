package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// denseWriter writes a one-tensor dense checkpoint holding the step.
func denseWriter(_ context.Context, prefix string, step int64) error {
	return WriteDense(prefix, []Tensor{{Name: "global_step", Int64: []int64{step}}, {Name: "w", Shape: []int64{2}, Float32: []float32{float32(step), 0.5}}})
}

// checkpointsOnDisk lists the base names of the checkpoints whose index exists in dir.
func checkpointsOnDisk(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.index"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range m {
		out = append(out, strings.TrimSuffix(filepath.Base(p), ".index"))
	}
	sort.Strings(out)
	return out
}

func bases(paths []string) []string {
	var out []string
	for _, p := range paths {
		out = append(out, filepath.Base(p))
	}
	return out
}

func TestSaverRetention(t *testing.T) {
	tests := []struct {
		name        string
		maxToKeep   int
		exemptOpt   []string // SaverOptions.ExemptPaths
		exemptFile  []string // exempt paths in monolith_checkpoint (relative to the dir)
		steps       []int64
		wantDisk    []string
		wantState   []string // all_model_checkpoint_paths, oldest first
		wantLatest  string
		wantDeleted []string
	}{
		{name: "keeps the newest", maxToKeep: 2, steps: []int64{1, 2, 3, 4},
			wantDisk: []string{"model.ckpt-3", "model.ckpt-4"}, wantState: []string{"model.ckpt-3", "model.ckpt-4"}, wantLatest: "model.ckpt-4"},
		{name: "zero keeps every file and lists the newest", maxToKeep: 0, steps: []int64{1, 2, 3},
			wantDisk: []string{"model.ckpt-1", "model.ckpt-2", "model.ckpt-3"}, wantState: []string{"model.ckpt-3"}, wantLatest: "model.ckpt-3"},
		{name: "exempt in monolith_checkpoint survives", maxToKeep: 2, exemptFile: []string{"model.ckpt-1"}, steps: []int64{1, 2, 3, 4, 5},
			wantDisk: []string{"model.ckpt-1", "model.ckpt-4", "model.ckpt-5"}, wantState: []string{"model.ckpt-1", "model.ckpt-4", "model.ckpt-5"}, wantLatest: "model.ckpt-5"},
		{name: "exempt option survives", maxToKeep: 1, exemptOpt: []string{"/anywhere/model.ckpt-2"}, steps: []int64{1, 2, 3, 4},
			wantDisk: []string{"model.ckpt-2", "model.ckpt-4"}, wantState: []string{"model.ckpt-2", "model.ckpt-4"}, wantLatest: "model.ckpt-4"},
		{name: "saving a step again moves it last", maxToKeep: 3, steps: []int64{1, 2, 1},
			wantDisk: []string{"model.ckpt-1", "model.ckpt-2"}, wantState: []string{"model.ckpt-2", "model.ckpt-1"}, wantLatest: "model.ckpt-1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := NewSaver(SaverOptions{Dir: dir, MaxToKeep: tc.maxToKeep, ExemptPaths: tc.exemptOpt, Write: denseWriter, Log: quiet})
			if err != nil {
				t.Fatal(err)
			}
			for _, step := range tc.steps {
				if _, err := s.Save(context.Background(), step); err != nil {
					t.Fatal(err)
				}
				if step == 1 && tc.exemptFile != nil {
					ms := &MonolithState{ExemptModelCheckpointPaths: tc.exemptFile}
					if err := WriteMonolithState(dir, ms); err != nil {
						t.Fatal(err)
					}
				}
			}
			if got := checkpointsOnDisk(t, dir); !reflect.DeepEqual(got, tc.wantDisk) {
				t.Errorf("on disk %v, want %v", got, tc.wantDisk)
			}
			st, err := ReadState(dir, quiet)
			if err != nil {
				t.Fatal(err)
			}
			if got := bases(st.AllModelCheckpointPaths); !reflect.DeepEqual(got, tc.wantState) {
				t.Errorf("state lists %v, want %v", got, tc.wantState)
			}
			if filepath.Base(st.ModelCheckpointPath) != tc.wantLatest {
				t.Errorf("latest %s, want %s", st.ModelCheckpointPath, tc.wantLatest)
			}
			if _, err := os.Stat(filepath.Join(dir, "model.ckpt-1.data")); (err == nil) != contains(tc.wantDisk, "model.ckpt-1") {
				t.Errorf("model.ckpt-1.data exists: %v, its index: %v", err == nil, contains(tc.wantDisk, "model.ckpt-1"))
			}
		})
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestSaverKeepEvery: with KeepEvery, a checkpoint older than the next keep time is kept.
func TestSaverKeepEvery(t *testing.T) {
	dir := t.TempDir()
	now := time.Unix(1000, 0)
	s, err := NewSaver(SaverOptions{Dir: dir, MaxToKeep: 1, KeepEvery: time.Hour, Write: denseWriter, Log: quiet, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	for i, at := range []time.Duration{0, 90 * time.Minute, 100 * time.Minute, 110 * time.Minute} {
		now = time.Unix(1000, 0).Add(at)
		if _, err := s.Save(context.Background(), int64(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	// Step 1 (at 0) is deleted; step 2 (at 90 min, past the first keep time of 60 min) is kept; step 3
	// is deleted (the next keep time is 120 min).
	if got, want := checkpointsOnDisk(t, dir), []string{"model.ckpt-2", "model.ckpt-4"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("on disk %v, want %v", got, want)
	}
}

func TestSaverErrors(t *testing.T) {
	if _, err := NewSaver(SaverOptions{Dir: "d"}); errkind.Of(err) != errkind.Value {
		t.Errorf("no Write: %v", err)
	}
	s, err := NewSaver(SaverOptions{Dir: filepath.Join(t.TempDir(), "missing"), Write: denseWriter, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Save(context.Background(), 1); errkind.Of(err) != errkind.Value || !strings.Contains(err.Error(), "doesn't exist") {
		t.Errorf("missing directory: %v", err)
	}
	dir := t.TempDir()
	boom := errors.New("disk full")
	s, _ = NewSaver(SaverOptions{Dir: dir, Write: func(context.Context, string, int64) error { return boom }, Log: quiet})
	if _, err := s.Save(context.Background(), 1); !errors.Is(err, boom) {
		t.Errorf("write error: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, StateFile)); err == nil {
		t.Error("a failed write produced a state file")
	}
	// A corrupt monolith_checkpoint stops the save before anything could be deleted.
	s, _ = NewSaver(SaverOptions{Dir: dir, MaxToKeep: 1, Write: denseWriter, Log: quiet})
	for _, step := range []int64{1, 2} {
		if _, err := s.Save(context.Background(), step); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(dir, MonolithStateFile), "exempt_model_checkpoint_paths: [")
	if _, err := s.Save(context.Background(), 3); errkind.Of(err) != errkind.Value || !strings.Contains(err.Error(), MonolithStateFile) {
		t.Errorf("corrupt monolith_checkpoint: %v", err)
	}
	if got := checkpointsOnDisk(t, dir); !contains(got, "model.ckpt-2") {
		t.Errorf("checkpoint deleted despite an unreadable exempt list: %v", got)
	}
}

// TestSaverCrashKeepsOldState: a crash while the state file is replaced leaves the previous
// checkpoint the one restored.
func TestSaverCrashKeepsOldState(t *testing.T) {
	dir := t.TempDir()
	s, _ := NewSaver(SaverOptions{Dir: dir, MaxToKeep: 5, Write: denseWriter, Log: quiet})
	if _, err := s.Save(context.Background(), 10); err != nil {
		t.Fatal(err)
	}
	renameHook = func(tmp, target string) error {
		if filepath.Base(target) == StateFile {
			return fmt.Errorf("killed before renaming %s", tmp)
		}
		return nil
	}
	t.Cleanup(func() { renameHook = nil })
	if _, err := s.Save(context.Background(), 20); err == nil {
		t.Fatal("save survived the crash")
	}
	renameHook = nil
	prefix, step, tensors, err := RestoreDense(dir, "", quiet)
	if err != nil || step != 10 || filepath.Base(prefix) != "model.ckpt-10" || tensors[0].Int64[0] != 10 {
		t.Fatalf("restore after the crash = %s, %d, %v, %v", prefix, step, tensors, err)
	}
}

func TestSaverRecoverLastCheckpoints(t *testing.T) {
	dir := t.TempDir()
	s, _ := NewSaver(SaverOptions{Dir: dir, MaxToKeep: 2, Write: denseWriter, Log: quiet})
	for _, step := range []int64{1, 2} {
		if _, err := s.Save(context.Background(), step); err != nil {
			t.Fatal(err)
		}
	}
	// A restarted job's saver learns the kept checkpoints (one listed is gone) and keeps retaining.
	st, _ := ReadState(dir, quiet)
	restarted, _ := NewSaver(SaverOptions{Dir: dir, MaxToKeep: 2, Write: denseWriter, Log: quiet})
	restarted.RecoverLastCheckpoints(append([]string{filepath.Join(dir, "model.ckpt-0")}, st.AllModelCheckpointPaths...))
	if got := bases(restarted.LastCheckpoints()); !reflect.DeepEqual(got, []string{"model.ckpt-1", "model.ckpt-2"}) {
		t.Fatalf("recovered %v", got)
	}
	if _, err := restarted.Save(context.Background(), 3); err != nil {
		t.Fatal(err)
	}
	if got := checkpointsOnDisk(t, dir); !reflect.DeepEqual(got, []string{"model.ckpt-2", "model.ckpt-3"}) {
		t.Fatalf("on disk %v", got)
	}
}
