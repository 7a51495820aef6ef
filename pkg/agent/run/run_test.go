package agentrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/monolith-go/monolith/internal/leakcheck"
	agentstatus "github.com/monolith-go/monolith/pkg/agent/status"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/modelmgr"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// helperEnv makes the test binary act as a dense multi-process child (TestMain): it writes its
// environment's REPLICA_ID, DENSE_SERVICE_IDX and MPS index to the file it names and exits.
const helperEnv = "AGENTRUN_TEST_CHILD_OUT"

func TestMain(m *testing.M) {
	if out := os.Getenv(helperEnv); out != "" {
		line := fmt.Sprintf("%s %s %s %s\n", os.Getenv(MPSIndexEnv), os.Getenv(ReplicaIDEnv), os.Getenv(DenseServiceIdxEnv), strings.Join(os.Args[1:], " "))
		f, err := os.OpenFile(out, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
		if err == nil {
			_, err = f.WriteString(line)
			f.Close()
		}
		if err != nil {
			os.Exit(3)
		}
		if os.Getenv(MPSIndexEnv) == "1" {
			os.Exit(5) // one child fails, so the parent's error is checked
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// fakeAgent records what the entry point does with it.
type fakeAgent struct {
	mu       sync.Mutex
	p        Params
	started  int
	stopped  int
	startErr error
	waitErr  error
}

func (a *fakeAgent) Start(context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.started++
	return a.startErr
}

func (a *fakeAgent) WaitForTermination(ctx context.Context) error {
	<-ctx.Done()
	a.Stop(context.Background())
	return a.waitErr
}

func (a *fakeAgent) Stop(context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stopped++
	return nil
}

func (a *fakeAgent) counts() (int, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.started, a.stopped
}

// fakeMM is a model manager whose start fails on demand; it records its config.
type fakeMM struct {
	mu      sync.Mutex
	cfg     modelmgr.Config
	err     error
	stopped bool
}

func (m *fakeMM) Start(context.Context) error { return m.err }
func (m *fakeMM) Stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stopped = true
}

func writeConf(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agent.conf")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRegistry(t *testing.T) {
	mk := func(p Params) (Agent, error) { return &fakeAgent{p: p}, nil }
	bad := func(Params) (Agent, error) { return nil, errkind.New(errkind.Value, "boom") }
	tests := []struct {
		name    string
		version int
		reg     map[int]Constructor
		kind    errkind.Kind
		msg     string
	}{
		{"v1", 1, map[int]Constructor{1: mk}, errkind.Unknown, ""},
		{"v3", 3, map[int]Constructor{3: mk}, errkind.Unknown, ""},
		{"v2 is refused even when registered", 2, map[int]Constructor{2: mk}, errkind.Generic, "agent_version v2 is not support"},
		{"v1 not built in", 1, map[int]Constructor{3: mk}, errkind.Runtime, "agent v1 not available in this build"},
		{"unknown version", 4, map[int]Constructor{1: mk, 3: mk}, errkind.Generic, "agent_version error 4: the agent.conf's agent_version is 1 or 3 (2 is not supported)"},
		{"constructor error", 3, map[int]Constructor{3: bad}, errkind.Value, "agent v3: boom"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRegistry()
			for v, c := range tc.reg {
				r.Register(v, c)
			}
			conf := &agentconf.AgentConfig{}
			conf.AgentVersion = tc.version
			a, err := r.New(Params{Config: conf, ConfPath: "/conf"})
			if tc.msg == "" {
				if err != nil || a.(*fakeAgent).p.ConfPath != "/conf" {
					t.Fatalf("New = %v, %v", a, err)
				}
				return
			}
			if err == nil || errkind.Of(err) != tc.kind || err.Error() != tc.msg {
				t.Fatalf("err = %v (kind %v), want %q (kind %v)", err, errkind.Of(err), tc.msg, tc.kind)
			}
		})
	}
	if got := DefaultRegistry().Versions(); !slices.Equal(got, []int{1, 3}) {
		t.Errorf("default versions = %v", got)
	}
}

// unifiedConf is a v3 agent.conf with a rough sort model.
const unifiedConf = `bzid b
deploy_type unified
agent_version 3
layout_pattern l
rough_sort_model_name rs
rough_sort_model_p2p_path /p2p
rough_sort_model_local_path /local
`

// TestRunAgent: the entry point's sequence around one agent: build, model manager, status
// endpoint, start, wait until the context ends; and its failures.
func TestRunAgent(t *testing.T) {
	tests := []struct {
		name        string
		mmErr       error
		startErr    error
		wantErr     error
		wantStarted int
	}{
		{"runs until cancelled", nil, nil, nil, 1},
		{"model manager fails: fatal, agent never started", errors.New("no download"), nil, ErrModelManager, 0},
		{"agent start fails", nil, errors.New("port taken"), nil, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			agent := &fakeAgent{startErr: tc.startErr}
			reg := NewRegistry()
			reg.Register(3, func(p Params) (Agent, error) { agent.p = p; return agent, nil })
			mm := &fakeMM{err: tc.mmErr}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var ready Ready
			conf := writeConf(t, unifiedConf)
			o := Options{
				ConfFile: conf, TFSLog: "/logs/tfs.log", StatusAddr: "127.0.0.1:0",
				Env: agentconf.MapEnv(nil), Registry: reg, Logger: quiet,
				NewModelManager: func(c modelmgr.Config) (ModelManager, error) { mm.cfg = c; return mm, nil },
				OnReady: func(r Ready) {
					ready = r
					checkEndpoint(t, r.StatusURL)
					cancel()
				},
			}
			err := Main(ctx, o)
			switch {
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			case tc.startErr != nil && (err == nil || !errors.Is(err, tc.startErr)):
				t.Fatalf("err = %v, want %v", err, tc.startErr)
			case tc.wantErr == nil && tc.startErr == nil && err != nil:
				t.Fatal(err)
			}
			started, stopped := agent.counts()
			if started != tc.wantStarted || stopped == 0 {
				t.Errorf("started %d (want %d), stopped %d times", started, tc.wantStarted, stopped)
			}
			if agent.p.ConfPath != filepath.Dir(conf) || agent.p.TFSLog != "/logs/tfs.log" {
				t.Errorf("params = %+v", agent.p)
			}
			if mm.cfg.ModelName != "rs" || mm.cfg.SourcePath != "/p2p" || mm.cfg.ReceivePath != "/local" || mm.cfg.Metrics == nil {
				t.Errorf("model manager config = %+v", mm.cfg)
			}
			if tc.wantStarted == 1 && tc.startErr == nil && ready.Agent == nil {
				t.Error("OnReady not called")
			}
		})
	}
}

// checkEndpoint reads /healthz and /status of a running agent (a basic source: the fake agent
// reports no status of its own).
func checkEndpoint(t *testing.T, url string) {
	t.Helper()
	if url == "" {
		t.Error("no status endpoint")
		return
	}
	resp, err := http.Get(url + "/healthz")
	if err != nil {
		t.Error(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "ok\n" {
		t.Errorf("/healthz = %d %q", resp.StatusCode, body)
	}
	resp, err = http.Get(url + "/status")
	if err != nil {
		t.Error(err)
		return
	}
	defer resp.Body.Close()
	var rep agentstatus.Report
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		t.Error(err)
		return
	}
	if rep.Agent.Version != 3 || rep.Agent.Bzid != "b" || !rep.Agent.Running {
		t.Errorf("/status agent = %+v", rep.Agent)
	}
}

const denseConf = `bzid b
deploy_type dense
dense_alone true
dense_service_num 3
agent_version 3
`

// TestDenseMultiProcess: under deploy_type dense with dense_service_num 3 the entry point runs
// three children, child i with REPLICA_ID = replica_id * 3 + i, DENSE_SERVICE_IDX = i and its
// index; they are real processes (this test binary run again, see TestMain).
func TestDenseMultiProcess(t *testing.T) {
	leakcheck.Check(t)
	out := filepath.Join(t.TempDir(), "children")
	t.Setenv(helperEnv, out)
	conf := writeConf(t, denseConf)
	err := Main(context.Background(), Options{
		ConfFile: conf, Env: agentconf.MapEnv(map[string]string{"REPLICA_ID": "2"}), Logger: quiet,
		ChildArgs: []string{"--conf", conf},
	})
	if err == nil || !strings.Contains(err.Error(), "dense service 1: exit status 5") {
		t.Errorf("err = %v, want child 1's exit status", err)
	}
	data, rerr := os.ReadFile(out)
	if rerr != nil {
		t.Fatal(rerr)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	slices.Sort(lines)
	want := []string{"0 6 0 --conf " + conf, "1 7 1 --conf " + conf, "2 8 2 --conf " + conf}
	if !slices.Equal(lines, want) {
		t.Errorf("children saw\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}

// TestDenseChild: a child of the multi-process mode runs one agent with the ".mps{i}" log and its
// own status port; a spawn failure stops the children already started.
func TestDenseChild(t *testing.T) {
	leakcheck.Check(t)
	conf := writeConf(t, denseConf)
	var got Params
	reg := NewRegistry()
	reg.Register(3, func(p Params) (Agent, error) { got = p; return nil, errors.New("stop here") })
	err := Main(context.Background(), Options{
		ConfFile: conf, TFSLog: "/logs/tfs.log", StatusAddr: "127.0.0.1:8080", Registry: reg, Logger: quiet,
		Env: agentconf.MapEnv(map[string]string{MPSIndexEnv: "2", DenseServiceIdxEnv: "2", ReplicaIDEnv: "8"}),
	})
	if err == nil || !strings.Contains(err.Error(), "stop here") {
		t.Fatalf("err = %v", err)
	}
	if got.TFSLog != "/logs/tfs.log.mps2" || *got.Config.ReplicaID != 8 {
		t.Errorf("child params: tfs_log %q, replica_id %v", got.TFSLog, *got.Config.ReplicaID)
	}

	var mu sync.Mutex
	stopped := 0
	err = Main(context.Background(), Options{
		ConfFile: conf, Env: agentconf.MapEnv(nil), Logger: quiet,
		Spawn: func(ctx context.Context, i int, env []string) (func() error, error) {
			if i == 1 {
				return nil, errors.New("fork failed")
			}
			return func() error {
				<-ctx.Done() // stopped because child 1 failed to start
				mu.Lock()
				stopped++
				mu.Unlock()
				return nil
			}, nil
		},
	})
	if err == nil || !strings.Contains(err.Error(), "dense service 1: fork failed") || stopped != 1 {
		t.Errorf("err = %v, %d children stopped (want 1)", err, stopped)
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		o    Options
		msg  string
	}{
		{"no conf", Options{}, "no agent conf given"},
		{"missing file", Options{ConfFile: "/nonexistent/agent.conf"}, "no such file"},
		{"bad value", Options{ConfFile: writeConf(t, "bzid b\nnum_ps many\n")}, `num_ps "many"`},
		{"bad mps index", Options{ConfFile: writeConf(t, unifiedConf), Env: agentconf.MapEnv(map[string]string{MPSIndexEnv: "x"})}, "not a dense service index"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Logger = quiet
			err := Main(context.Background(), tc.o)
			var ce *ConfigError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want a ConfigError containing %q", err, tc.msg)
			}
		})
	}
}

func TestPaths(t *testing.T) {
	for _, tc := range []struct {
		addr string
		i    int
		want string
	}{{"127.0.0.1:8080", 2, "127.0.0.1:8082"}, {"127.0.0.1:0", 2, "127.0.0.1:0"}, {"", 1, ""}, {"[::1]:10", 1, "[::1]:11"}} {
		if got, err := offsetPort(tc.addr, tc.i); err != nil || got != tc.want {
			t.Errorf("offsetPort(%q, %d) = %q, %v; want %q", tc.addr, tc.i, got, err, tc.want)
		}
	}
	if _, err := offsetPort("nope", 1); err == nil {
		t.Error("offsetPort(nope) succeeded")
	}
}

// readyAgent is a fakeAgent that tells its readiness (as agent v1 does) and logs a warning when it
// starts.
type readyAgent struct {
	fakeAgent
	log     *slog.Logger
	reasons []string
}

func (a *readyAgent) Start(ctx context.Context) error {
	a.log.Warn("replica watcher lagging", "model", "m")
	return a.fakeAgent.Start(ctx)
}

func (a *readyAgent) Ready(context.Context) []string { return a.reasons }

// TestReadyAndRecentErrors: an agent that reports no status of its own but tells its readiness
// (agent v1) is asked by /readyz once it runs, and the log's WARN records reach /status through
// Options.RecentErrors.
func TestReadyAndRecentErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		reasons []string
		code    int
	}{
		{"ready", nil, http.StatusOK},
		{"not ready", []string{"zookeeper: SUSPENDED"}, http.StatusServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			ring := agentstatus.NewErrorRing(0)
			log := slog.New(ring.Handler(slog.NewTextHandler(io.Discard, nil)))
			agent := &readyAgent{log: log, reasons: tc.reasons}
			reg := NewRegistry()
			reg.Register(3, func(p Params) (Agent, error) { return agent, nil })
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var ready agentstatus.Readiness
			var code int
			var rep agentstatus.Report
			err := Main(ctx, Options{
				ConfFile: writeConf(t, unifiedConf), StatusAddr: "127.0.0.1:0", Env: agentconf.MapEnv(nil),
				Registry: reg, Logger: log, RecentErrors: ring,
				NewModelManager: func(c modelmgr.Config) (ModelManager, error) { return &fakeMM{}, nil },
				OnReady: func(r Ready) {
					defer cancel()
					code = getJSON(t, r.StatusURL+"/readyz", &ready)
					getJSON(t, r.StatusURL+"/status", &rep)
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			if code != tc.code || ready.Ready != (tc.reasons == nil) || fmt.Sprint(ready.Reasons) != fmt.Sprint(append([]string{}, tc.reasons...)) {
				t.Errorf("/readyz = %d %+v, want %d with reasons %v", code, ready, tc.code, tc.reasons)
			}
			if len(rep.RecentErrors) != 1 || !strings.Contains(fmt.Sprint(rep.RecentErrors[0]), "replica watcher lagging") {
				t.Errorf("/status recent errors = %+v, want the start's warning", rep.RecentErrors)
			}
		})
	}
}

// getJSON GETs url into v and returns the status code.
func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	return resp.StatusCode
}
