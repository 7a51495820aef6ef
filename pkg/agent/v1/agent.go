package agentv1

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	agentbase "github.com/monolith-go/monolith/pkg/agent/base"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/agentsvc"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pytext"
	"github.com/monolith-go/monolith/pkg/replica"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkreal"
)

// ErrServiceStopped: the agent service stopped serving by itself.
var ErrServiceStopped = errors.New("agent service stopped")

// Options are AgentV1's arguments besides the config.
type Options struct {
	// ConfPath is the agent conf's directory (the reference's conf_path).
	ConfPath string
	// TFSLog names the serving logs: {dir}/{ps,entry,dense}_{name}. "" sends the processes'
	// output to the agent's stdout.
	TFSLog string
	// TFSBinary defaults to agentbase.TFSBinary; ProxyBinary to agentbase.ProxyBinary.
	TFSBinary, ProxyBinary string
	// Dir is the processes' working directory; "" means agentbase.BinDir.
	Dir string
	// Env is the processes' environment; nil means the agent's.
	Env []string
	// ZK is the ZooKeeper session to use; the agent neither starts nor closes it. nil: the agent
	// connects to the config's zk_servers in Start and closes the session in Stop.
	ZK zk.Client
	// ZKSessionTimeout is the session timeout of the agent's own session (default: zkreal's);
	// ZKConnectTimeout bounds its first connect (0: zkreal's default, negative: no bound).
	ZKSessionTimeout, ZKConnectTimeout time.Duration
	// Replica configures the replica manager.
	Replica replica.ManagerOptions
	// Timing of the process nodes (see TimingFor for the defaults).
	Timing Timing
	// Failover: see MgrOptions.Failover.
	Failover bool
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Agent is the v1 agent (the reference's AgentV1): a ZooKeeper session, the replica manager, the
// AgentService over its watcher, and the process graph of the deploy type. It implements
// agentbase.Agent: Start, then WaitForTermination until the context ends or a process dies.
type Agent struct {
	conf *agentconf.AgentConfig
	opts Options
	log  *slog.Logger
	pm   *ProcessMgr
	dir  string // model config files, removed by Stop

	life   context.Context // ends at Stop: aborts a Start in progress
	cancel context.CancelFunc

	mu         sync.Mutex // guards the fields below; held by Start and Stop's teardown
	started    bool
	stopped    bool
	zk         zk.Client
	ownsZK     bool
	rm         *replica.Manager
	server     *agentsvc.Server
	serverDone chan struct{} // closed when the agent service has stopped
	serverErr  error         // why it stopped; written before serverDone is closed

	rmPub atomic.Pointer[replica.Manager] // rm, for the set checks
}

var _ agentbase.Agent = (*Agent)(nil)

// New builds the agent and its process graph (the reference's AgentV1.__init__): under mixed a PS
// node, a dense node when dense_alone, then the entry (the main process); under entry, ps or dense
// deploys a single main node of that type. The model config files are written now (the
// processes' command lines name them); Stop removes them. Nothing runs until Start.
func New(conf *agentconf.AgentConfig, opts Options) (*Agent, error) {
	if conf == nil {
		return nil, errkind.New(errkind.Value, "agent v1: no config")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Replica.Logger == nil {
		opts.Replica.Logger = opts.Logger
	}
	a := &Agent{conf: conf, opts: opts, log: opts.Logger.With("component", "agent_v1"),
		pm: NewProcessMgr(MgrOptions{Failover: opts.Failover, Logger: opts.Logger}), serverDone: make(chan struct{})}
	a.life, a.cancel = context.WithCancel(context.Background())

	type nodeDef struct {
		t    ProcessType
		main bool
	}
	var defs []nodeDef
	switch conf.Deploy {
	case agentconf.DeployMixed:
		defs = append(defs, nodeDef{PS, false})
		if conf.DenseAlone {
			defs = append(defs, nodeDef{Dense, false})
		}
		defs = append(defs, nodeDef{Entry, true})
	case agentconf.ServerEntry:
		defs = []nodeDef{{Entry, true}}
	case agentconf.ServerPS:
		defs = []nodeDef{{PS, true}}
	default:
		// The reference's else branch: dense (and whatever else, which then has no dense port).
		defs = []nodeDef{{Dense, true}}
	}
	dir, err := os.MkdirTemp("", "monolith-agent-v1-")
	if err != nil {
		return nil, fmt.Errorf("agent v1: model config directory: %w", err)
	}
	a.dir = dir
	addNode := func(d nodeDef) error {
		cfgFile, err := writeModelConfig(conf, dir, d.t.serverType())
		if err != nil {
			return err
		}
		n, err := NewNodeFromConfig(conf, d.t, NodeOptions{
			IsTCEMain: d.main, ConfPath: opts.ConfPath, TFSLog: opts.TFSLog, TFSBinary: opts.TFSBinary,
			ProxyBinary: opts.ProxyBinary, ConfigFile: cfgFile, Env: opts.Env, Dir: opts.Dir,
			Sets: a, Timing: opts.Timing, Logger: opts.Logger,
		})
		if err != nil {
			return err
		}
		a.pm.AddSubproc(n)
		return nil
	}
	for _, d := range defs {
		if err := addNode(d); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("agent v1: %w", err)
		}
	}
	return a, nil
}

// writeModelConfig writes TF Serving's model config for serverType into dir (agentconf would
// write it to a temporary file nobody removes).
func writeModelConfig(conf *agentconf.AgentConfig, dir, serverType string) (string, error) {
	msc, err := conf.ModelServerConfig(serverType)
	if err != nil {
		return "", fmt.Errorf("model config for %s: %w", serverType, err)
	}
	path := filepath.Join(dir, serverType+"_model_config.pbtxt")
	if err := os.WriteFile(path, []byte(pytext.Format(msc)), 0o644); err != nil {
		return "", fmt.Errorf("model config for %s: %w", serverType, err)
	}
	return path, nil
}

// ProcessMgr is the agent's process graph.
func (a *Agent) ProcessMgr() *ProcessMgr { return a.pm }

// Config is the agent's config.
func (a *Agent) Config() *agentconf.AgentConfig { return a.conf }

// ReplicaManager is the replica manager (nil before Start; waits for a Start in progress).
func (a *Agent) ReplicaManager() *replica.Manager {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.rm
}

// AgentServicePort is the port the agent service listens on (0 before Start; waits for a Start
// in progress).
func (a *Agent) AgentServicePort() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.server == nil {
		return 0
	}
	return a.server.Port()
}

// IsPSSetStarted implements StartedSets through the replica manager (false before Start). It
// reads rmPub, not rm: the entry asks while Start holds a.mu.
func (a *Agent) IsPSSetStarted() bool {
	rm := a.rmPub.Load()
	return rm != nil && rm.IsPSSetStarted()
}

// IsDenseSetStarted implements StartedSets through the replica manager (false before Start).
func (a *Agent) IsDenseSetStarted() bool {
	rm := a.rmPub.Load()
	return rm != nil && rm.IsDenseSetStarted()
}

// Start starts the ZooKeeper session (unless one was given), the replica manager, the agent
// service on agent_port, then the process graph (the reference's start). It returns once every
// process serves, or with an error after undoing everything when a step fails, when ctx ends or
// when Stop is called meanwhile.
func (a *Agent) Start(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.started || a.stopped {
		return errkind.New(errkind.Runtime, "agent v1: already started or stopped")
	}
	a.started = true
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(a.life, cancel)()
	if err := a.start(ctx); err != nil {
		a.teardownLocked()
		return fmt.Errorf("agent v1: %w", err)
	}
	return nil
}

func (a *Agent) start(ctx context.Context) error {
	if a.opts.ZK != nil {
		a.zk = a.opts.ZK
	} else {
		c, err := dialZK(ctx, a.conf, a.opts.ZKSessionTimeout, a.opts.ZKConnectTimeout, a.opts.Logger)
		if err != nil {
			return err
		}
		a.zk, a.ownsZK = c, true
	}
	a.log.Info("start kazoo finished!")

	rm, err := replica.NewManager(a.zk, a.conf, a.opts.Replica)
	if err != nil {
		return err
	}
	if err := rm.Start(ctx); err != nil {
		return err
	}
	a.rm = rm
	a.rmPub.Store(rm)
	a.log.Info("start replica_mgr finished!")

	if a.conf.AgentPort == nil {
		return errkind.New(errkind.Attribute, "agent_port is not set")
	}
	svc := agentsvc.NewWatcherService(agentsvc.FromWatcher(rm.Watcher()), agentsvc.WatcherConfigFrom(a.conf),
		agentsvc.WithLogger(a.opts.Logger))
	server, err := agentsvc.Listen(svc, *a.conf.AgentPort)
	if err != nil {
		return err
	}
	server.Start()
	a.server = server
	go func() {
		a.serverErr = server.Wait()
		close(a.serverDone)
	}()
	a.log.Info("start agent service", "addr", fmt.Sprintf("localhost:%d", server.Port()))

	if err := a.pm.Start(ctx); err != nil {
		return err
	}
	a.log.Info("start ProcessMgr finished!")
	return nil
}

// WaitForTermination blocks until ctx ends (the command's SIGTERM / SIGINT), a serving process
// exits (the supervisor has then stopped the others) or the agent service stops by itself; then
// it stops everything (Stop) and returns: nil when ctx ended or Stop was called, else why the
// agent could not go on serving (wrapping ErrExited or ErrServiceStopped).
func (a *Agent) WaitForTermination(ctx context.Context) error {
	var reason error
	select {
	case <-ctx.Done():
		a.log.Info("stopping", "cause", context.Cause(ctx))
	case <-a.pm.Done():
		reason = a.pm.Err()
	case <-a.serverDone:
		a.mu.Lock()
		stopped := a.stopped
		a.mu.Unlock()
		if !stopped {
			reason = errkind.Wrap(errkind.Runtime, fmt.Errorf("%w: %v", ErrServiceStopped, a.serverErr))
		}
	}
	a.Stop()
	if reason != nil {
		return fmt.Errorf("agent v1: %w", reason)
	}
	return nil
}

// Stop stops the processes (SIGTERM, SIGKILL after the grace period, all reaped), the agent
// service, the replica manager and the agent's own ZooKeeper session, in the reference's order,
// and removes the model config files. A Start in progress is aborted first. It is safe to call
// more than once.
func (a *Agent) Stop() {
	a.cancel()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.teardownLocked()
}

func (a *Agent) teardownLocked() {
	if a.stopped {
		return
	}
	a.stopped = true
	a.pm.KillAll()
	a.log.Info("close ProcessMgr finished!")
	if a.server != nil {
		a.server.Stop(0)
		<-a.serverDone
		a.log.Info("close agent service")
	}
	if a.rm != nil {
		a.rmPub.Store(nil)
		a.rm.Stop()
		a.log.Info("close replica_mgr finished!")
	}
	if a.zk != nil && a.ownsZK {
		if err := a.zk.Close(); err != nil {
			a.log.Warn("close ZooKeeper session", "err", err)
		}
		a.log.Info("close kazoo finished!")
	}
	if err := os.RemoveAll(a.dir); err != nil {
		a.log.Warn("remove model config files", "dir", a.dir, "err", err)
	}
}

// dialZK connects to conf's zk_servers, kazoo's hosts string "host:port,host:port[/chroot]".
func dialZK(ctx context.Context, conf *agentconf.AgentConfig, timeout, connectTimeout time.Duration, log *slog.Logger) (zk.Client, error) {
	if conf.ZKServers == nil || strings.TrimSpace(*conf.ZKServers) == "" {
		return nil, errkind.New(errkind.Value, "zk_servers is not set")
	}
	return zkreal.ConnectHosts(ctx, *conf.ZKServers, zkreal.Options{SessionTimeout: timeout, ConnectTimeout: connectTimeout, Logger: log})
}
