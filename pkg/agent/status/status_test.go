package agentstatus

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/monolith-go/monolith/internal/buildinfo"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/modelmgr"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkfake"
)

type fakeSource struct {
	rep    Report
	health error
}

func (f *fakeSource) Status(context.Context) Report { return f.rep }
func (f *fakeSource) Healthy() error                { return f.health }

// readySource is a Source that reports its readiness (a Readier).
type readySource struct {
	fakeSource
	reasons []string
}

func (r *readySource) Ready(context.Context) []string { return r.reasons }

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	NewHandler(nil, m).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("/metrics: %d", rec.Code)
	}
	return rec.Body.String()
}

func TestHandler(t *testing.T) {
	rep := Report{Agent: AgentSummary{Version: 3, Bzid: "b", Running: true}, ZooKeeper: ZKSummary{State: "CONNECTED"},
		Models: []ModelStatus{{Name: "m:entry", Version: 1, State: "AVAILABLE"}}, Bound: []string{"m:entry"},
		Bindings: map[string]map[string][]string{"m": {"entry": {"h:1"}}}}
	healthy := &fakeSource{rep: rep}
	sick := &fakeSource{rep: rep, health: errors.New("tf serving exited with code 1")}
	ready := &readySource{fakeSource: fakeSource{rep: rep}}
	notReady := &readySource{fakeSource: fakeSource{rep: rep}, reasons: []string{"zookeeper: SUSPENDED", "tf serving: status: unavailable"}}
	tests := []struct {
		name     string
		src      Source
		metrics  bool
		path     string
		code     int
		contains []string
	}{
		{"healthz ok", healthy, true, "/healthz", 200, []string{"ok\n"}},
		{"healthz unhealthy", sick, true, "/healthz", 503, []string{"unhealthy: tf serving exited with code 1"}},
		{"healthz no agent", nil, true, "/healthz", 503, []string{"no agent"}},
		{"status", healthy, true, "/status", 200, []string{`"bzid": "b"`, `"state": "AVAILABLE"`, `"h:1"`, `"bound": [`}},
		{"status no agent", nil, true, "/status", 503, []string{"no agent"}},
		{"status has the build and readiness", ready, true, "/status", 200, []string{`"build_version": "` + buildinfo.Version() + `"`,
			`"readiness": {`, `"ready": true`}},
		{"readyz ready", ready, true, "/readyz", 200, []string{`"ready": true`, `"reasons": []`}},
		{"readyz not ready", notReady, true, "/readyz", 503, []string{`"ready": false`, `"zookeeper: SUSPENDED"`, `"tf serving: status: unavailable"`}},
		{"readyz without Ready: healthy", healthy, true, "/readyz", 200, []string{`"ready": true`}},
		{"readyz without Ready: unhealthy", sick, true, "/readyz", 503, []string{`"ready": false`, `"tf serving exited with code 1"`}},
		{"readyz no agent", nil, true, "/readyz", 503, []string{`"ready": false`, `"no agent"`}},
		{"metrics", healthy, true, "/metrics", 200, []string{"# TYPE monolith_agent_zk_connected gauge", "go_goroutines",
			`monolith_build_info{goversion="` + runtime.Version() + `"`}},
		{"no metrics", healthy, false, "/metrics", 404, nil},
		{"page", healthy, true, "/", 200, []string{"<!DOCTYPE html>", `href="status"`, `href="healthz"`, `href="readyz"`, `href="metrics"`,
			`href="debug/pprof/"`, `href="debug/vars"`}},
		{"page no agent", nil, true, "/", 200, []string{"no agent"}},
		{"pprof index", healthy, true, "/debug/pprof/", 200, []string{"goroutine", "heap"}},
		{"pprof profile by name", healthy, true, "/debug/pprof/goroutine?debug=1", 200, []string{"goroutine profile:"}},
		{"pprof cmdline", healthy, true, "/debug/pprof/cmdline", 200, nil},
		{"expvar", healthy, true, "/debug/vars", 200, []string{`"memstats":`, `"monolith_build":`, `"go_version":`}},
		{"unknown path", healthy, true, "/nope", 404, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var m *Metrics
			if tc.metrics {
				m = NewMetrics()
			}
			rec := httptest.NewRecorder()
			NewHandler(tc.src, m).ServeHTTP(rec, httptest.NewRequest("GET", tc.path, nil))
			if rec.Code != tc.code {
				t.Fatalf("%s: %d, want %d: %s", tc.path, rec.Code, tc.code, rec.Body)
			}
			for _, c := range tc.contains {
				if !strings.Contains(rec.Body.String(), c) {
					t.Errorf("%s lacks %q:\n%s", tc.path, c, rec.Body)
				}
			}
		})
	}
	// /status is valid JSON that reads back as the report.
	rec := httptest.NewRecorder()
	NewHandler(healthy, nil).ServeHTTP(rec, httptest.NewRequest("GET", "/status", nil))
	var back Report
	if err := json.Unmarshal(rec.Body.Bytes(), &back); err != nil || back.Agent.Bzid != "b" || back.Bindings["m"]["entry"][0] != "h:1" {
		t.Errorf("status round trip: %+v, %v", back, err)
	}
}

