package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/pkg/errkind"
)

func TestWriteState(t *testing.T) {
	tests := []struct {
		name     string
		dir      string // "" means the temp dir
		model    string
		all      []string
		relative bool
		want     string // with <d> for the directory
		kind     errkind.Kind
	}{
		{name: "appends the newest", model: "<d>/model.ckpt-2", all: []string{"<d>/model.ckpt-1"},
			want: "model_checkpoint_path: \"<d>/model.ckpt-2\"\nall_model_checkpoint_paths: \"<d>/model.ckpt-1\"\nall_model_checkpoint_paths: \"<d>/model.ckpt-2\"\n"},
		{name: "newest listed already", model: "<d>/model.ckpt-2", all: []string{"<d>/model.ckpt-1", "<d>/model.ckpt-2"},
			want: "model_checkpoint_path: \"<d>/model.ckpt-2\"\nall_model_checkpoint_paths: \"<d>/model.ckpt-1\"\nall_model_checkpoint_paths: \"<d>/model.ckpt-2\"\n"},
		{name: "relative paths", model: "<d>/model.ckpt-2", all: []string{"<d>/model.ckpt-1", "hdfs://ns/x/model.ckpt-0"}, relative: true,
			want: "model_checkpoint_path: \"model.ckpt-2\"\nall_model_checkpoint_paths: \"model.ckpt-1\"\nall_model_checkpoint_paths: \"hdfs://ns/x/model.ckpt-0\"\nall_model_checkpoint_paths: \"model.ckpt-2\"\n"},
		{name: "quotes escaped", model: "<d>/a\"b", want: "model_checkpoint_path: \"<d>/a\\\"b\"\nall_model_checkpoint_paths: \"<d>/a\\\"b\"\n"},
		{name: "conflicts with the state file", model: "<d>/checkpoint", kind: errkind.Runtime},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			sub := func(s string) string { return strings.ReplaceAll(s, "<d>", dir) }
			var all []string
			for _, p := range tc.all {
				all = append(all, sub(p))
			}
			err := WriteState(dir, sub(tc.model), all, WriteStateOptions{RelativePaths: tc.relative})
			if tc.kind != errkind.Unknown {
				if errkind.Of(err) != tc.kind {
					t.Fatalf("err %v, want kind %v", err, tc.kind)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(dir, StateFile))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != sub(tc.want) {
				t.Fatalf("state file:\n%s\nwant:\n%s", got, sub(tc.want))
			}
			st, err := ReadState(dir, quiet)
			if err != nil || st == nil || st.ModelCheckpointPath != sub(tc.model) {
				t.Fatalf("ReadState after WriteState = %v, %v", st, err)
			}
		})
	}
}

