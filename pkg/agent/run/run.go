package agentrun

import (
	"context"
	"errors"
	"fmt"
	"google.golang.org/grpc"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	agentstatus "github.com/monolith-go/monolith/pkg/agent/status"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/modelmgr"
	"github.com/monolith-go/monolith/pkg/pathutil"
)

// Environment variables of the dense multi-process mode.
const (
	// ReplicaIDEnv and DenseServiceIdxEnv are set for each child, as the reference sets them.
	ReplicaIDEnv       = "REPLICA_ID"
	DenseServiceIdxEnv = "DENSE_SERVICE_IDX"
	// MPSIndexEnv marks a child process of the dense multi-process mode and holds its index: the
	// child runs one agent instead of spawning children (the reference's children were forks
	// running run_agent; a Go child is this binary executed again).
	MPSIndexEnv = "MONOLITH_AGENT_MPS_INDEX"
)

// ErrModelManager marks the failure of the rough sort model manager's start, which is fatal to
// the agent (the reference SIGKILLed its own process).
var ErrModelManager = errors.New("model_manager start failed")

// ConfigError is a configuration that cannot be loaded (the command exits with status 2).
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// ModelManager is what the entry point needs of the model manager (modelmgr.Manager).
type ModelManager interface {
	Start(ctx context.Context) error
	Stop()
}

// Ready is what OnReady learns once an agent runs.
type Ready struct {
	Agent Agent
	// Config is the agent's configuration.
	Config *agentconf.AgentConfig
	// StatusURL is the status endpoint's "http://host:port" ("" when there is none).
	StatusURL string
	// TFSLog is TF Serving's log file.
	TFSLog string
	// MPSIndex is the dense service index of a multi-process child, -1 otherwise.
	MPSIndex int
}

// Spawner starts child i of the dense multi-process mode with env added to the environment and
// returns its wait function. Cancelling ctx must stop the child.
type Spawner func(ctx context.Context, i int, env []string) (wait func() error, err error)

// Options configure Main and RunAgent.
type Options struct {
	// ConfFile is agent.conf (--conf).
	ConfFile string
	// TFSLog is TF Serving's log file (--tfs_log).
	TFSLog string
	// StatusAddr is the status endpoint's address ("" for none). In a dense multi-process child i
	// a non-zero port becomes port+i.
	StatusAddr string
	// Env reads the environment for the config (default os.LookupEnv).
	Env agentconf.LookupEnv
	// Registry maps agent versions to constructors (default DefaultRegistry()).
	Registry *Registry
	// Metrics are the process's metrics (default: new ones).
	Metrics *agentstatus.Metrics
	// NewModelManager builds the rough sort model manager (default modelmgr.New).
	NewModelManager func(modelmgr.Config) (ModelManager, error)
	// Spawn starts a dense multi-process child (default: this binary again, with ChildArgs).
	Spawn Spawner
	// ChildArgs are the children's arguments (default os.Args[1:]).
	ChildArgs []string
	// OnReady is called once the agent has started (in a child of the multi-process mode, in the
	// child).
	OnReady func(Ready)
	// StopTimeout bounds stopping the agent after a failed start (default 30 s).
	StopTimeout time.Duration
	Logger      *slog.Logger
	// RecentErrors, when set, holds the log's recent WARN and ERROR records (Logger's handler
	// tees into it) for /status and the status page.
	RecentErrors *agentstatus.ErrorRing
	// TFSBinary, TFSBinaryFrom, TFSDir, ZKSessionTimeout and ZKConnectTimeout go to the agent
	// (Params).
	TFSBinary, TFSBinaryFrom, TFSDir   string
	ZKSessionTimeout, ZKConnectTimeout time.Duration
	// AdvertiseHost, when set, is the host agent v3 advertises for its TF Serving and
	// AgentService (Params.AdvertiseHost).
	AdvertiseHost string
	// TFSRestart makes agent v3 restart TF Serving when it exits (Params.TFSRestart); false: the
	// agent stops and Main returns the exit, as the reference.
	TFSRestart bool
	// ServiceHost and ServiceOptions: where agent v3's AgentService listens, its server's options
	// (Params).
	ServiceHost    string
	ServiceOptions []grpc.ServerOption
}

