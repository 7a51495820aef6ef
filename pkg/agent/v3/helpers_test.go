package agentv3

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"maps"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	utilsspec "github.com/monolith-go/monolith/gen/spec/agent_service/utils"
	agentstatus "github.com/monolith-go/monolith/pkg/agent/status"
	"github.com/monolith-go/monolith/pkg/agentconf"
)

// quiet is a logger for tests that do not look at the log.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func tctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func ptr[T any](v T) *T { return &v }

// testConfig is agent_v3_test.py's AgentConfig(bzid='gip', deploy_type='unified',
// agent_version=3, layout_pattern='/gip/layout', zk_servers='127.0.0.1:8888') with MY_HOST_IP set,
// plus env and the changes mutate makes.
func testConfig(t testing.TB, env map[string]string, mutate func(*utilsspec.AgentConfig)) *agentconf.AgentConfig {
	t.Helper()
	f := utilsspec.DefaultAgentConfig()
	f.Bzid, f.DeployType, f.AgentVersion = ptr("gip"), ptr("unified"), 3
	f.LayoutPattern, f.ZKServers = ptr("/gip/layout"), ptr("127.0.0.1:8888")
	if mutate != nil {
		mutate(&f)
	}
	e := map[string]string{"MY_HOST_IP": "127.0.0.1"}
	maps.Copy(e, env)
	c, err := agentconf.New(f, agentconf.Options{Env: agentconf.MapEnv(e), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// eventually polls cond every few milliseconds until it holds, failing the test after 15 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var fakeTFSBinary = flag.String("fake_tfs", "", "path of the fake_tfs binary (Bazel passes it; go test builds it)")

var (
	buildOnce sync.Once
	builtTFS  string
	buildErr  error
	buildDir  string
	buildOut  []byte
)

// fakeTFS returns the fake TF Serving binary: the one Bazel built, or one go build makes (once per
// test binary).
func fakeTFS(t *testing.T) string {
	t.Helper()
	if *fakeTFSBinary != "" {
		// $(rootpath) is relative to the workspace root inside the runfiles tree.
		if srcdir := os.Getenv("TEST_SRCDIR"); srcdir != "" {
			return filepath.Join(srcdir, os.Getenv("TEST_WORKSPACE"), *fakeTFSBinary)
		}
		p, err := filepath.Abs(*fakeTFSBinary)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "agentv3-fake-tfs")
		if buildErr != nil {
			return
		}
		builtTFS = filepath.Join(buildDir, "fake_tfs")
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		buildOut, buildErr = exec.CommandContext(ctx, "go", "build", "-o", builtTFS, "github.com/monolith-go/monolith/cmd/fake_tfs").CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("go build fake_tfs: %v\n%s", buildErr, buildOut)
	}
	return builtTFS
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

func fileExists(path string) (bool, error) {
	_, err := os.Stat(path)
	if err == nil {
		return true, nil
	}
	if os.IsNotExist(err) {
		return false, nil
	}
	return false, err
}

// scrape returns m's metrics in the Prometheus text format, as /metrics serves them.
func scrape(t *testing.T, m *agentstatus.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("/metrics: %d %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}
