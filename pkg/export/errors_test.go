package export

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"

	"google.golang.org/protobuf/proto"

	hashtablepb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/resource"
	"github.com/monolith-go/monolith/pkg/runner/checkpoint"
	"github.com/monolith-go/monolith/pkg/tfrecord"
)

// copyDir copies the tree src to dst.
func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		if e.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(out, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// snapshot is every path under dir but the lock file, with a hash of each file's bytes.
func snapshot(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && p == dir {
			return fs.SkipAll
		}
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == lockFile {
			return nil
		}
		if e.IsDir() {
			out[rel] = "dir"
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[rel] = fmt.Sprintf("%x", sha256.Sum256(data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameSnapshot(t testing.TB, what string, got, want map[string]string) {
	t.Helper()
	var diff []string
	for k, v := range got {
		if want[k] != v {
			diff = append(diff, "+"+k)
		}
	}
	for k, v := range want {
		if got[k] != v {
			diff = append(diff, "-"+k)
		}
	}
	sort.Strings(diff)
	if len(diff) > 0 {
		t.Errorf("%s: the export base changed: %v", what, diff)
	}
}

// TestBadCheckpoint: a missing or corrupt checkpoint, or one the model spec does not fit, is an
// error of the right kind naming the path at fault, and nothing is written.
func TestBadCheckpoint(t *testing.T) {
	leakcheck.Check(t)
	ctx := tctx(t)
	j := newJob(t, 2, []int{8})
	j.train(ctx, 10)
	j.save(ctx)
	const prefix = "model.ckpt-10"
	dumpFile := filepath.Join(prefix+EmbeddingsSuffix, "slot_2", "ps_1_of_2-00000-of-00001")
	noneSpec := j.spec
	noneSpec.Interaction = "none"
	extraTable := j.spec
	extraTable.SparseFeatures = append(append([]SparseFeature(nil), j.spec.SparseFeatures...), SparseFeature{Name: "slot_9", Slot: 9, Table: "slot_9", Dim: 4, Pooling: "sum"})
	otherHidden := j.spec
	otherHidden.Hidden = []int{16}
	for _, tc := range []struct {
		name   string
		spoil  func(dir string) // changes the copied model dir
		ckpt   string
		spec   *ModelSpec
		kind   errkind.Kind
		naming string // relative to the model dir; "." the model dir
		why    string
	}{
		{name: "no directory", spoil: func(dir string) { os.RemoveAll(dir) }, kind: errkind.NotFound, naming: ".", why: "does not exist"},
		{name: "no checkpoint", spoil: func(dir string) {
			os.Remove(filepath.Join(dir, checkpoint.StateFile))
		}, kind: errkind.NotFound, naming: ".", why: "no checkpoint"},
		{name: "named checkpoint missing", ckpt: "model.ckpt-99", kind: errkind.NotFound, naming: "model.ckpt-99", why: "no such checkpoint"},
		{name: "dense data corrupt", spoil: func(dir string) { flipByte(t, filepath.Join(dir, prefix+".data"), 20) },
			kind: errkind.Value, naming: prefix + ".data", why: "CRC-32C"},
		{name: "dense data truncated", spoil: func(dir string) { truncate(t, filepath.Join(dir, prefix+".data"), 100) },
			kind: errkind.Value, naming: prefix + ".data", why: "partial"},
		{name: "dense index missing", spoil: func(dir string) { os.Remove(filepath.Join(dir, prefix+".index")) },
			kind: errkind.NotFound, naming: prefix, why: "missing"},
		{name: "no tables' dump", spoil: func(dir string) { os.RemoveAll(filepath.Join(dir, prefix+EmbeddingsSuffix)) },
			kind: errkind.NotFound, naming: prefix + EmbeddingsSuffix, why: "no embedding tables"},
		{name: "a server's dump missing", spoil: func(dir string) { os.Remove(filepath.Join(dir, dumpFile)) },
			kind: errkind.NotFound, naming: filepath.Join(prefix+EmbeddingsSuffix, "slot_2", "ps_1_of_2"), why: "no valid sharded files"},
		{name: "a table's dump missing", spoil: func(dir string) { os.RemoveAll(filepath.Join(dir, prefix+EmbeddingsSuffix, "slot_3")) },
			kind: errkind.NotFound, naming: filepath.Join(prefix+EmbeddingsSuffix, "slot_3"), why: "has no table"},
		{name: "dump record corrupt", spoil: func(dir string) { flipByte(t, filepath.Join(dir, dumpFile), 30) },
			kind: errkind.Value, naming: dumpFile, why: "corrupted record"},
		{name: "dump truncated", spoil: func(dir string) { truncate(t, filepath.Join(dir, dumpFile), 7) },
			kind: errkind.Value, naming: dumpFile, why: "truncated record"},
		{name: "spec: other hidden layers", spec: &otherHidden, kind: errkind.Value, naming: prefix, why: "does not fit the model spec"},
		{name: "spec: other interaction", spec: &noneSpec, kind: errkind.Value, naming: prefix, why: "does not fit the model spec"},
		{name: "spec: a table not dumped", spec: &extraTable, kind: errkind.Value, naming: prefix, why: "does not fit the model spec"},
		{name: "dump entries of another dimension", spoil: func(dir string) { writeDump(t, filepath.Join(dir, dumpFile), 5) },
			kind: errkind.Value, naming: dumpFile, why: "has 5 numbers, table \"slot_2\" has dimension 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "model")
			copyDir(t, j.modelDir, dir)
			// The state file names the checkpoints by absolute path: point it at the copy.
			if err := checkpoint.WriteState(dir, filepath.Join(dir, prefix), nil, checkpoint.WriteStateOptions{}); err != nil {
				t.Fatal(err)
			}
			if tc.spoil != nil {
				tc.spoil(dir)
			}
			spec := j.spec
			if tc.spec != nil {
				spec = *tc.spec
			}
			base := filepath.Join(t.TempDir(), "export")
			_, err := Export(ctx, Options{ModelDir: dir, Checkpoint: tc.ckpt, ExportBase: base, Spec: spec, Log: quiet})
			naming := filepath.Join(dir, tc.naming)
			if err == nil || errkind.Of(err) != tc.kind || !strings.Contains(err.Error(), naming) || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("error %v (kind %v); want kind %v naming %s, saying %q", err, errkind.Of(err), tc.kind, naming, tc.why)
			}
			if got := snapshot(t, base); len(got) > 1 { // the base itself at most
				t.Errorf("written: %v", got)
			}
		})
	}
}

// writeDump replaces file by a dump of one entry of dim numbers.
func writeDump(t testing.TB, file string, dim int) {
	t.Helper()
	id := int64(2)
	data, err := proto.Marshal(&hashtablepb.EntryDump{Id: &id, Num: make([]float32, dim)})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := tfrecord.NewWriter(&b).Write(data); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func flipByte(t testing.TB, file string, off int64) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	data[off] ^= 0x5a
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func truncate(t testing.TB, file string, cut int64) {
	t.Helper()
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(file, fi.Size()-cut); err != nil {
		t.Fatal(err)
	}
}

// fullDisk is a file system that takes budget bytes, then fails writes with ENOSPC: a disk
// filling up during an export.
type fullDisk struct {
	mu     sync.Mutex
	budget int64 // < 0: no limit (counting)
	used   int64
}

func (d *fullDisk) Create(name string) (writableFile, error) {
	d.mu.Lock()
	full := d.budget >= 0 && d.used >= d.budget
	d.mu.Unlock()
	if full {
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.ENOSPC}
	}
	f, err := osFS{}.Create(name)
	if err != nil {
		return nil, err
	}
	return &diskFile{f: f, d: d, name: name}, nil
}

type diskFile struct {
	f    writableFile
	d    *fullDisk
	name string
}

func (f *diskFile) Write(p []byte) (int, error) {
	f.d.mu.Lock()
	n := int64(len(p))
	if f.d.budget >= 0 {
		n = max(0, min(n, f.d.budget-f.d.used))
	}
	f.d.used += n
	f.d.mu.Unlock()
	w, err := f.f.Write(p[:n])
	if err == nil && int64(w) < int64(len(p)) {
		err = &fs.PathError{Op: "write", Path: f.name, Err: syscall.ENOSPC}
	}
	return w, err
}

func (f *diskFile) Sync() error  { return f.f.Sync() }
func (f *diskFile) Close() error { return f.f.Close() }

var _ io.Writer = (*diskFile)(nil)

// TestFullDisk: a disk that fills up at any point of an export (tables, manifests, the saved
// model, the state files) fails it with ENOSPC naming the file, and leaves the export base as it
// was: the earlier version served, its state files unchanged, no temporary directory.
func TestFullDisk(t *testing.T) {
	leakcheck.Check(t)
	ctx := tctx(t)
	j := newJob(t, 2, []int{8})
	j.train(ctx, 5)
	j.save(ctx)
	j.train(ctx, 5)
	j.save(ctx)
	base := t.TempDir()
	if _, err := Export(ctx, Options{ModelDir: j.modelDir, Checkpoint: "model.ckpt-5", ExportBase: base, Spec: j.spec, Log: quiet}); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, base)
	// How many bytes the export of step 10 writes through its file system, the state files
	// (written last: ps_0, ps_1, entry) included: measured on a copy of the base (whose path has
	// the same length, which the state files hold).
	scratch := t.TempDir()
	copyDir(t, base, scratch)
	counting := &fullDisk{budget: -1}
	if _, err := Export(ctx, Options{ModelDir: j.modelDir, ExportBase: scratch, Spec: j.spec, Log: quiet, fs: counting}); err != nil {
		t.Fatal(err)
	}
	total := counting.used
	var states []int64
	for _, sg := range []string{"ps_0", "ps_1", "entry"} {
		states = append(states, int64(len(snapshotState(t, scratch, sg))))
	}
	statesStart := total - states[0] - states[1] - states[2]
	for _, budget := range []int64{0, 1, 100, total / 4, total / 2, statesStart - 1, statesStart, statesStart + states[0], total - 1} {
		t.Run(fmt.Sprint(budget), func(t *testing.T) {
			_, err := Export(ctx, Options{ModelDir: j.modelDir, ExportBase: base, Spec: j.spec, Log: quiet, fs: &fullDisk{budget: budget}})
			if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), base+"/") {
				t.Fatalf("error %v; want ENOSPC naming a file of %s", err, base)
			}
			sameSnapshot(t, fmt.Sprintf("budget %d of %d", budget, total), snapshot(t, base), before)
		})
	}
	// With room, the export goes through.
	if res, err := Export(ctx, Options{ModelDir: j.modelDir, ExportBase: base, Spec: j.spec, Log: quiet}); err != nil || res.Version != 10 {
		t.Fatalf("%+v, %v", res, err)
	}
}

