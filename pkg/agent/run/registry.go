// Package agentrun is the agent's entry point (monolith/agent_service/agent.py): it loads
// agent.conf, dispatches on agent_version to the agent (1: pkg/agent/v1, 3: pkg/agent/v3; 2 is
// rejected as the reference does), starts the model manager of the rough sort model (a failure is
// fatal), serves the status endpoint, and runs the agent until its context ends or it can no
// longer serve. Under deploy_type dense with dense_service_num > 1 it runs one agent process per
// dense service instead (the reference's multi-process "MPS" mode), each with REPLICA_ID,
// DENSE_SERVICE_IDX and a ".mps{i}" TF Serving log of its own.
package agentrun

import (
	"context"
	"fmt"
	"google.golang.org/grpc"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	agentbase "github.com/monolith-go/monolith/pkg/agent/base"
	agentstatus "github.com/monolith-go/monolith/pkg/agent/status"
	agentv1 "github.com/monolith-go/monolith/pkg/agent/v1"
	agentv3 "github.com/monolith-go/monolith/pkg/agent/v3"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// Agent is what the entry point runs: agent v1 and agent v3 both satisfy it (v1 through a thin
// adapter for Stop).
type Agent interface {
	agentbase.Agent
	// Stop stops everything the agent started; it is safe before Start and more than once.
	Stop(ctx context.Context) error
}

// Params are what a constructor gets: the reference's (config, conf_path, tfs_log), and the
// metrics and logger of the process.
type Params struct {
	Config *agentconf.AgentConfig
	// ConfPath is the directory of agent.conf (os.path.dirname of its path).
	ConfPath string
	// TFSLog is TF Serving's log file (with ".mps{i}" in a dense multi-process child).
	TFSLog  string
	Metrics *agentstatus.Metrics
	Logger  *slog.Logger
	// TFSBinary and TFSDir are TF Serving's binary and working directory ("": the agent's
	// defaults, $MONOLITH_TFS_BINARY and $MONOLITH_TFS_DIR first); TFSBinaryFrom names where the
	// binary came from in a not-found error (a command's flag).
	TFSBinary, TFSBinaryFrom, TFSDir string
	// ZKSessionTimeout and ZKConnectTimeout configure the agent's ZooKeeper session (0: zkreal's
	// defaults; a negative connect timeout waits without bound).
	ZKSessionTimeout, ZKConnectTimeout time.Duration
	// AdvertiseHost, when set, is the host agent v3 advertises in its container service info
	// instead of the machine's address (agentv3.Options.Host): a one-machine deployment gives
	// 127.0.0.1, which agentconf.LocalIP never is. Agent v1 registers MY_HOST_IP, loopback
	// included, and ignores it.
	AdvertiseHost string
	// TFSRestart makes agent v3 restart TF Serving when its process exits instead of stopping
	// (agentv3.Options.TFSRestart; the command's --tfs_restart). Agent v1 ignores it.
	TFSRestart bool
	// ServiceHost and ServiceOptions are where agent v3's AgentService listens and its gRPC
	// server's options (TLS; agentv3.Options). Agent v1 ignores them.
	ServiceHost    string
	ServiceOptions []grpc.ServerOption
}

// Constructor builds the agent of one agent_version.
type Constructor func(p Params) (Agent, error)

// Registry maps agent versions to their constructors.
type Registry struct {
	mu    sync.Mutex
	ctors map[int]Constructor
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{ctors: map[int]Constructor{}} }

// DefaultRegistry returns a registry with agent v1 and agent v3.
func DefaultRegistry() *Registry {
	r := NewRegistry()
	r.Register(1, NewV1)
	r.Register(3, NewV3)
	return r
}

// Register makes c the constructor of version (replacing any other).
func (r *Registry) Register(version int, c Constructor) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ctors[version] = c
}

// Versions lists the registered versions, sorted.
func (r *Registry) Versions() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(maps.Keys(r.ctors))
}

// New builds the agent of p.Config.AgentVersion (run_agent's dispatch). Version 2 is refused
// with the reference's message; a version that is not registered is an error too.
func (r *Registry) New(p Params) (Agent, error) {
	if p.Config == nil {
		return nil, errkind.New(errkind.Value, "agent: no config")
	}
	v := p.Config.AgentVersion
	if v == 2 {
		return nil, errkind.New(errkind.Generic, "agent_version v2 is not support")
	}
	r.mu.Lock()
	c, ok := r.ctors[v]
	r.mu.Unlock()
	switch {
	case !ok && (v == 1 || v == 3):
		return nil, errkind.New(errkind.Runtime, "agent v%d not available in this build", v)
	case !ok:
		// The reference's message, then what it means.
		return nil, errkind.New(errkind.Generic, "agent_version error %d: the agent.conf's agent_version is 1 or 3 (2 is not supported)", v)
	}
	a, err := c(p)
	if err != nil {
		return nil, fmt.Errorf("agent v%d: %w", v, err)
	}
	return a, nil
}

// NewV3 builds agent v3 with its defaults: TF Serving from MONOLITH_TFS_BINARY, ZooKeeper at
// zk_servers.
func NewV3(p Params) (Agent, error) {
	return agentv3.New(p.Config, agentv3.Options{ConfPath: p.ConfPath, TFSLog: p.TFSLog, Metrics: p.Metrics, Logger: p.Logger,
		TFSBinary: p.TFSBinary, TFSBinaryFrom: p.TFSBinaryFrom, TFSDir: p.TFSDir,
		ZKSessionTimeout: p.ZKSessionTimeout, ZKConnectTimeout: p.ZKConnectTimeout, Host: p.AdvertiseHost, TFSRestart: p.TFSRestart,
		ServiceHost: p.ServiceHost, ServiceOptions: p.ServiceOptions})
}

// NewV1 builds agent v1 with its defaults.
func NewV1(p Params) (Agent, error) {
	a, err := agentv1.New(p.Config, agentv1.Options{ConfPath: p.ConfPath, TFSLog: p.TFSLog, Logger: p.Logger,
		TFSBinary: p.TFSBinary, Dir: p.TFSDir, ZKSessionTimeout: p.ZKSessionTimeout, ZKConnectTimeout: p.ZKConnectTimeout})
	if err != nil {
		return nil, err
	}
	return v1Agent{a}, nil
}

// v1Agent gives agent v1 the Stop of Agent.
type v1Agent struct{ *agentv1.Agent }

func (a v1Agent) Stop(context.Context) error {
	a.Agent.Stop()
	return nil
}
