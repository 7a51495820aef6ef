package agentv3

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"net/http/httptest"
	"testing"
	"time"

	utilsspec "github.com/monolith-go/monolith/gen/spec/agent_service/utils"
	"github.com/monolith-go/monolith/internal/faketfsbin"
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

func TestMain(m *testing.M) { faketfsbin.Main(m) }

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