// TestWriteStateRelativeDir: with a relative directory, paths under it are written relative to it
// (generate_checkpoint_state_proto).
func TestWriteStateRelativeDir(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := os.Mkdir("model", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteState("model", "model/model.ckpt-3", []string{"model/model.ckpt-1"}, WriteStateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile("model/checkpoint")
	want := "model_checkpoint_path: \"model.ckpt-3\"\nall_model_checkpoint_paths: \"model.ckpt-1\"\nall_model_checkpoint_paths: \"model.ckpt-3\"\n"
	if string(got) != want {
		t.Fatalf("state file:\n%s\nwant:\n%s", got, want)
	}
}

// TestWriteFileAtomicCrash: a crash between writing the temporary file and renaming it leaves the old
// state readable (and the temporary file is not mistaken for the state).
func TestWriteFileAtomicCrash(t *testing.T) {
	dir := t.TempDir()
	if err := WriteState(dir, dir+"/model.ckpt-1", nil, WriteStateOptions{}); err != nil {
		t.Fatal(err)
	}
	crash := errors.New("process killed")
	renameHook = func(tmp, target string) error {
		// A killed process leaves its temporary file behind; keep a copy the deferred cleanup of
		// WriteFileAtomic cannot remove.
		data, err := os.ReadFile(tmp)
		if err != nil {
			return err
		}
		if err := os.WriteFile(tmp+"-left", data, 0o644); err != nil {
			return err
		}
		return crash
	}
	t.Cleanup(func() { renameHook = nil })
	err := WriteState(dir, dir+"/model.ckpt-2", []string{dir + "/model.ckpt-1"}, WriteStateOptions{})
	if !errors.Is(err, crash) {
		t.Fatalf("WriteState during a crash = %v", err)
	}
	st, err := ReadState(dir, quiet)
	if err != nil || st == nil || st.ModelCheckpointPath != dir+"/model.ckpt-1" {
		t.Fatalf("state after the crash = %v, %v; want the old one", st, err)
	}
	renameHook = nil
	if err := WriteState(dir, dir+"/model.ckpt-2", []string{dir + "/model.ckpt-1"}, WriteStateOptions{}); err != nil {
		t.Fatal(err)
	}
	if st, _ := ReadState(dir, quiet); st.ModelCheckpointPath != dir+"/model.ckpt-2" {
		t.Fatalf("state after recovery = %v", st)
	}
}

func TestIsAbs(t *testing.T) {
	for p, want := range map[string]bool{"/a": true, "hdfs:/a": true, "hdfs://ns/a": true, "a/b": false, "": false, "hdfs:a": false, "./a": false} {
		if IsAbs(p) != want {
			t.Errorf("IsAbs(%q) = %v", p, !want)
		}
	}
}

// TestReadStateHDFS: an hdfs:/ path in a state file is absolute, not joined to the directory.
func TestReadStateHDFS(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, StateFile), "model_checkpoint_path: \"hdfs://ns/m/model.ckpt-9\"\nall_model_checkpoint_paths: \"hdfs://ns/m/model.ckpt-9\"\n")
	st, err := ReadState(dir, quiet)
	if err != nil || st.ModelCheckpointPath != "hdfs://ns/m/model.ckpt-9" || st.AllModelCheckpointPaths[0] != "hdfs://ns/m/model.ckpt-9" {
		t.Fatalf("ReadState = %v, %v", st, err)
	}
}

func TestGetStateRetries(t *testing.T) {
	dir := t.TempDir()
	if st, err := GetState(dir, GetStateOptions{Log: quiet}); st != nil || err != nil {
		t.Fatalf("no state file: %v, %v", st, err)
	}
	write(t, filepath.Join(dir, StateFile), "model_checkpoint_path: 'unterminated\n")
	st, err := GetState(dir, GetStateOptions{Log: quiet})
	if st != nil || errkind.Of(err) != errkind.Generic || !strings.Contains(err.Error(), "read ckpt error!") || !strings.Contains(err.Error(), filepath.Join(dir, StateFile)) {
		t.Fatalf("unreadable state: %v, %v; want a Generic read ckpt error naming the file", st, err)
	}
	write(t, filepath.Join(dir, StateFile), "")
	if _, err := GetState(dir, GetStateOptions{Log: quiet}); errkind.Of(err) != errkind.Value {
		t.Fatalf("state without a checkpoint: %v, want kind Value", err)
	}
}

// TestGetStateRetrySucceedsLate: a state file that becomes readable on the last retry is used (the
// reference raises after its fifth retry even when that one succeeded).
func TestGetStateRetrySucceedsLate(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, StateFile)
	write(t, file, "garbage {")
	reads := 0
	readHook = func(name string) {
		if name != file {
			return
		}
		reads++
		if reads == 1+DefaultReadRetries { // the first read and five retries
			write(t, file, "model_checkpoint_path: \"model.ckpt-5\"\n")
		}
	}
	t.Cleanup(func() { readHook = nil })
	st, err := GetState(dir, GetStateOptions{Log: quiet})
	if err != nil || st == nil || st.ModelCheckpointPath != filepath.Join(dir, "model.ckpt-5") {
		t.Fatalf("GetState = %v, %v after %d reads", st, err, reads)
	}
}