func (o *Options) defaults() {
	if o.Env == nil {
		o.Env = os.LookupEnv
	}
	if o.Registry == nil {
		o.Registry = DefaultRegistry()
	}
	if o.Metrics == nil {
		o.Metrics = agentstatus.NewMetrics()
	}
	if o.NewModelManager == nil {
		o.NewModelManager = func(c modelmgr.Config) (ModelManager, error) { return modelmgr.New(c) }
	}
	if o.ChildArgs == nil && len(os.Args) > 1 {
		o.ChildArgs = os.Args[1:]
	}
	if o.Spawn == nil {
		o.Spawn = execSelf(o.ChildArgs)
	}
	if o.StopTimeout <= 0 {
		o.StopTimeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// LoadConfig reads agent.conf with o's environment; a failure is a *ConfigError.
func LoadConfig(o Options) (*agentconf.AgentConfig, error) {
	if o.ConfFile == "" {
		return nil, &ConfigError{errkind.New(errkind.Value, "no agent conf given (--conf)")}
	}
	env := o.Env
	if env == nil {
		env = os.LookupEnv
	}
	conf, err := agentconf.FromFile(o.ConfFile, agentconf.Options{Env: env, Logger: o.Logger})
	if err != nil {
		return nil, &ConfigError{err}
	}
	return conf, nil
}

// Main is agent.py's main: in a dense deployment with dense_service_num > 1 it runs one child
// process per dense service and waits for all of them; otherwise (and in such a child) it runs
// one agent (RunAgent) until ctx ends or the agent stops serving.
func Main(ctx context.Context, o Options) error {
	o.defaults()
	if v, ok := o.Env(MPSIndexEnv); ok {
		idx, err := strconv.Atoi(v)
		if err != nil || idx < 0 {
			return &ConfigError{errkind.New(errkind.Value, "%s=%q: not a dense service index", MPSIndexEnv, v)}
		}
		return RunAgent(ctx, o, idx)
	}
	conf, err := LoadConfig(o)
	if err != nil {
		return err
	}
	if conf.Deploy == agentconf.ServerDense && conf.DenseServiceNum > 1 {
		return runMPS(ctx, o, conf)
	}
	return runAgent(ctx, o, conf, -1)
}

// runMPS starts dense_service_num children: child i gets REPLICA_ID = replica_id *
// dense_service_num + i and DENSE_SERVICE_IDX = i. It returns once all have exited (cancelling
// ctx stops them), with their errors.
func runMPS(ctx context.Context, o Options, conf *agentconf.AgentConfig) error {
	n := conf.DenseServiceNum
	rid := 0
	if conf.ReplicaID != nil {
		rid = *conf.ReplicaID
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		env := []string{
			fmt.Sprintf("%s=%d", ReplicaIDEnv, rid*n+i),
			fmt.Sprintf("%s=%d", DenseServiceIdxEnv, i),
			fmt.Sprintf("%s=%d", MPSIndexEnv, i),
		}
		o.Logger.Info("starting dense service process", "index", i, "replica_id", rid*n+i)
		wait, err := o.Spawn(ctx, i, env)
		if err != nil {
			errs[i] = fmt.Errorf("dense service %d: %w", i, err)
			cancel() // the reference's Process.start cannot fail; here the others are stopped
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := wait(); err != nil {
				errs[i] = fmt.Errorf("dense service %d: %w", i, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// execSelf runs this binary again with args.
func execSelf(args []string) Spawner {
	return func(ctx context.Context, _ int, env []string) (func() error, error) {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("own executable: %w", err)
		}
		cmd := exec.CommandContext(ctx, exe, args...)
		cmd.Env = append(os.Environ(), env...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, os.Stdout, os.Stderr
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
		cmd.WaitDelay = time.Minute // then SIGKILL
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		return cmd.Wait, nil
	}
}

// RunAgent is run_agent for one agent: in dense service child mpsIndex (-1: not a child) its TF
// Serving log gets the suffix ".mps{i}". It loads agent.conf, builds the agent of its version,
// starts the rough sort model manager (a failure stops the agent and returns ErrModelManager),
// serves the status endpoint, starts the agent and waits for its termination.
func RunAgent(ctx context.Context, o Options, mpsIndex int) error {
	o.defaults()
	conf, err := LoadConfig(o)
	if err != nil {
		return err
	}
	return runAgent(ctx, o, conf, mpsIndex)
}

func runAgent(ctx context.Context, o Options, conf *agentconf.AgentConfig, mpsIndex int) error {
	log := o.Logger
	tfsLog := o.TFSLog
	statusAddr := o.StatusAddr
	if mpsIndex >= 0 {
		log = log.With("mps", mpsIndex)
		tfsLog = fmt.Sprintf("%s.mps%d", tfsLog, mpsIndex)
		var err error
		if statusAddr, err = offsetPort(statusAddr, mpsIndex); err != nil {
			return &ConfigError{err}
		}
		log.Info("dense service process", "replica_id", conf.ReplicaID, "tfs_log", tfsLog)
	}
	confPath := pathutil.Dirname(o.ConfFile)
	agent, err := o.Registry.New(Params{Config: conf, ConfPath: confPath, TFSLog: tfsLog, Metrics: o.Metrics, Logger: log,
		TFSBinary: o.TFSBinary, TFSBinaryFrom: o.TFSBinaryFrom, TFSDir: o.TFSDir,
		ZKSessionTimeout: o.ZKSessionTimeout, ZKConnectTimeout: o.ZKConnectTimeout, AdvertiseHost: o.AdvertiseHost,
		TFSRestart: o.TFSRestart, ServiceHost: o.ServiceHost, ServiceOptions: o.ServiceOptions})
	if err != nil {
		if isConfigKind(err) {
			return &ConfigError{err}
		}
		return err
	}
	stop := func() {
		sctx, cancel := context.WithTimeout(context.Background(), o.StopTimeout)
		defer cancel()
		if err := agent.Stop(sctx); err != nil {
			log.Warn("stop agent", "err", err)
		}
	}

	mm, err := o.NewModelManager(modelmgr.Config{
		ModelName: deref(conf.RoughSortModelName), SourcePath: deref(conf.RoughSortModelP2PPath),
		ReceivePath: deref(conf.RoughSortModelLocalPath), Metrics: o.Metrics.ModelManager(), Logger: log,
	})
	if err == nil {
		err = mm.Start(ctx)
		defer mm.Stop()
	}
	if err != nil {
		log.Error("model_manager start failed, stopping", "err", err)
		stop()
		return fmt.Errorf("%w: %w", ErrModelManager, err)
	}

	var src agentstatus.Source = &basicSource{conf: conf, tfsLog: tfsLog, confPath: confPath, agent: agent}
	if s, ok := agent.(agentstatus.Source); ok {
		src = s
	}
	var status *agentstatus.Server
	if statusAddr != "" {
		var hopts []agentstatus.HandlerOption
		if o.RecentErrors != nil {
			hopts = append(hopts, agentstatus.WithRecentErrors(o.RecentErrors))
		}
		if status, err = agentstatus.Listen(statusAddr, agentstatus.NewHandler(src, o.Metrics, hopts...), log); err != nil {
			stop()
			return err
		}
		status.Start()
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			status.Stop(sctx)
		}()
	}

	if err := agent.Start(ctx); err != nil {
		stop() // the agents undo a failed start themselves; this also releases what New made
		return fmt.Errorf("start agent: %w", err)
	}
	if b, ok := src.(*basicSource); ok {
		b.setRunning(true)
		defer b.setRunning(false)
	}
	if o.OnReady != nil {
		r := Ready{Agent: agent, Config: conf, TFSLog: tfsLog, MPSIndex: mpsIndex}
		if status != nil {
			r.StatusURL = status.URL()
		}
		o.OnReady(r)
	}
	return agent.WaitForTermination(ctx)
}

// isConfigKind tells errors about the configuration (an unsupported agent_version, a deploy type
// or value the agent refuses) from failures of the environment (a missing binary).
func isConfigKind(err error) bool {
	switch errkind.Of(err) {
	case errkind.Generic, errkind.Precondition, errkind.Value, errkind.Type, errkind.Attribute:
		return true
	}
	return false
}

// offsetPort adds i to addr's port unless it is 0 (a free port anyway).
func offsetPort(addr string, i int) (string, error) {
	if addr == "" || i == 0 {
		return addr, nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", errkind.New(errkind.Value, "status address %q: %v", addr, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return "", errkind.New(errkind.Value, "status address %q: port %q", addr, port)
	}
	if p == 0 {
		return addr, nil
	}
	return net.JoinHostPort(host, strconv.Itoa(p+i)), nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// basicSource is the status of an agent that reports none itself (agent v1): its configuration,
// and whether it runs; its readiness is the agent's own (agentstatus.Readier) once it runs.
type basicSource struct {
	conf             *agentconf.AgentConfig
	tfsLog, confPath string
	agent            Agent
	mu               sync.Mutex
	running          bool
	startedAt        time.Time
}

func (b *basicSource) setRunning(r bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.running = r
	if r {
		b.startedAt = time.Now()
	}
}

func (b *basicSource) Status(context.Context) agentstatus.Report {
	r := agentstatus.NewReport(b.conf, b.confPath, b.tfsLog, "UNKNOWN")
	b.mu.Lock()
	defer b.mu.Unlock()
	r.Agent.StartedAt, r.Agent.Running = b.startedAt, b.running
	return r
}

// Ready implements agentstatus.Readier: not before the agent runs, then what the agent says when
// it tells (agent v1 does), else ready.
func (b *basicSource) Ready(ctx context.Context) []string {
	if err := b.Healthy(); err != nil {
		return []string{err.Error()}
	}
	if r, ok := b.agent.(agentstatus.Readier); ok {
		return r.Ready(ctx)
	}
	return nil
}

func (b *basicSource) Healthy() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.running {
		return errkind.New(errkind.Runtime, "agent not running")
	}
	return nil
}
