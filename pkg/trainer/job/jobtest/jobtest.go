// Package jobtest helps the tests of training jobs (pkg/trainer/job, cmd/train) look into and set
// up model dirs: check a dnn checkpoint's files, copy a checkpoint into another model dir, spoil
// an input file.
package jobtest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/pkg/runner/checkpoint"
	"github.com/monolith-go/monolith/pkg/trainer/synth"
)

// DemoSlots is how many sparse features (slot_1 .. slot_4) the demo's dnn click log has.
const DemoSlots = 4

// CheckCheckpoint checks that the model dir's newest checkpoint is of step, with its dense files
// and a dump of every table of the demo's click log (DemoSlots) by each of numPS servers.
func CheckCheckpoint(t *testing.T, dir string, step int64, numPS int) {
	t.Helper()
	st, err := checkpoint.ReadState(dir, nil)
	if err != nil || st == nil {
		t.Fatalf("checkpoint state of %s: %v, %v", dir, st, err)
	}
	prefix := filepath.Join(dir, "model.ckpt-"+strconv.FormatInt(step, 10))
	if st.ModelCheckpointPath != prefix {
		t.Fatalf("newest checkpoint %s, want %s", st.ModelCheckpointPath, prefix)
	}
	for _, f := range []string{".data", ".index"} {
		if _, err := os.Stat(prefix + f); err != nil {
			t.Errorf("dense checkpoint: %v", err)
		}
	}
	for slot := 1; slot <= DemoSlots; slot++ {
		for i := 0; i < numPS; i++ {
			f := filepath.Join(prefix+".embeddings", synth.SlotFeature(slot), "ps_"+strconv.Itoa(i)+"_of_"+strconv.Itoa(numPS)+"-00000-of-00001")
			if fi, err := os.Stat(f); err != nil || fi.Size() == 0 {
				t.Errorf("table dump: %v", err)
			}
		}
	}
}

// CopyCheckpoint copies checkpoint step of model dir src (dense files and table dumps) into dst,
// with a state file naming it.
func CopyCheckpoint(t *testing.T, src, dst string, step int64) {
	t.Helper()
	name := "model.ckpt-" + strconv.FormatInt(step, 10)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	err := filepath.Walk(src, func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if !strings.HasPrefix(rel, name+".") {
			return nil
		}
		if fi.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	state := "model_checkpoint_path: \"" + name + "\"\nall_model_checkpoint_paths: \"" + name + "\"\n"
	if err := os.WriteFile(filepath.Join(dst, checkpoint.StateFile), []byte(state), 0o644); err != nil {
		t.Fatal(err)
	}
}

// CopyFlipped copies src to dst with the byte at off flipped (a CRC mismatch).
func CopyFlipped(t *testing.T, src, dst string, off int) {
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