func snapshotState(t testing.TB, base, sg string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(base, sg, resource.ExportStateFile))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// readOnlyDir returns a directory nobody can write to: without write permission, or for root
// (whom permissions do not stop) a read-only bind mount of it.
func readOnlyDir(t *testing.T, fill func(dir string)) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fill(dir)
	if os.Geteuid() != 0 {
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
		return dir
	}
	if err := syscall.Mount(dir, dir, "", syscall.MS_BIND, ""); err != nil {
		t.Skipf("running as root without the right to mount a read-only directory: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	if err := syscall.Mount("", dir, "", syscall.MS_REMOUNT|syscall.MS_BIND|syscall.MS_RDONLY, ""); err != nil {
		t.Fatalf("remount %s read-only: %v", dir, err)
	}
	return dir
}

// TestReadOnlyExportBase: an export base on a read-only location (itself, below it, or holding
// an earlier export) is an error naming the path, and nothing changes.
func TestReadOnlyExportBase(t *testing.T) {
	leakcheck.Check(t)
	ctx := tctx(t)
	j := newJob(t, 2, []int{8})
	j.train(ctx, 5)
	j.save(ctx)
	j.train(ctx, 5)
	j.save(ctx)
	for _, tc := range []struct {
		name   string
		fill   func(dir string)
		base   string // relative to the read-only directory
		naming string
	}{
		{"the base itself", func(string) {}, ".", lockFile},
		{"below it", func(string) {}, "a/b", "a"},
		{"an earlier export in it", func(dir string) {
			if _, err := Export(ctx, Options{ModelDir: j.modelDir, Checkpoint: "model.ckpt-5", ExportBase: dir, Spec: j.spec, Log: quiet}); err != nil {
				t.Fatal(err)
			}
		}, ".", lockFile},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ro := readOnlyDir(t, tc.fill)
			before := snapshot(t, ro)
			_, err := Export(ctx, Options{ModelDir: j.modelDir, ExportBase: filepath.Join(ro, tc.base), Spec: j.spec, Log: quiet})
			if !(errors.Is(err, syscall.EROFS) || errors.Is(err, fs.ErrPermission)) || !strings.Contains(err.Error(), filepath.Join(ro, tc.naming)) {
				t.Fatalf("error %v; want a read-only error naming %s", err, filepath.Join(ro, tc.naming))
			}
			sameSnapshot(t, tc.name, snapshot(t, ro), before)
		})
	}
}