func TestGetStateRestoreCkpt(t *testing.T) {
	const state = "model_checkpoint_path: \"model.ckpt-30\"\nall_model_checkpoint_paths: \"model.ckpt-10\"\nall_model_checkpoint_paths: \"model.ckpt-20\"\nall_model_checkpoint_paths: \"model.ckpt-30\"\n"
	tests := []struct {
		name        string
		restore     *string
		mode        string
		marker      bool
		latest      string // LatestFilename
		want        string // model_checkpoint_path's base name
		wantFile    string // the state file's model_checkpoint_path afterwards ("" = unchanged, relative)
		wantMarker  bool
		fileChanged bool
	}{
		{name: "no override", mode: "train", want: "model.ckpt-30"},
		{name: "train applies once", restore: ptr("model.ckpt-10"), mode: "train", want: "model.ckpt-10", wantMarker: true, fileChanged: true},
		{name: "train with a path takes the base name", restore: ptr("/elsewhere/model.ckpt-20"), mode: "train", want: "model.ckpt-20", wantMarker: true, fileChanged: true},
		{name: "train after the marker keeps the newest", restore: ptr("model.ckpt-10"), mode: "train", marker: true, want: "model.ckpt-30", wantMarker: true},
		{name: "eval always applies", restore: ptr("model.ckpt-10"), mode: "eval", marker: true, want: "model.ckpt-10", wantMarker: true},
		{name: "eval without marker writes nothing", restore: ptr("model.ckpt-20"), mode: "eval", want: "model.ckpt-20"},
		{name: "unknown checkpoint is not applied", restore: ptr("model.ckpt-99"), mode: "train", want: "model.ckpt-30"},
		{name: "same as the newest marks in train", restore: ptr("model.ckpt-30"), mode: "train", want: "model.ckpt-30", wantMarker: true, fileChanged: true},
		{name: "other state file name is not overridden", restore: ptr("model.ckpt-10"), mode: "train", latest: "other", want: "model.ckpt-30"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			name := StateFile
			if tc.latest != "" {
				name = tc.latest
			}
			write(t, filepath.Join(dir, name), state)
			if tc.marker {
				write(t, filepath.Join(dir, RestoreCkptMarker), "x")
			}
			st, err := GetState(dir, GetStateOptions{LatestFilename: tc.latest, RestoreCkpt: tc.restore, Mode: tc.mode, Log: quiet})
			if err != nil {
				t.Fatal(err)
			}
			if st.ModelCheckpointPath != filepath.Join(dir, tc.want) {
				t.Fatalf("model_checkpoint_path %s, want %s", st.ModelCheckpointPath, tc.want)
			}
			_, err = os.Stat(filepath.Join(dir, RestoreCkptMarker))
			if (err == nil) != tc.wantMarker {
				t.Fatalf("marker exists: %v, want %v", err == nil, tc.wantMarker)
			}
			got, _ := os.ReadFile(filepath.Join(dir, name))
			if (string(got) != state) != tc.fileChanged {
				t.Fatalf("state file changed: %v, want %v:\n%s", string(got) != state, tc.fileChanged, got)
			}
			if tc.fileChanged {
				if again, _ := ReadState(dir, quiet); again.ModelCheckpointPath != filepath.Join(dir, tc.want) {
					t.Fatalf("rewritten state names %s", again.ModelCheckpointPath)
				}
			}
		})
	}
}

func TestReadMonolithState(t *testing.T) {
	dir := t.TempDir()
	if st, err := ReadMonolithState(dir, true, quiet); st != nil || err != nil {
		t.Fatalf("no file: %v, %v", st, err)
	}
	write(t, filepath.Join(dir, "model.ckpt-1.index"), "{}")
	write(t, filepath.Join(dir, MonolithStateFile), "exempt_model_checkpoint_paths: \"model.ckpt-1\"\nexempt_model_checkpoint_paths: \"/gone/model.ckpt-2\"\nlast_checkpoint_save_timestamp: 7\nbuiltin_hash_table_type: MULTI_CUCKOO_HASH_MAP\n")
	st, err := ReadMonolithState(dir, false, quiet)
	if err != nil || len(st.ExemptModelCheckpointPaths) != 2 || st.ExemptModelCheckpointPaths[0] != "model.ckpt-1" {
		t.Fatalf("raw: %v, %v", st, err)
	}
	st, err = ReadMonolithState(dir, true, quiet)
	if err != nil || len(st.ExemptModelCheckpointPaths) != 1 || st.ExemptModelCheckpointPaths[0] != filepath.Join(dir, "model.ckpt-1") || st.GetLastCheckpointSaveTimestamp() != 7 {
		t.Fatalf("remove invalid: %v, %v", st, err)
	}
	write(t, filepath.Join(dir, MonolithStateFile), "exempt_model_checkpoint_paths: [")
	_, err = ReadMonolithState(dir, true, quiet)
	if errkind.Of(err) != errkind.Value || !strings.Contains(err.Error(), filepath.Join(dir, MonolithStateFile)) {
		t.Fatalf("corrupt file: %v, want a Value error naming it", err)
	}
}
