package modelmgr

import (
	"context"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// quiet is a logger for tests that do not look at the log.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// createVersion builds what model_manager_test.py's create_file builds:
// <p2p>/<model>@<ts>/<model>/<sub>/<ts>/ for each sub model (with one file each) and the marker.
func createVersion(t *testing.T, p2p, model, ts string, subs ...string) {
	t.Helper()
	if len(subs) == 0 {
		subs = []string{"ps_item_embedding_0", "ps_item_embedding_1"}
	}
	for _, sub := range subs {
		writeFile(t, filepath.Join(p2p, model+"@"+ts, model, sub, ts, "saved_model.pb"), sub+"@"+ts)
	}
	writeFile(t, filepath.Join(p2p, model+"@"+ts+WriteDone), "")
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// createTree creates relative paths under root: empty files, or directories when they end in "/".
func createTree(t *testing.T, root string, paths ...string) {
	t.Helper()
	for _, p := range paths {
		full := filepath.Join(root, p)
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		writeFile(t, full, "")
	}
}

// listTree lists root as sorted relative paths, directories ending in "/" (nil when root is absent).
func listTree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if e.IsDir() {
			rel += "/"
		}
		out = append(out, rel)
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

type testEnv struct {
	src, dst string
}

func newEnv(t *testing.T) testEnv {
	base := t.TempDir()
	return testEnv{src: filepath.Join(base, "p2p"), dst: filepath.Join(base, "model_data")}
}

func (e testEnv) manager(t *testing.T, model string, tweak func(*Config)) *Manager {
	t.Helper()
	cfg := Config{ModelName: model, SourcePath: e.src, ReceivePath: e.dst, Logger: quiet,
		WaitTimeout: 5 * time.Second, LoopInterval: 5 * time.Millisecond, PollInterval: 5 * time.Millisecond}
	if tweak != nil {
		tweak(&cfg)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	return m
}

// within fails when f takes longer than d.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	start := time.Now()
	f()
	if el := time.Since(start); el > d {
		t.Fatalf("%s took %v, want under %v", what, el, d)
	}
}

// fakeMetrics records what is emitted.
type fakeMetrics struct {
	mu     sync.Mutex
	events []string
	wake   chan struct{}
}

func newFakeMetrics() *fakeMetrics { return &fakeMetrics{wake: make(chan struct{}, 1000)} }

func (f *fakeMetrics) EmitCounter(name string, value int64, tags map[string]string) {
	f.record("counter " + name + " model=" + tags["model"])
}

func (f *fakeMetrics) EmitStore(name string, value int64, tags map[string]string) {
	f.record("store " + name + " model=" + tags["model"])
}

func (f *fakeMetrics) record(s string) {
	f.mu.Lock()
	f.events = append(f.events, s)
	f.mu.Unlock()
	if !strings.Contains(s, "update.delay") && !strings.Contains(s, "loop_once_failed") {
		return // not the last metric of a round
	}
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *fakeMetrics) Events() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.events...)
}

// waitRounds waits until the loop has emitted metrics n more times (one round each).
func (f *fakeMetrics) waitRounds(t *testing.T, n int) {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for got := 0; got < n; {
		select {
		case <-f.wake:
			got++
		case <-timeout:
			t.Fatalf("only %d of %d rounds ran", got, n)
		}
	}
}

// failingCopy returns a copyFile that fails (after fully writing a first part of dst) on the
// n-th file, counting from 1, and copies the others.
func failingCopy(n int) func(context.Context, string, string, fs.FileInfo) error {
	var mu sync.Mutex
	count := 0
	return func(ctx context.Context, src, dst string, info fs.FileInfo) error {
		mu.Lock()
		count++
		c := count
		mu.Unlock()
		if c == n {
			_ = os.WriteFile(dst, []byte("partial"), 0o600)
			return os.ErrPermission
		}
		return copyRegularFile(ctx, src, dst, info)
	}
}