// TestReexport: exporting a version the entry has is refused, naming it, and changes nothing; a
// PS version an interrupted export left without its entry is replaced.
func TestReexport(t *testing.T) {
	leakcheck.Check(t)
	ctx := tctx(t)
	j := newJob(t, 2, []int{8})
	j.train(ctx, 5)
	j.save(ctx)
	base := t.TempDir()
	o := Options{ModelDir: j.modelDir, ExportBase: base, Spec: j.spec, Log: quiet}
	if _, err := Export(ctx, o); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, base)
	_, err := Export(ctx, o)
	if !errors.Is(err, ErrVersionExists) || errkind.Of(err) != errkind.Precondition || !strings.Contains(err.Error(), filepath.Join(base, "entry", "5")) {
		t.Fatalf("re-export: %v (kind %v)", err, errkind.Of(err))
	}
	sameSnapshot(t, "re-export", snapshot(t, base), before)

	// An interrupted export of step 10 left ps_1/10 (a partial directory) and nothing else.
	j.train(ctx, 5)
	j.save(ctx)
	leftover := filepath.Join(base, "ps_1", "10")
	if err := os.MkdirAll(filepath.Join(leftover, "embeddings"), 0o755); err != nil {
		t.Fatal(err)
	}
	res, err := Export(ctx, o)
	if err != nil || res.Version != 10 {
		t.Fatalf("%+v, %v", res, err)
	}
	if _, err := LoadPSShard(ctx, leftover); err != nil {
		t.Errorf("the replaced version: %v", err)
	}
}
