package agentbase

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	utilsspec "github.com/monolith-go/monolith/gen/spec/agent_service/utils"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// newConf builds an AgentConfig as AgentConfig(**fields) does, with env as the whole environment
// and free ports drawn from 9001 up.
func newConf(t *testing.T, env map[string]string, set func(*utilsspec.AgentConfig)) *agentconf.AgentConfig {
	t.Helper()
	fields := utilsspec.DefaultAgentConfig()
	set(&fields)
	next := 9000
	c, err := agentconf.New(fields, agentconf.Options{
		Env:      agentconf.MapEnv(env),
		FreePort: func() (int, error) { next++; return next, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ptr[T any](v T) *T { return &v }

var portEnv = map[string]string{"PORT": "8001", "PORT2": "8002", "PORT3": "8003", "PORT4": "8004", "PORT5": "8005",
	"PORT6": "8006", "PORT7": "8007", "PORT8": "8008", "PORT9": "8009", "PORT10": "8010",
	"TCE_PSM": "data.monolith.serving", "TCE_CLUSTER": "default"}

// TestCmdAndPortTFS: ps, entry and dense are agentconf.CmdAndPort's command lines, with the
// binary defaulted to TFSBinary.
func TestCmdAndPortTFS(t *testing.T) {
	c := newConf(t, portEnv, func(f *utilsspec.AgentConfig) {
		f.Bzid, f.DeployType, f.DenseAlone, f.NumPS = ptr("gip"), ptr("mixed"), true, 2
	})
	cfgFile := filepath.Join(t.TempDir(), "model.cfg")
	for _, st := range []string{agentconf.ServerPS, agentconf.ServerEntry, agentconf.ServerDense} {
		for _, bin := range []string{"", "/usr/bin/tfs"} {
			got, port, err := CmdAndPort(c, CmdOptions{ServerType: st, ConfigFile: cfgFile, TFSBinary: bin, ConfPath: "/nonexistent"})
			if err != nil {
				t.Fatalf("%s: %v", st, err)
			}
			wantBin := bin
			if wantBin == "" {
				wantBin = "/opt/tiger/monolith_serving/bin/tensorflow_model_server"
			}
			want, wantPort, err := c.CmdAndPort(wantBin, st, cfgFile)
			if err != nil {
				t.Fatal(err)
			}
			if got != want || port != wantPort {
				t.Errorf("%s %q:\n got %q %d\nwant %q %d", st, bin, got, port, want, wantPort)
			}
			if !strings.HasPrefix(got, wantBin+" --model_config_file="+cfgFile+" ") {
				t.Errorf("%s: %q does not start with the binary and the config file", st, got)
			}
		}
	}
	if _, port, _ := CmdAndPort(c, CmdOptions{ServerType: "ps", ConfigFile: cfgFile}); port != 8005 {
		t.Errorf("ps port %d, want PORT5's 8005", port)
	}

	// Errors of agentconf keep their kind (an entry host asked for a PS command).
	entry := newConf(t, portEnv, func(f *utilsspec.AgentConfig) { f.Bzid, f.DeployType = ptr("gip"), ptr("entry") })
	_, _, err := CmdAndPort(entry, CmdOptions{ServerType: "ps", ConfigFile: cfgFile})
	if errkind.Of(err) != errkind.Precondition || !strings.HasPrefix(err.Error(), "ps command: ") {
		t.Errorf("entry host, ps command: %v (kind %v), want a Precondition error", err, errkind.Of(err))
	}
}

// TestCmdAndPortProxy: any other server type is the proxy, given proxy.conf when the conf
// directory has one.
func TestCmdAndPortProxy(t *testing.T) {
	c := newConf(t, portEnv, func(f *utilsspec.AgentConfig) { f.Bzid, f.DeployType = ptr("gip"), ptr("entry") })
	withConf := t.TempDir()
	if err := os.WriteFile(filepath.Join(withConf, "proxy.conf"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	without := t.TempDir()
	proxyPort := *c.ProxyPort
	cases := []struct {
		o    CmdOptions
		want string
	}{
		{CmdOptions{ConfPath: without},
			fmt.Sprintf("/opt/tiger/monolith_serving/bin/server --port=%d --grpc_target=localhost:8003 &", proxyPort)},
		{CmdOptions{ConfPath: withConf, ServerType: "proxy"},
			fmt.Sprintf("/opt/tiger/monolith_serving/bin/server --port=%d --grpc_target=localhost:8003 --conf_file=%s/proxy.conf &", proxyPort, withConf)},
		// The directory is spelled as given, as os.path.join keeps it.
		{CmdOptions{ConfPath: withConf + "//", ProxyBinary: "./server"},
			fmt.Sprintf("./server --port=%d --grpc_target=localhost:8003 --conf_file=%s//proxy.conf &", proxyPort, withConf)},
		// Server types are compared as the reference does: case-sensitively.
		{CmdOptions{ConfPath: without, ServerType: "PS"},
			fmt.Sprintf("/opt/tiger/monolith_serving/bin/server --port=%d --grpc_target=localhost:8003 &", proxyPort)},
	}
	for _, tc := range cases {
		got, port, err := CmdAndPort(c, tc.o)
		if err != nil || got != tc.want || port != proxyPort {
			t.Errorf("%+v:\n got %q %d %v\nwant %q %d", tc.o, got, port, err, tc.want, proxyPort)
		}
	}

	if _, _, err := CmdAndPort(c, CmdOptions{}); errkind.Of(err) != errkind.Type {
		t.Errorf("no conf path: %v, want a Type error", err)
	}
	unified := newConf(t, portEnv, func(f *utilsspec.AgentConfig) { f.Bzid, f.DeployType = ptr("gip"), ptr("unified") })
	if _, _, err := CmdAndPort(unified, CmdOptions{ConfPath: without}); errkind.Of(err) != errkind.Runtime {
		t.Errorf("unified (no proxy port): %v, want a Runtime error", err)
	}
}

// fakeAgent records the calls Run makes.
type fakeAgent struct {
	calls    []string
	startErr error
	waitErr  error
}

func (a *fakeAgent) Start(ctx context.Context) error {
	a.calls = append(a.calls, "start")
	return a.startErr
}

func (a *fakeAgent) WaitForTermination(ctx context.Context) error {
	a.calls = append(a.calls, "wait")
	<-ctx.Done()
	return errors.Join(a.waitErr, ctx.Err())
}

func TestRun(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		a         *fakeAgent
		wantCalls string
		wantErr   []error
	}{
		{&fakeAgent{}, "start,wait", []error{context.Canceled}},
		{&fakeAgent{waitErr: boom}, "start,wait", []error{boom, context.Canceled}},
		{&fakeAgent{startErr: boom}, "start", []error{boom}},
	}
	for _, c := range cases {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := Run(ctx, c.a)
		if got := strings.Join(c.a.calls, ","); got != c.wantCalls {
			t.Errorf("calls %s, want %s", got, c.wantCalls)
		}
		for _, w := range c.wantErr {
			if !errors.Is(err, w) {
				t.Errorf("error %v, want it to wrap %v", err, w)
			}
		}
		if c.a.startErr != nil && !strings.HasPrefix(err.Error(), "start agent: ") {
			t.Errorf("start error %q not wrapped", err)
		}
	}
}
