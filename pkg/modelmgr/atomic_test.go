package modelmgr

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// noVersionVisible fails when the receive path holds a version directory or a temp copy.
func noVersionVisible(t *testing.T, dst string) {
	t.Helper()
	for _, p := range listTree(t, dst) {
		parts := strings.Split(strings.TrimSuffix(p, "/"), "/")
		if len(parts) >= 3 { // <model>/<sub_model>/<version...>
			t.Errorf("left in the receive path: %s (tree %q)", p, listTree(t, dst))
			return
		}
	}
}

// TestFailedCopyLeavesNothing: a copy failing midway (in the first or a later sub model, or on a
// special file, a dangling link, a link loop) leaves no version and no temp copy, and the next
// round copies the version.
func TestFailedCopyLeavesNothing(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, e testEnv, m *Manager)
		// retry: whether the failure goes away by itself for the next round
		retry bool
	}{
		{"first file", func(t *testing.T, e testEnv, m *Manager) { m.copyFile = failingCopy(1) }, true},
		{"midway", func(t *testing.T, e testEnv, m *Manager) { m.copyFile = failingCopy(3) }, true},
		{"last file", func(t *testing.T, e testEnv, m *Manager) { m.copyFile = failingCopy(9) }, true},
		{"named pipe", func(t *testing.T, e testEnv, m *Manager) {
			if err := syscall.Mkfifo(filepath.Join(e.src, "mdl@5", "mdl", "ps_1", "5", "pipe"), 0o644); err != nil {
				t.Skip("mkfifo:", err)
			}
		}, false},
		{"dangling link", func(t *testing.T, e testEnv, m *Manager) {
			if err := os.Symlink("/nonexistent/x", filepath.Join(e.src, "mdl@5", "mdl", "ps_1", "5", "link")); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"link loop", func(t *testing.T, e testEnv, m *Manager) {
			if err := os.Symlink("..", filepath.Join(e.src, "mdl@5", "mdl", "ps_1", "5", "variables", "up")); err != nil {
				t.Fatal(err)
			}
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			e := newEnv(t)
			// 3 sub models x 3 files each, copied one file at a time so failingCopy(n) is deterministic.
			for _, sub := range []string{"entry", "ps_0", "ps_1"} {
				v := filepath.Join(e.src, "mdl@5", "mdl", sub, "5")
				writeFile(t, filepath.Join(v, "saved_model.pb"), strings.Repeat("x", 1000))
				writeFile(t, filepath.Join(v, "variables", "variables.index"), "idx")
				writeFile(t, filepath.Join(v, "variables", "variables.data-00000-of-00001"), strings.Repeat("d", 5000))
			}
			writeFile(t, filepath.Join(e.src, "mdl@5"+WriteDone), "")
			m := e.manager(t, "mdl", func(c *Config) { c.CopyWorkers = 1 })
			tc.setup(t, e, m)
			err := m.LoopOnce(context.Background())
			if err == nil {
				t.Fatal("LoopOnce succeeded")
			}
			if errkind.Of(err) == errkind.Unknown {
				t.Errorf("unclassified error: %v", err)
			}
			noVersionVisible(t, e.dst)
			if len(m.Models()) != 0 || len(m.LatestVersions()) != 0 {
				t.Errorf("failed copy recorded: %v", m.Models())
			}
			if !tc.retry {
				return
			}
			m.copyFile = copyRegularFile
			if err := m.LoopOnce(context.Background()); err != nil {
				t.Fatal(err)
			}
			for _, sub := range []string{"entry", "ps_0", "ps_1"} {
				p := filepath.Join(e.dst, "mdl", sub, "5", "variables", "variables.data-00000-of-00001")
				if b, err := os.ReadFile(p); err != nil || len(b) != 5000 {
					t.Errorf("%s: %d bytes, %v", p, len(b), err)
				}
			}
		})
	}
}

// TestFailedRenameWithdraws: when a later sub model cannot be renamed into place, the sub models
// already renamed are taken back.
func TestFailedRenameWithdraws(t *testing.T) {
	e := newEnv(t)
	createVersion(t, e.src, "mdl", "5", "entry", "ps_0")
	m := e.manager(t, "mdl", func(c *Config) { c.CopyWorkers = 1 })
	blocker := filepath.Join(e.dst, "mdl", "ps_0", "5")
	m.copyFile = func(ctx context.Context, src, dst string, info fs.FileInfo) error {
		if strings.Contains(dst, filepath.Join("ps_0", "5-temp")) {
			// someone else creates the final directory while we copy
			writeFile(t, filepath.Join(blocker, "foreign"), "")
		}
		return copyRegularFile(ctx, src, dst, info)
	}
	if err := m.LoopOnce(context.Background()); err == nil {
		t.Fatal("LoopOnce succeeded")
	}
	want := []string{"mdl/", "mdl/entry/", "mdl/ps_0/", "mdl/ps_0/5/", "mdl/ps_0/5/foreign"}
	if got := listTree(t, e.dst); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("receive tree %q, want %q", got, want)
	}
}

