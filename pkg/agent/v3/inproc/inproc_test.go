package inproc_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	pb "github.com/monolith-go/monolith/gen/pb/monolith/serving/agent_service"
	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	utilsspec "github.com/monolith-go/monolith/gen/spec/agent_service/utils"
	"github.com/monolith-go/monolith/internal/leakcheck"
	agentstatus "github.com/monolith-go/monolith/pkg/agent/status"
	agentv3 "github.com/monolith-go/monolith/pkg/agent/v3"
	"github.com/monolith-go/monolith/pkg/agent/v3/inproc"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/agentsvc"
	"github.com/monolith-go/monolith/pkg/tfs"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkfake"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func ptr[T any](v T) *T { return &v }

// TestAgentDrivesInProcessTFS: agent v3 with the in-process fake TF Serving, reloaded over gRPC;
// the fake is stepped by the test, so each version's way to AVAILABLE is seen. The AgentService
// then answers HeartBeat with the bound addresses, and the RPC is counted in the metrics.
func TestAgentDrivesInProcessTFS(t *testing.T) {
	leakcheck.Check(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := utilsspec.DefaultAgentConfig()
	f.Bzid, f.DeployType, f.AgentVersion, f.LayoutPattern = ptr("demo"), ptr("unified"), 3, ptr("layout")
	conf, err := agentconf.New(f, agentconf.Options{Env: agentconf.MapEnv(map[string]string{"MY_POD_NAME": "pod-0"}), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	srv := zkfake.NewServer()
	agentZK, ctl := srv.Client(), srv.Client()
	defer agentZK.Close()
	defer ctl.Close()
	m := agentstatus.NewMetrics()
	var proc *inproc.TFS
	a, err := agentv3.New(conf, agentv3.Options{
		ZK: agentZK, Host: "127.0.0.1", ModelConfigDir: t.TempDir(), Logger: quiet, Metrics: m,
		TFS: func(file string) (tfs.Process, error) {
			proc = inproc.New(file, inproc.Options{Port: *conf.TFSPortGRPC})
			return proc, nil
		},
		Reloader:      mustDial(t, fmt.Sprintf("127.0.0.1:%d", *conf.TFSPortGRPC)),
		ReloadBackoff: time.Millisecond, ReloadBackoffMax: 5 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer a.Stop(context.Background())

	for _, sub := range []string{"entry", "ps_0"} {
		data := fmt.Sprintf(`{"model_base_path": "/models/%s", "version_policy": "latest"}`, sub)
		if _, err := ctl.Create(ctx, "/demo/saved_models/m/"+sub, []byte(data), zk.CreateOptions{MakePath: true}); err != nil {
			t.Fatal(err)
		}
		if err := ctl.EnsurePath(ctx, "/demo/layouts/layout/m:"+sub); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Backend().Settle(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"m:entry", "m:ps_0"}
	eventually(t, "the reload to reach the fake", func() bool {
		return slices.Equal(proc.Server().Mgr().AliveModelNames(), want)
	})
	// Step the fake: START, LOADING, AVAILABLE; before that nothing is bound.
	for _, state := range []servingapis.ModelVersionStatus_State{servingapis.ModelVersionStatus_START,
		servingapis.ModelVersionStatus_LOADING, servingapis.ModelVersionStatus_AVAILABLE} {
		if err := a.SyncAvailableSavedModels(ctx); err != nil {
			t.Fatal(err)
		}
		if got := a.Status(ctx).Bound; len(got) != 0 {
			t.Fatalf("bound %v before AVAILABLE", got)
		}
		proc.Server().Tick()
		st, err := proc.ListSavedModelsStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range want {
			if st[n].GetState() != state {
				t.Fatalf("%s is %v, want %v", n, st[n].GetState(), state)
			}
		}
	}
	if err := a.SyncAvailableSavedModels(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Backend().Settle(ctx); err != nil {
		t.Fatal(err)
	}

	c, err := agentsvc.Dial(a.AgentServiceAddr(), agentsvc.ClientOptions{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	resp, err := c.HeartBeat(ctx, pb.ServerType_PS)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for k, v := range resp.GetAddresses() {
		got[k] = v.GetAddress()
	}
	addr := fmt.Sprintf("127.0.0.1:%d", *conf.TFSPortGRPC) // the fake is a gRPC remote-op TF Serving
	if want := map[string][]string{"m:entry": {addr}, "m:ps_0": {addr}}; !reflect.DeepEqual(got, want) {
		t.Errorf("HeartBeat = %v, want %v", got, want)
	}

	rec := httptest.NewRecorder()
	agentstatus.NewHandler(a, m).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		`monolith_agent_rpc_requests_total{code="OK",method="HeartBeat"} 1`,
		`monolith_agent_rpc_duration_seconds_count{method="HeartBeat"} 1`,
		`monolith_agent_tfs_models{state="AVAILABLE"} 2`,
		`monolith_agent_zk_connected 1`,
		`monolith_agent_zk_watch_events_total{event="CHILD",kind="children"}`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func mustDial(t *testing.T, addr string) agentv3.Reloader {
	r, err := agentv3.DialReloader(addr)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestProcessLifecycle: the in-process TF Serving as a tfs.Process: not started, started,
// stopped (Done closed, Exited).
func TestProcessLifecycle(t *testing.T) {
	leakcheck.Check(t)
	file := t.TempDir() + "/models.config"
	if err := writeFile(file, "model_config_list {\n  config {\n    name: \"m:entry\"\n    base_path: \"/x\"\n    model_platform: \"tensorflow\"\n  }\n}\n"); err != nil {
		t.Fatal(err)
	}
	p := inproc.New(file, inproc.Options{})
	if _, err := p.ListSavedModelsStatus(context.Background()); err == nil {
		t.Error("status before Start")
	}
	if exited, _ := p.Exited(); exited || p.Done() != nil {
		t.Error("exited before Start")
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err == nil {
		t.Error("second Start")
	}
	st, err := p.ListSavedModelsStatus(context.Background())
	if err != nil || st["m:entry"].GetState() != servingapis.ModelVersionStatus_UNKNOWN {
		t.Fatalf("status = %v, %v; want UNKNOWN (nothing stepped yet)", st, err)
	}
	p.Server().Drain()
	if st, _ := p.ListSavedModelsStatus(context.Background()); st["m:entry"].GetState() != servingapis.ModelVersionStatus_AVAILABLE {
		t.Fatalf("status after Drain = %v", st)
	}
	if err := p.Stop(time.Second); err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	if exited, code := p.Exited(); !exited || code != 0 {
		t.Errorf("Exited = %v, %d", exited, code)
	}
}

func writeFile(path, text string) error { return os.WriteFile(path, []byte(text), 0o644) }
