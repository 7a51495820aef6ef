package fsutil

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/monolith-go/monolith/pkg/errkind"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// tree lists the files under root with their contents.
func tree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			out[rel+"/"] = ""
			return nil
		}
		out[rel] = read(t, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMultiThreadedCopy ports utils_test.testMultiThreadedCopy, with a larger tree.
func TestMultiThreadedCopy(t *testing.T) {
	for _, workers := range []int{1, 2, 8} {
		t.Run(fmt.Sprint(workers, " workers"), func(t *testing.T) {
			base := t.TempDir()
			src := filepath.Join(base, "src")
			write(t, filepath.Join(src, "file.txt"), "root")
			write(t, filepath.Join(src, "subdir", "innerfile.txt"), "inner")
			for i := range 20 {
				write(t, filepath.Join(src, "many", fmt.Sprint(i%3), fmt.Sprintf("f%02d", i)), strings.Repeat("x", i))
			}
			if err := os.MkdirAll(filepath.Join(src, "empty"), 0o755); err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(base, "dst")
			// dst is replaced: a stale file there goes.
			write(t, filepath.Join(dst, "stale.txt"), "old")
			o := DefaultTreeOptions()
			o.MaxWorkers = workers
			if err := CopyRecursively(context.Background(), src, dst, o); err != nil {
				t.Fatal(err)
			}
			if got := read(t, filepath.Join(dst, "subdir", "innerfile.txt")); got != "inner" {
				t.Fatalf("innerfile.txt = %q", got)
			}
			want, got := tree(t, src), tree(t, dst)
			if fmt.Sprint(want) != fmt.Sprint(got) {
				t.Fatalf("copied tree differs:\n got %v\nwant %v", got, want)
			}
		})
	}
}

func TestCopyRecursivelyEdges(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	missing := filepath.Join(base, "missing")
	if err := CopyRecursively(ctx, missing, filepath.Join(base, "d1"), DefaultTreeOptions()); err != nil {
		t.Fatalf("missing source with skip: %v", err)
	}
	if _, err := os.Stat(filepath.Join(base, "d1")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("dst created for a missing source: %v", err)
	}
	o := DefaultTreeOptions()
	o.SkipNonexist = false
	err := CopyRecursively(ctx, missing, filepath.Join(base, "d2"), o)
	if err == nil || err.Error() != missing+" doesn't exist!" || errkind.Of(err) != errkind.Value {
		t.Fatalf("missing source without skip: %v", err)
	}
	// A single file is copied like CopyFile.
	write(t, filepath.Join(base, "one.txt"), "1")
	if err := CopyRecursively(ctx, filepath.Join(base, "one.txt"), filepath.Join(base, "one-copy.txt"), DefaultTreeOptions()); err != nil {
		t.Fatal(err)
	}
	if read(t, filepath.Join(base, "one-copy.txt")) != "1" {
		t.Fatal("single file not copied")
	}
	// A failing file (a FIFO is not a regular file) fails the parallel copy; the reference lost it.
	src := filepath.Join(base, "withfifo")
	write(t, filepath.Join(src, "a.txt"), "a")
	if err := syscall.Mkfifo(filepath.Join(src, "pipe"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	o = DefaultTreeOptions()
	o.MaxWorkers = 4
	err = CopyRecursively(ctx, src, filepath.Join(base, "d3"), o)
	if err == nil || !strings.Contains(err.Error(), "pipe is not a regular file") {
		t.Fatalf("got %v, want the FIFO error", err)
	}
	// A cancelled context stops it.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := CopyRecursively(cctx, filepath.Join(base, "d1"), filepath.Join(base, "d4"), DefaultTreeOptions()); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

func TestCopyFile(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	src := filepath.Join(base, "src.bin")
	write(t, src, "new")
	if err := os.Chmod(src, 0o600); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(base, "dst.bin")
	write(t, dst, "old")
	for _, tc := range []struct {
		name string
		src  string
		o    CopyOptions
		want string // dst content after, or an error substring prefixed with "!"
	}{
		{"no overwrite keeps dst", src, CopyOptions{MaxRetries: 1}, "!file already exists"},
		{"overwrite", src, DefaultCopyOptions(), "new"},
		{"missing source skipped", filepath.Join(base, "nope"), DefaultCopyOptions(), "new"},
		{"missing source error", filepath.Join(base, "nope"), CopyOptions{Overwrite: true, MaxRetries: 5}, "!no such file"},
		{"directory source", base, DefaultCopyOptions(), "!is not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CopyFile(ctx, tc.src, dst, tc.o)
			if strings.HasPrefix(tc.want, "!") {
				if err == nil || !strings.Contains(err.Error(), tc.want[1:]) {
					t.Fatalf("error %v, want %q", err, tc.want[1:])
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := read(t, dst); got != tc.want {
				t.Fatalf("dst = %q, want %q", got, tc.want)
			}
		})
	}
	st, err := os.Stat(dst)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("mode of the copy: %v %v", st.Mode(), err)
	}
	if err := CopyFile(ctx, filepath.Join(base, "nope"), dst, CopyOptions{MaxRetries: 1}); errkind.Of(err) != errkind.NotFound || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing source: kind %v, %v", errkind.Of(err), err)
	}
	// No temporary file is left behind.
	entries, err := os.ReadDir(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("leftover %s", e.Name())
		}
	}
}
