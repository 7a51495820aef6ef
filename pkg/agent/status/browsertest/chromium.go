// Package browsertest loads pages in a real browser for tests: Debian's headless Chromium
// (installed by tools/bazel/setup.sh), run as a command, returns the DOM as rendered after the
// page's scripts ran, and takes screenshots. A missing Chromium fails the test (it does not
// skip): a browser test that silently does not run proves nothing.
//
// Chromium is kept off the network: it may resolve no host name (every page a test loads is on
// 127.0.0.1) and its background services are off.
package browsertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// Env names a Chromium binary to use instead of DefaultPath.
const Env = "MONOLITH_CHROMIUM"

// DefaultPath is Debian's chromium package's binary.
const DefaultPath = "/usr/bin/chromium"

// Chromium runs headless Chromium.
type Chromium struct {
	// Path is the binary.
	Path string
	// Dir holds the profiles (each run gets a fresh one); a test's temporary directory.
	Dir string
	// Width and Height are the window's size in CSS pixels (screenshots show exactly this).
	Width, Height int
	runs          int
}

// Find returns the Chromium binary: $MONOLITH_CHROMIUM, else DefaultPath, else chromium on PATH.
func Find() (string, error) {
	if p := os.Getenv(Env); p != "" {
		return p, nil
	}
	if _, err := os.Stat(DefaultPath); err == nil {
		return DefaultPath, nil
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("no Chromium: $%s is not set, %s does not exist and chromium is not on PATH; "+
		"run tools/bazel/setup.sh (it installs Debian's chromium package) or apt-get install chromium", Env, DefaultPath)
}

// Require returns a Chromium for t, failing t when there is none.
func Require(t testing.TB) *Chromium {
	t.Helper()
	p, err := Find()
	if err != nil {
		t.Fatal(err)
	}
	return &Chromium{Path: p, Dir: t.TempDir(), Width: 1280, Height: 2200}
}

// OutputDir is where a test keeps files for people to look at: Bazel's
// $TEST_UNDECLARED_OUTPUTS_DIR (bazel-testlogs/.../test.outputs/), else a new directory under the
// system's temporary directory that outlives the test. Its path is logged.
func OutputDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("TEST_UNDECLARED_OUTPUTS_DIR")
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "monolith-browsertest-"); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("outputs kept in %s", dir)
	return dir
}

// DumpDOM loads url, lets the page run for budget of virtual time (its timers fire, its fetches
// complete), and returns the DOM serialized as HTML.
func (c *Chromium) DumpDOM(ctx context.Context, url string, budget time.Duration) (string, error) {
	out, err := c.run(ctx, budget, "--dump-dom", url)
	if err != nil {
		return "", err
	}
	return string(out), nil
}

// Screenshot loads url as DumpDOM does and writes a PNG of the window to path.
func (c *Chromium) Screenshot(ctx context.Context, url, path string, budget time.Duration) error {
	if _, err := c.run(ctx, budget, "--screenshot="+path, url); err != nil {
		return err
	}
	if st, err := os.Stat(path); err != nil || st.Size() == 0 {
		return fmt.Errorf("chromium wrote no screenshot to %s: %v", path, err)
	}
	return nil
}

// run runs Chromium once with a fresh profile; ctx ends it (and every process it started).
func (c *Chromium) run(ctx context.Context, budget time.Duration, args ...string) ([]byte, error) {
	c.runs++
	profile := filepath.Join(c.Dir, "profile-"+strconv.Itoa(c.runs))
	if err := os.MkdirAll(profile, 0o700); err != nil {
		return nil, err
	}
	full := append([]string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
		"--no-default-browser-check", "--disable-background-networking", "--disable-component-update",
		"--disable-sync", "--disable-default-apps", "--disable-extensions", "--disable-breakpad",
		"--disable-client-side-phishing-detection", "--disable-domain-reliability", "--no-pings",
		"--metrics-recording-only", "--mute-audio", "--hide-scrollbars",
		// Tests talk to 127.0.0.1 only: no name resolves, so nothing else can be reached.
		"--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
		"--user-data-dir=" + profile,
		fmt.Sprintf("--window-size=%d,%d", c.Width, c.Height),
		fmt.Sprintf("--virtual-time-budget=%d", budget.Milliseconds()),
	}, args...)
	cmd := exec.CommandContext(ctx, c.Path, full...)
	// Its own process group, so a timeout ends the renderer and GPU processes too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	// A home of its own: under Bazel $HOME may be unset or read-only.
	cmd.Env = append(os.Environ(), "HOME="+profile, "XDG_CONFIG_HOME="+profile, "XDG_CACHE_HOME="+profile)
	cmd.Dir = profile
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = errors.Join(err, ctx.Err())
		}
		return nil, fmt.Errorf("chromium %v: %w\nstderr:\n%s", args, err, tail(stderr.Bytes(), 4000))
	}
	return stdout.Bytes(), nil
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
