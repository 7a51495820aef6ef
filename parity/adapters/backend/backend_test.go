package backend

import (
	"path/filepath"
	"testing"

	"github.com/monolith-go/monolith/parity/goldentest"
	"github.com/monolith-go/monolith/parity/harness"
	"github.com/monolith-go/monolith/pkg/zk/zktest"
)

// TestGoldens: every backends.py case passes, among them the op sequence on a real ZooKeeper the
// adapter starts (so a change of zktest that the adapter's serverTB does not cover shows here).
func TestGoldens(t *testing.T) {
	cases, policy := goldentest.Load(t, "backends", "agent_service/backends.yaml")
	calls := map[string]bool{}
	for _, c := range cases {
		calls[c.Call] = true
	}
	if !calls["ZKBackend(bzid, real ZooKeeper) op sequence"] || !calls["ZKBackend(bzid, FakeKazooClient) op sequence"] {
		t.Fatalf("the backends goldens lack a scenario: %v", calls)
	}
	reg := harness.NewRegistry()
	Register(reg)
	goldentest.RequireAll(t, cases, reg, policy)
}

// TestStartServerFails: a server that cannot start is an error of the case, not a panic.
func TestStartServerFails(t *testing.T) {
	srv, stop, err := startServer(zktest.WithJar(filepath.Join(t.TempDir(), "no-zookeeper.jar")))
	if err == nil || srv != nil || stop != nil {
		t.Fatalf("startServer without a jar: %v, %v", srv, err)
	}
	t.Log(err)
}
