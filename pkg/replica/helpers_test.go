package replica

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	servingconfig "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/config"
	utilsspec "github.com/monolith-go/monolith/gen/spec/agent_service/utils"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/modelconfig"
	"github.com/monolith-go/monolith/pkg/tfs"
	"github.com/monolith-go/monolith/pkg/tfs/faketfs"
	"github.com/monolith-go/monolith/pkg/zk"
)

// quiet is a logger for tests that do not look at the log.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func ptr[T any](v T) *T { return &v }

// nextPort hands out distinct fake ports for configs (nothing listens on them).
var nextPort atomic.Int64

func init() { nextPort.Store(41000) }

// newConf builds an AgentConfig for bzid "bz", base_name "mdl" with env as the environment,
// after set has adjusted the fields.
func newConf(t testing.TB, env map[string]string, set func(f *utilsspec.AgentConfig)) *agentconf.AgentConfig {
	t.Helper()
	f := utilsspec.DefaultAgentConfig()
	f.Bzid, f.BaseName = ptr("bz"), ptr("mdl")
	f.PlatformConfigFile = ptr(filepath.Join(t.TempDir(), "platform_config_file.cfg"))
	if set != nil {
		set(&f)
	}
	c, err := agentconf.New(f, agentconf.Options{
		Env:      agentconf.MapEnv(env),
		FreePort: func() (int, error) { return int(nextPort.Add(1)), nil },
		Logger:   quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// tctx is a context for one test's calls.
func tctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// meta is an AVAILABLE (or stat) ReplicaMeta with a gRPC address.
func meta(addr string, stat datadef.ModelState) datadef.ReplicaMeta {
	m := datadef.NewReplicaMeta()
	m.Address, m.Stat = &addr, stat
	return m
}

// put creates (or sets) path with m's bytes.
func put(t testing.TB, c zk.Client, path string, m datadef.ReplicaMeta) {
	t.Helper()
	ctx := tctx(t)
	_, err := c.Create(ctx, path, m.Serialize(), zk.CreateOptions{MakePath: true})
	if err == nil {
		return
	}
	if _, err := c.Set(ctx, path, m.Serialize(), zk.AnyVersion); err != nil {
		t.Fatal(err)
	}
}

func del(t testing.TB, c zk.Client, path string) {
	t.Helper()
	if err := c.Delete(tctx(t), path, zk.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// eventually polls cond every few milliseconds until it holds or within passes.
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// statusStub is a StatusSource answering from a table, or failing.
type statusStub struct {
	mu    sync.Mutex
	byMdl map[string][]*servingapis.ModelVersionStatus
	err   error
	calls int
}

func (s *statusStub) VersionStatus(_ context.Context, name string, _ modelconfig.Version, _ *string) ([]*servingapis.ModelVersionStatus, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.err != nil {
		return nil, s.err
	}
	return s.byMdl[name], nil
}

func (s *statusStub) set(name string, st ...*servingapis.ModelVersionStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byMdl == nil {
		s.byMdl = map[string][]*servingapis.ModelVersionStatus{}
	}
	s.byMdl[name] = st
}

func (s *statusStub) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

func vs(version int64, state servingapis.ModelVersionStatus_State) *servingapis.ModelVersionStatus {
	return modelconfig.VersionStatus(version, state, 0, nil)
}

// startTFS starts a fake TF Serving serving models (latest-1 policy each).
func startTFS(t testing.TB, models ...string) *faketfs.Server {
	t.Helper()
	list := &servingconfig.ModelConfigList{}
	for _, m := range models {
		mc, err := modelconfig.ModelConfig(m, "/models/"+m, modelconfig.PolicyLatest, modelconfig.VersionData{N: 1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		list.Config = append(list.Config, mc)
	}
	srv, err := faketfs.New(&servingconfig.ModelServerConfig{Config: &servingconfig.ModelServerConfig_ModelConfigList{ModelConfigList: list}}, faketfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Stop(ctx)
	})
	return srv
}

// monitor is a connected tfs.Monitor for conf that reaches the TF Serving ports on loopback.
func monitor(t testing.TB, conf *agentconf.AgentConfig) *tfs.Monitor {
	t.Helper()
	mon := tfs.NewMonitor(conf)
	mon.SetHost("127.0.0.1")
	mon.StatusTimeout = 2 * time.Second
	if err := mon.Connect(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mon.Close() })
	return mon
}

// tfsEnv is an environment whose PORT variables all point at port (every TF Serving role of the
// host is served by one fake).
func tfsEnv(port int, extra map[string]string) map[string]string {
	env := map[string]string{"MY_HOST_IP": "10.1.2.3", "MY_HOST_IPV6": "fe80::abcd"}
	for _, k := range []string{"PORT", "PORT3", "PORT5", "PORT8"} {
		env[k] = fmt.Sprint(port)
	}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

// fixedResolver answers fixed addresses (or fails when they are empty).
type fixedResolver struct{ v4, v6 string }

func (r fixedResolver) IPv4(context.Context) (string, error) {
	if r.v4 == "" {
		return "", fmt.Errorf("no IPv4")
	}
	return r.v4, nil
}

func (r fixedResolver) IPv6(context.Context) (string, error) {
	if r.v6 == "" {
		return "", fmt.Errorf("no IPv6")
	}
	return r.v6, nil
}
