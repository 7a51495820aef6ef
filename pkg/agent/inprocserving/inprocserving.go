// Package inprocserving runs Monolith's serving side in one process with nothing to install: agent
// v3 over an in-process ZooKeeper (zkfake) and an in-process model server (pkg/modelserver, as
// cmd/model_server serves), serving the exports the caller names. It declares and publishes their
// sub-graphs as an operator does with agentctl decl / pub, and the model server's entries find
// their PS replicas through the agent's HeartBeat, as cmd/model_server's do. cmd/agent's demo and
// cmd/online serve so.
package inprocserving

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	agentrun "github.com/monolith-go/monolith/pkg/agent/run"
	agentstatus "github.com/monolith-go/monolith/pkg/agent/status"
	agentv3 "github.com/monolith-go/monolith/pkg/agent/v3"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/modelserver/psshard"
	"github.com/monolith-go/monolith/pkg/tfs"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkfake"
)

// SyncInterval is how often the agent advertises what the model server has AVAILABLE (30 s in
// production), and how often the entries ask the agent's HeartBeat for their PS replicas.
const SyncInterval = time.Second

// ZKServers is the ZooKeeper the agent's status names: the configs' zk_servers is a server nothing
// listens on, the ZooKeeper is zkfake in this process.
const ZKServers = "in-process"

// Model is an export to serve: its sub-graphs are <Base>/<sub-graph>/<version>/.
type Model struct {
	Name string
	Base string
	// SubGraphs are the sub-graphs to declare and publish ("entry", "ps_0", ...).
	SubGraphs []string
}

// Options configure Run.
type Options struct {
	// Conf is the agent.conf (agent_version 3, deploy_type unified); its bzid and layout name the
	// ZooKeeper paths the models are published under.
	Conf []byte
	// Env is the container's environment the config reads (MY_POD_NAME, SHARD_ID, ...).
	Env    agentconf.LookupEnv
	Models []Model
	// StatusAddr is the agent's status endpoint (none when empty).
	StatusAddr string
	// Observer hears of every parameter sync push that says the newest event time its updates
	// include (besides the model server's freshness metrics); nil: none.
	Observer psshard.Observer
	// RecentErrors, when set, collects the agent's recent errors for its status page.
	RecentErrors *agentstatus.ErrorRing
	Logger       *slog.Logger
	// OnReady is called once the agent is ready.
	OnReady func(Ready)
}

// Ready is what Run started, once the agent is ready.
type Ready struct {
	agentrun.Ready
	// ConfFile is the agent.conf written into the work directory; Layout its ZooKeeper layout.
	ConfFile, Layout string
	// Filters are the layout filters the agent applies.
	Filters []string
	// TFSAddr is the model server's gRPC address (TF Serving's PredictionService).
	TFSAddr string
	// AgentServiceAddr is the agent's AgentService (HeartBeat: the replicas' addresses).
	AgentServiceAddr string
	// ModelConfigFile is the model server's config, which the agent writes.
	ModelConfigFile string
}

// Run serves o.Models until ctx ends.
func Run(ctx context.Context, o Options) error {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	dir, err := os.MkdirTemp("", "monolith-serving")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	confFile := filepath.Join(dir, "agent.conf")
	if err := os.WriteFile(confFile, o.Conf, 0o644); err != nil {
		return err
	}
	srv := zkfake.NewServer()
	agentZK, operator := srv.Client(), srv.Client()
	defer agentZK.Close()
	defer operator.Close()
	conf, err := agentrun.LoadConfig(agentrun.Options{ConfFile: confFile, Env: o.Env, Logger: log})
	if err != nil {
		return err
	}
	layout, err := conf.LayoutPath()
	if err != nil {
		return &agentrun.ConfigError{Err: err}
	}
	if conf.Bzid == nil || *conf.Bzid == "" {
		return &agentrun.ConfigError{Err: errors.New("the agent.conf has no bzid")}
	}
	for _, m := range o.Models {
		if err := Publish(ctx, operator, *conf.Bzid, layout, m); err != nil {
			return fmt.Errorf("publish %s: %w", m.Name, err)
		}
	}

	// The entries ask the agent for their PS replicas, once it listens.
	var agent atomic.Pointer[agentv3.Agent]
	agentAddr := func() string {
		if a := agent.Load(); a != nil && a.AgentServiceAddr() != "" {
			return LocalAddr(a.AgentServiceAddr())
		}
		return ""
	}
	reg := agentrun.NewRegistry()
	reg.Register(3, func(p agentrun.Params) (agentrun.Agent, error) {
		port := *p.Config.TFSPortGRPC
		reloader, err := agentv3.DialReloader(fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			return nil, err
		}
		// The agent's copy of the config names the in-process ZooKeeper it gets as Options.ZK,
		// which is all it reports of zk_servers.
		conf, servers := *p.Config, ZKServers
		conf.ZKServers = &servers
		a, err := agentv3.New(&conf, agentv3.Options{
			ConfPath: p.ConfPath, TFSLog: p.TFSLog, ZK: agentZK, Host: "127.0.0.1", ModelConfigDir: dir,
			TFS: func(file string) (tfs.Process, error) {
				return newModelServerTFS(file, port, agentAddr, o.Observer, p.Logger), nil
			},
			Reloader: reloader, SyncInterval: SyncInterval, Metrics: p.Metrics, Logger: p.Logger,
		})
		if err == nil {
			agent.Store(a)
		}
		return a, err
	})
	return agentrun.Main(ctx, agentrun.Options{
		ConfFile: confFile, TFSLog: filepath.Join(dir, "tfs.log"), StatusAddr: o.StatusAddr, Env: o.Env,
		Registry: reg, Logger: log, RecentErrors: o.RecentErrors,
		OnReady: func(r agentrun.Ready) {
			if o.OnReady == nil {
				return
			}
			rd := Ready{Ready: r, ConfFile: confFile, Layout: layout}
			if a, ok := r.Agent.(*agentv3.Agent); ok {
				if p, ok := a.TFS().(*modelServerTFS); ok {
					rd.TFSAddr = p.Addr()
				}
				if st := a.Status(context.Background()).Layout; st != nil {
					rd.Filters = st.Filters
				}
				rd.AgentServiceAddr = LocalAddr(a.AgentServiceAddr())
				rd.ModelConfigFile = a.ModelConfigFile()
			}
			o.OnReady(rd)
		},
	})
}

// Publish declares the model's saved models (its sub-graphs under m.Base) and publishes them into
// the layout, as an operator does with agentctl decl / pub.
func Publish(ctx context.Context, c zk.Client, bzid, layout string, m Model) error {
	for _, sub := range m.SubGraphs {
		cfg := fmt.Sprintf(`{"model_base_path": %q, "version_policy": "latest"}`, filepath.Join(m.Base, sub))
		if _, err := c.Create(ctx, fmt.Sprintf("/%s/saved_models/%s/%s", bzid, m.Name, sub), []byte(cfg), zk.CreateOptions{MakePath: true}); err != nil {
			return err
		}
		if err := c.EnsurePath(ctx, layout+"/"+m.Name+":"+sub); err != nil {
			return err
		}
	}
	return nil
}

// LocalAddr turns "[::]:port" (the AgentService listens on every address) into 127.0.0.1:port.
func LocalAddr(addr string) string {
	if i := strings.LastIndexByte(addr, ':'); i >= 0 {
		return "127.0.0.1" + addr[i:]
	}
	return addr
}
