package backend

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/monolith-go/monolith/parity/harness"
	"github.com/monolith-go/monolith/pkg/zk/zktest"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	d, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			t.Fatal("no go.mod above the test's directory")
		}
		d = parent
	}
}

// TestGoldens: every backends.py case passes, among them the op sequence on a real ZooKeeper the
// adapter starts (so a change of zktest that the adapter's serverTB does not cover shows here).
func TestGoldens(t *testing.T) {
	cases, err := harness.LoadDir(filepath.Join(repoRoot(t), "parity", "goldens", "python", "backends"))
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]bool{}
	for _, c := range cases {
		calls[c.Call] = true
	}
	if !calls["ZKBackend(bzid, real ZooKeeper) op sequence"] || !calls["ZKBackend(bzid, FakeKazooClient) op sequence"] {
		t.Fatalf("the backends goldens lack a scenario: %v", calls)
	}
	reg := harness.NewRegistry()
	Register(reg)
	var out bytes.Buffer
	s := harness.RunWithOptions(cases, reg, harness.Policy{}, &out, harness.Options{Verbose: true})
	t.Logf("\n%s", out.String())
	if s.Failed > 0 || s.Skipped > 0 || s.Passed != len(cases) {
		t.Fatalf("%d of %d passed, %d failed, %d skipped", s.Passed, len(cases), s.Failed, s.Skipped)
	}
}

// TestStartServerFails: a server that cannot start is an error of the case, not a panic.
func TestStartServerFails(t *testing.T) {
	srv, stop, err := startServer(zktest.WithJar(filepath.Join(t.TempDir(), "no-zookeeper.jar")))
	if err == nil || srv != nil || stop != nil {
		t.Fatalf("startServer without a jar: %v, %v", srv, err)
	}
	t.Log(err)
}