func TestServer(t *testing.T) {
	leakcheck.Check(t)
	s, err := Listen("127.0.0.1:0", NewHandler(&fakeSource{}, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	resp, err := http.Get(s.URL() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("healthz: %d", resp.StatusCode)
	}
	http.DefaultClient.CloseIdleConnections()
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if _, err := http.Get(s.URL() + "/healthz"); err == nil {
		t.Error("still serving after Stop")
	}

	// Stop without Start releases the port.
	s2, err := Listen("127.0.0.1:0", NewHandler(nil, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s3, err := Listen(s2.Addr(), NewHandler(nil, nil), nil); err != nil {
		t.Errorf("port not released: %v", err)
	} else {
		s3.Stop(context.Background())
	}
	if _, err := Listen("256.0.0.1:1", nil, nil); err == nil {
		t.Error("Listen on a bad address succeeded")
	}
}

// registrar is a client that owns its ephemeral nodes (as zkreal does).
type registrar struct {
	zk.Client
	registered []string
}

func (r *registrar) RegisterEphemeral(_ context.Context, path string, _ []byte) error {
	r.registered = append(r.registered, path)
	return nil
}
func (r *registrar) Unregister(context.Context, string) error { return nil }

func TestInstrumentZK(t *testing.T) {
	m := NewMetrics()
	srv := zkfake.NewServer()
	c, other := srv.Client(), srv.Client()
	defer c.Close()
	defer other.Close()
	ic := m.InstrumentZK(c)
	stop := m.TrackZK(c)
	defer stop()
	ctx := context.Background()
	dw, err := ic.DataWatch("/a", func([]byte, *zk.Stat, *zk.WatchEvent) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	defer dw.Stop()
	cw, err := ic.ChildrenWatch("/a", func([]string, *zk.WatchEvent) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	defer cw.Stop()
	other.Create(ctx, "/a", nil, zk.CreateOptions{})
	other.Set(ctx, "/a", []byte("x"), zk.AnyVersion)
	other.Create(ctx, "/a/b", nil, zk.CreateOptions{})
	if err := c.ExpireSession(); err != nil {
		t.Fatal(err)
	}
	body := scrape(t, m)
	for _, want := range []string{
		`monolith_agent_zk_watch_events_total{event="INITIAL",kind="data"} 1`,
		`monolith_agent_zk_watch_events_total{event="CREATED",kind="data"} 1`,
		`monolith_agent_zk_watch_events_total{event="CHANGED",kind="data"} 1`,
		`monolith_agent_zk_watch_events_total{event="INITIAL",kind="children"} 1`,
		`monolith_agent_zk_watch_events_total{event="CHILD",kind="children"} 1`,
		`monolith_agent_zk_state_changes_total{state="LOST"} 1`,
		`monolith_agent_zk_state_changes_total{state="CONNECTED"} 1`,
		`monolith_agent_zk_connected 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if err := c.Suspend(); err != nil {
		t.Fatal(err)
	}
	if body := scrape(t, m); !strings.Contains(body, "monolith_agent_zk_connected 0") {
		t.Error("zk_connected not 0 while suspended")
	}

	// A client owning its ephemeral nodes keeps that ability through the instrumentation.
	r := &registrar{Client: other}
	ir, ok := m.InstrumentZK(r).(interface {
		RegisterEphemeral(context.Context, string, []byte) error
	})
	if !ok {
		t.Fatal("instrumented registrar lost RegisterEphemeral")
	}
	ir.RegisterEphemeral(ctx, "/x", nil)
	if len(r.registered) != 1 {
		t.Error("RegisterEphemeral not forwarded")
	}
	if _, ok := m.InstrumentZK(c).(interface {
		RegisterEphemeral(context.Context, string, []byte) error
	}); ok {
		t.Error("a plain client gained RegisterEphemeral")
	}
}

func TestMetricsRecorders(t *testing.T) {
	m := NewMetrics()
	intercept := m.UnaryServerInterceptor()
	info := &grpc.UnaryServerInfo{FullMethod: "/monolith.serving.agent_service.AgentService/HeartBeat"}
	ok := func(context.Context, any) (any, error) { return "resp", nil }
	fail := func(context.Context, any) (any, error) {
		return nil, status.Error(codes.Unknown, "not implement for agent v3")
	}
	if resp, err := intercept(context.Background(), nil, info, ok); resp != "resp" || err != nil {
		t.Errorf("interceptor changed the answer: %v, %v", resp, err)
	}
	intercept(context.Background(), nil, info, ok)
	intercept(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/x.AgentService/GetReplicas"}, fail)
	m.ObserveReload(10*time.Millisecond, nil)
	m.ObserveReload(time.Millisecond, errors.New("unavailable"))
	m.LayoutUpdate(LayoutWritten)
	m.Sync(nil)
	m.Report(errors.New("x"))
	m.SetModelStates(map[string]int{"AVAILABLE": 2, "LOADING": 1})
	m.SetModelStates(map[string]int{"AVAILABLE": 3})
	mm := m.ModelManager()
	mm.EmitCounter("loop_once_failed", 1, map[string]string{"model": "rs"})
	mm.EmitStore("update.delay", 42, map[string]string{"model": "rs"})
	var copies modelmgr.CopyObserver = mm // the model manager finds it by this interface
	copies.ObserveCopy("rs", 3<<20, 2*time.Second)
	body := scrape(t, m)
	for _, want := range []string{
		`monolith_agent_rpc_requests_total{code="OK",method="HeartBeat"} 2`,
		`monolith_agent_rpc_requests_total{code="Unknown",method="GetReplicas"} 1`,
		`monolith_agent_rpc_duration_seconds_count{method="HeartBeat"} 2`,
		`monolith_agent_tfs_reloads_total{result="ok"} 1`,
		`monolith_agent_tfs_reloads_total{result="error"} 1`,
		`monolith_agent_tfs_reload_duration_seconds_count 2`,
		`monolith_agent_layout_updates_total{result="written"} 1`,
		`monolith_agent_binding_syncs_total{result="ok"} 1`,
		`monolith_agent_service_info_reports_total{result="error"} 1`,
		`monolith_agent_tfs_models{state="AVAILABLE"} 3`,
		`monolith_agent_model_manager_events_total{model="rs",name="loop_once_failed"} 1`,
		`monolith_agent_model_manager_delay_seconds{model="rs",name="update.delay"} 42`,
		`monolith_agent_model_copy_duration_seconds_count{model="rs"} 1`,
		`monolith_agent_model_copy_duration_seconds_sum{model="rs"} 2`,
		`monolith_agent_model_copy_bytes_total{model="rs"} 3.145728e+06`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(body, `state="LOADING"`) {
		t.Error("a state gone from TF Serving stays in tfs_models")
	}
}

// TestNilMetrics: an agent without metrics calls the same methods.
func TestNilMetrics(t *testing.T) {
	var m *Metrics
	c := zkfake.New()
	defer c.Close()
	if m.InstrumentZK(c) != zk.Client(c) {
		t.Error("nil metrics wrapped the client")
	}
	m.TrackZK(c)()
	m.ObserveReload(time.Second, nil)
	m.LayoutUpdate(LayoutError)
	m.Sync(nil)
	m.Report(nil)
	m.SetModelStates(nil)
	m.ModelManager().EmitCounter("x", 1, nil)
	m.ModelManager().EmitStore("x", 1, nil)
	m.ModelManager().ObserveCopy("x", 1, time.Second)
	if m.Registry() != nil {
		t.Error("nil metrics have a registry")
	}
	resp, err := m.UnaryServerInterceptor()(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/a/B"},
		func(context.Context, any) (any, error) { return 1, nil })
	if resp != 1 || err != nil {
		t.Errorf("interceptor = %v, %v", resp, err)
	}
}