// TestVersionNeverVisibleHalfCopied watches the receive path while versions are copied: whenever a
// version directory exists, all its files are there with their full size.
func TestVersionNeverVisibleHalfCopied(t *testing.T) {
	e := newEnv(t)
	const files, size = 40, 64 << 10
	subs := []string{"entry", "ps_0", "ps_1"}
	versions := []string{"1", "2", "3"}
	for _, v := range versions {
		for _, sub := range subs {
			for i := range files {
				writeFile(t, filepath.Join(e.src, "mdl@"+v, "mdl", sub, v, "variables", fmt.Sprintf("part-%02d", i)), strings.Repeat("v", size))
			}
		}
	}
	m := e.manager(t, "mdl", func(c *Config) { c.CopyWorkers = 4 })
	m.copyFile = func(ctx context.Context, src, dst string, info fs.FileInfo) error {
		time.Sleep(200 * time.Microsecond) // give the watcher time to look
		return copyRegularFile(ctx, src, dst, info)
	}
	stop := make(chan struct{})
	var looks, seen atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, v := range versions {
				for _, sub := range subs {
					dir := filepath.Join(e.dst, "mdl", sub, v)
					looks.Add(1)
					if _, err := os.Stat(dir); err != nil {
						continue // not published yet
					}
					entries, err := os.ReadDir(filepath.Join(dir, "variables"))
					if err != nil {
						t.Errorf("%s visible without its variables: %v", dir, err)
						continue
					}
					seen.Add(1)
					if len(entries) != files {
						t.Errorf("%s visible with %d of %d files", dir, len(entries), files)
					}
					for _, en := range entries {
						if info, err := en.Info(); err == nil && info.Size() != size {
							t.Errorf("%s/%s visible with %d of %d bytes", dir, en.Name(), info.Size(), size)
						}
					}
				}
			}
		}
	}()
	for _, v := range versions {
		writeFile(t, filepath.Join(e.src, "mdl@"+v+WriteDone), "")
		if err := m.LoopOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if seen.Load() == 0 {
		t.Fatalf("the watcher never saw a version (%d looks)", looks.Load())
	}
}

// TestStopPrompt: Stop returns at once from the pause between rounds, the waits of Start and a copy
// in progress, leaving no goroutine and no partial copy.
func TestStopPrompt(t *testing.T) {
	t.Run("between rounds", func(t *testing.T) {
		leakcheck.Check(t)
		e := newEnv(t)
		createVersion(t, e.src, "mdl", "1")
		m := e.manager(t, "mdl", func(c *Config) { c.LoopInterval = time.Hour })
		if err := m.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond) // the loop is in its pause
		within(t, time.Second, "Stop", m.Stop)
	})
	t.Run("waiting for the download", func(t *testing.T) {
		leakcheck.Check(t)
		e := newEnv(t)
		m := e.manager(t, "mdl", func(c *Config) { c.PollInterval = time.Hour; c.WaitTimeout = 2 * time.Hour })
		errc := make(chan error, 1)
		go func() { errc <- m.Start(context.Background()) }()
		time.Sleep(10 * time.Millisecond)
		within(t, time.Second, "Stop", m.Stop)
		select {
		case err := <-errc:
			if !errors.Is(err, ErrStopped) || errkind.Of(err) != errkind.Runtime {
				t.Errorf("Start: %v, want ErrStopped", err)
			}
		case <-time.After(time.Second):
			t.Fatal("Start did not return after Stop")
		}
	})
	t.Run("during a copy", func(t *testing.T) {
		leakcheck.Check(t)
		e := newEnv(t)
		createVersion(t, e.src, "mdl", "1", "entry", "ps_0")
		m := e.manager(t, "mdl", nil)
		copying := make(chan struct{})
		var once sync.Once
		m.copyFile = func(ctx context.Context, src, dst string, info fs.FileInfo) error {
			once.Do(func() { close(copying) })
			<-ctx.Done() // a copy that only ends when stopped
			return ctx.Err()
		}
		errc := make(chan error, 1)
		go func() { errc <- m.Start(context.Background()) }()
		<-copying
		within(t, time.Second, "Stop", m.Stop)
		if err := <-errc; !errors.Is(err, ErrStopped) {
			t.Errorf("Start: %v, want ErrStopped", err)
		}
		noVersionVisible(t, e.dst)
	})
	t.Run("context cancelled", func(t *testing.T) {
		leakcheck.Check(t)
		e := newEnv(t)
		createVersion(t, e.src, "mdl", "1")
		m := e.manager(t, "mdl", func(c *Config) { c.LoopInterval = time.Hour })
		ctx, cancel := context.WithCancel(context.Background())
		if err := m.Start(ctx); err != nil {
			t.Fatal(err)
		}
		cancel() // the loop ends without Stop; noLeak checks it
	})
	t.Run("run loop", func(t *testing.T) {
		leakcheck.Check(t)
		e := newEnv(t)
		m := e.manager(t, "mdl", func(c *Config) { c.LoopInterval = time.Hour })
		done := make(chan struct{})
		go func() {
			defer close(done)
			m.Run(context.Background())
		}()
		time.Sleep(10 * time.Millisecond)
		m.Stop()
		select {
		case <-done:
		case <-time.After(time.Second):
			t.Fatal("Run did not return after Stop")
		}
	})
}
