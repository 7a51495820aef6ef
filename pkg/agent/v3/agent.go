// Package agentv3 is the unified agent (monolith/agent_service/agent_v3.py): one TF Serving per
// container serves the saved models of a ZooKeeper layout that pass the host's layout filters.
//
// The agent watches its layout (/{bzid}/layouts/...); at every change it filters the saved models
// (pkg/agent/filter), writes TF Serving's model server config file and sends it to TF Serving
// (HandleReloadConfigRequest, retried until accepted). Every SyncInterval it advertises the
// models TF Serving reports AVAILABLE as bindings (/{bzid}/binding/...), every
// PendingSyncInterval while a model is still loading and at once after a layout change, so a
// model is advertised as soon as it serves and withdrawn as soon as it leaves the layout (the
// reference waited for its 30 s sync either way); every ReportInterval it reports its
// addresses as service info (/{bzid}/container_service/...), and its AgentService answers
// HeartBeat with the addresses of every container bound to the layout's models.
//
// Differences from the reference (specs/agent_service/agent_v3.yaml): the layout filters'
// conditions are evaluated by a small safe evaluator instead of Python's eval; the config file is
// created with os.CreateTemp (not the racy tempfile.mktemp) and replaced atomically, and removed
// on Stop; the new config is also pushed to TF Serving instead of waiting for its next 60 s poll;
// a layout a filter fails on leaves the previous config in place and is reported, as the
// reference's exception did, but in the status endpoint too, while a saved model whose deploy
// config cannot be applied (no or an unknown version policy) is skipped, or keeps its previous
// config, and the rest of the layout loads; latest_once, which TF Serving does not know (the
// reference crashed on it), serves the newest version present when the agent first sees the
// model, for the agent's life, waiting until one exists (a pinned version TF Serving fails to
// load moves the pin to the next older one, so the newest version that loads serves); stopping is
// driven by a context instead of signal handlers installed by the constructor, and the agent does
// not SIGKILL its own process.
//
// Additions: the agent reads every version TF Serving has of each model (VersionLister), so a
// version that failed to load is on the status endpoint (/status, the page), logged once at WARN
// and counted, also while an older version serves; it is ready (/readyz) only while every saved
// model the filters pass has an AVAILABLE version; with Options.TFSRestart (cmd/agent's
// --tfs_restart, on by default) a TF Serving process that exits is restarted with backoff instead
// of stopping the agent, whose bindings then stay in the other agents' HeartBeat.
package agentv3

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"

	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	servingconfig "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/config"
	agentbase "github.com/monolith-go/monolith/pkg/agent/base"
	"github.com/monolith-go/monolith/pkg/agent/filter"
	agentstatus "github.com/monolith-go/monolith/pkg/agent/status"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/agentsvc"
	"github.com/monolith-go/monolith/pkg/backend"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pyfmt"
	"github.com/monolith-go/monolith/pkg/tfs"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkreal"
)

// Defaults of Options, the reference's where it has one.
const (
	DefaultReportInterval = 60 * time.Second // report_service_info's thread
	DefaultSyncInterval   = 30 * time.Second // sync_available_saved_models' thread
	// DefaultPendingSyncInterval is the sync interval while a model is loading.
	DefaultPendingSyncInterval = time.Second
	DefaultPollInterval        = time.Second // wait_for_termination's poll of TF Serving
	DefaultTFSStopGrace        = 10 * time.Second
	DefaultServiceStopGrace    = time.Second
	DefaultReloadBackoff       = 100 * time.Millisecond
	DefaultReloadBackoffMax    = 10 * time.Second
	DefaultCallTimeout         = 10 * time.Second
	// DefaultLatestOnceRecheckInterval is how often a latest_once saved model without a version
	// yet is looked for again.
	DefaultLatestOnceRecheckInterval = 5 * time.Second
	// DefaultTFSRestartBackoff and DefaultTFSRestartBackoffMax bound the wait before restarting
	// TF Serving after its process exited (Options.TFSRestart).
	DefaultTFSRestartBackoff    = time.Second
	DefaultTFSRestartBackoffMax = 30 * time.Second
	// EmptyModelConfig is the config file's content before the first layout: no model
	// (gen_empty_model_config_file).
	EmptyModelConfig = "model_config_list {}"
	// TFSBinaryEnv names TF Serving's binary (the reference's MONOLITH_TFS_BINARY).
	TFSBinaryEnv = agentbase.TFSBinaryEnv
	// TFSDirEnv names TF Serving's working directory (see Options.TFSDir).
	TFSDirEnv = agentbase.TFSDirEnv
)

// Options configure an Agent beyond its AgentConfig. The zero value runs the real thing: TF
// Serving from MONOLITH_TFS_BINARY, ZooKeeper at zk_servers.
type Options struct {
	// ConfPath is the directory of agent.conf (the reference's conf_path; reported only).
	ConfPath string
	// TFSLog is TF Serving's log file.
	TFSLog string
	// TFSBinary is TF Serving's binary; default $MONOLITH_TFS_BINARY, else
	// agentbase.TFSBinary. New fails, naming what it looked for, when it does not exist.
	TFSBinary string
	// TFSBinaryFrom names where TFSBinary came from in that error (a command's flag,
	// "--tfs_binary"; default "the TF Serving binary option").
	TFSBinaryFrom string
	// TFSDir is TF Serving's working directory (its flags name conf/... relative to it); default
	// $MONOLITH_TFS_DIR, else pathutil.FindMain() (the reference's chdir(find_main())), else
	// agentconf.TFSHome when it exists, else the binary's directory (agentbase.TFSLocator). Only
	// TF Serving runs there: the agent's own working directory is never changed nor used.
	TFSDir string
	// TFS, when set, makes the TF Serving process instead of tfs.NewWrapper (tests: a
	// tfs.FakeWrapper; the demo: an in-process fake). It gets the model config file's path.
	TFS func(modelConfigFile string) (tfs.Process, error)
	// Reloader sends new configs to TF Serving; the agent closes it on Stop. Default: gRPC to
	// localhost:tfs_port_grpc when TFS is nil, none otherwise (TF Serving then reads the file).
	Reloader Reloader
	// ZK is the ZooKeeper client to use (it stays the caller's); nil connects to zk_servers.
	ZK zk.Client
	// Host is the address advertised in the service info; default agentconf.LocalIP.
	Host string
	// ModelConfigDir is where the model config file is created; default os.TempDir().
	ModelConfigDir string
	// Intervals and grace periods; zero means the Default* constant.
	ReportInterval, SyncInterval, PollInterval time.Duration
	// PendingSyncInterval is the sync interval while a configured model is not AVAILABLE (any
	// other state, UNLOADING or END of a model published again included).
	PendingSyncInterval            time.Duration
	TFSStopGrace, ServiceStopGrace time.Duration
	ReloadTimeout, ReloadBackoff   time.Duration
	ReloadBackoffMax, CallTimeout  time.Duration
	// LatestOnceRecheckInterval is how often the layout is applied again while a latest_once
	// saved model has no version under its base path yet (only such models' directories are
	// listed again; the rest is unchanged).
	LatestOnceRecheckInterval time.Duration
	// TFSRestart restarts TF Serving when its process exits (kill -9, a crash) instead of
	// stopping the agent (the reference's wait_for_termination, and the default here): a new
	// process (Options.TFS again, or tfs.NewWrapper) reads the model config file, the current
	// config is sent to it again, and the bindings stay (their containers keep serving HeartBeat)
	// until the restarted TF Serving reports the models again. The first restart waits
	// TFSRestartBackoff, each following one twice as long up to TFSRestartBackoffMax, and once a
	// process has run for TFSRestartBackoffMax the next waits TFSRestartBackoff again. Restarts
	// are counted in Status (Report.TFS) and the metrics (tfs_restarts_total); while one is
	// pending the agent is not ready (Ready), but still healthy (Healthy: the agent is doing its
	// job). TF Serving's log of the process that exited is kept as TFSLog+".prev".
	TFSRestart                              bool
	TFSRestartBackoff, TFSRestartBackoffMax time.Duration
	// ServiceHost is where the AgentService listens ("": every address, as the reference);
	// ServiceOptions are added to its gRPC server's (TLS credentials: pkg/tlsconfig). The
	// agent's own calls to its TF Serving stay plaintext on localhost.
	ServiceHost    string
	ServiceOptions []grpc.ServerOption
	// ZKSessionTimeout is the ZooKeeper session timeout asked for (0: zkreal's default);
	// ZKConnectTimeout bounds the first connect (0: zkreal's default, negative: no bound).
	ZKSessionTimeout, ZKConnectTimeout time.Duration
	// Metrics receive the agent's metrics (nil: none).
	Metrics *agentstatus.Metrics
	// Logger receives the agent's log (slog.Default() when nil).
	Logger *slog.Logger
}

func (o *Options) defaults() {
	set := func(d *time.Duration, def time.Duration) {
		if *d <= 0 {
			*d = def
		}
	}
	set(&o.ReportInterval, DefaultReportInterval)
	set(&o.SyncInterval, DefaultSyncInterval)
	set(&o.PendingSyncInterval, DefaultPendingSyncInterval)
	set(&o.PollInterval, DefaultPollInterval)
	set(&o.TFSStopGrace, DefaultTFSStopGrace)
	set(&o.ServiceStopGrace, DefaultServiceStopGrace)
	set(&o.ReloadTimeout, defaultReloadTimeout)
	set(&o.ReloadBackoff, DefaultReloadBackoff)
	set(&o.ReloadBackoffMax, DefaultReloadBackoffMax)
	set(&o.CallTimeout, DefaultCallTimeout)
	set(&o.LatestOnceRecheckInterval, DefaultLatestOnceRecheckInterval)
	set(&o.TFSRestartBackoff, DefaultTFSRestartBackoff)
	set(&o.TFSRestartBackoffMax, DefaultTFSRestartBackoffMax)
	o.TFSRestartBackoffMax = max(o.TFSRestartBackoffMax, o.TFSRestartBackoff)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Agent is agent v3 (AgentV3). Create it with New, then Start, and WaitForTermination or Stop.
type Agent struct {
	conf       *agentconf.AgentConfig
	opts       Options
	log        *slog.Logger
	metrics    *agentstatus.Metrics
	filters    filter.Set
	layoutPath string
	container  backend.Container
	info       backend.ContainerServiceInfo
	addrs      map[string]string // the service info's addresses, for the status
	configFile string
	reloader   *reloader // nil: no reload RPC
	// newTFS makes a TF Serving process (restart: one replacing a process that exited).
	newTFS func(restart bool) (tfs.Process, error)

	// procMu guards the process, which a restart replaces, and its summary.
	procMu  sync.Mutex
	proc    tfs.Process
	tfsInfo agentstatus.TFSSummary

	// failMu guards the failed loads already logged (noteFailures).
	failMu   sync.Mutex
	failures map[failureKey]bool

	syncMu   sync.Mutex    // one sync at a time: a status read and its binding write are one step
	syncWake chan struct{} // a layout change: sync now
	stopping chan struct{} // closed when Stop begins

	// layoutMu serializes applying layouts (the ZooKeeper callback and the latest_once re-check)
	// and guards the fields up to the next blank line.
	layoutMu    sync.Mutex
	entries     []backend.LayoutEntry // the last layout delivered
	haveEntries bool
	waiting     int                                   // latest_once saved models of the applied layout without a version yet
	skipped     map[string]string                     // saved model -> why its deploy config is not applied
	lastConfigs map[string]*servingconfig.ModelConfig // the config TF Serving was last given, by name
	pins        latestOncePins

	mu        sync.Mutex
	started   bool
	stopped   bool
	startedAt time.Time
	client    zk.Client // instrumented
	rawClient zk.Client // what was connected (closed on Stop when ownsZK)
	ownsZK    bool
	untrack   func()
	be        *backend.ZKBackend
	svc       *agentsvc.Server
	cancel    context.CancelFunc
	layout    agentstatus.LayoutSummary
	lastText  string
	bound     []string
	wg        sync.WaitGroup

	// lifeMu is held by Start and Stop, so a Stop never runs beside a Start; life ends when Stop
	// begins, which aborts a Start in progress.
	lifeMu   sync.Mutex
	life     context.Context
	endLife  context.CancelFunc
	stopOnce sync.Once
	stopErr  error
}

var _ agentbase.Agent = (*Agent)(nil)

// New builds agent v3 for conf (AgentV3.__init__): it checks the deploy type and version, parses
// the layout filters, computes the container and its service info, creates the model config file
// holding no model and prepares TF Serving. Nothing runs until Start; Stop removes the file.
func New(conf *agentconf.AgentConfig, opts Options) (*Agent, error) {
	a, err := newAgent(conf, opts)
	if err != nil && opts.Reloader != nil {
		opts.Reloader.Close() // the agent would have owned it
	}
	return a, err
}

func newAgent(conf *agentconf.AgentConfig, opts Options) (*Agent, error) {
	if conf == nil {
		return nil, errkind.New(errkind.Value, "agent v3: no config")
	}
	opts.defaults()
	if conf.Deploy != agentconf.ServerUnified {
		return nil, errkind.New(errkind.Precondition, "agent v3 only supports unified deploy_type, got %s", conf.Deploy)
	}
	if conf.AgentVersion != 3 {
		return nil, errkind.New(errkind.Precondition, "agent version %d unexpected", conf.AgentVersion)
	}
	if conf.Bzid == nil || *conf.Bzid == "" {
		return nil, errkind.New(errkind.Attribute, "agent v3: bzid is not set")
	}
	for _, p := range []struct {
		name string
		port *int
	}{{"tfs_port_grpc", conf.TFSPortGRPC}, {"tfs_port_http", conf.TFSPortHTTP}, {"tfs_port_archon", conf.TFSPortArchon},
		{"agent_port", conf.AgentPort}} {
		if p.port == nil {
			return nil, errkind.New(errkind.Attribute, "agent v3: %s is not set", p.name)
		}
	}
	layoutPath, err := conf.LayoutPath()
	if err != nil {
		return nil, fmt.Errorf("agent v3: %w", err)
	}
	filters, err := filter.FromConfig(conf)
	if err != nil {
		return nil, fmt.Errorf("agent v3: %w", err)
	}
	a := &Agent{
		conf: conf, opts: opts, metrics: opts.Metrics, filters: filters, layoutPath: layoutPath,
		container: backend.Container{Cluster: conf.ContainerCluster(), ID: conf.ContainerID()},
		log:       opts.Logger.With("component", "agent_v3"),
		syncWake:  make(chan struct{}, 1),
		stopping:  make(chan struct{}),
	}
	host := opts.Host
	if host == "" {
		host = agentconf.LocalIP(conf.LookupEnv)
	}
	a.addrs = map[string]string{
		"grpc":   fmt.Sprintf("%s:%d", host, *conf.TFSPortGRPC),
		"http":   fmt.Sprintf("%s:%d", host, *conf.TFSPortHTTP),
		"archon": fmt.Sprintf("%s:%d", host, *conf.TFSPortArchon),
		"agent":  fmt.Sprintf("%s:%d", host, *conf.AgentPort),
	}
	debug := DebugInfo(layoutPath, filters)
	grpcAddr, httpAddr, archon, agent := a.addrs["grpc"], a.addrs["http"], a.addrs["archon"], a.addrs["agent"]
	a.info = backend.ContainerServiceInfo{GRPC: &grpcAddr, HTTP: &httpAddr, Archon: &archon, Agent: &agent,
		IDC: conf.IDC(), DebugInfo: &debug}
	a.life, a.endLife = context.WithCancel(context.Background())
	a.layout = agentstatus.LayoutSummary{Path: layoutPath, Filters: filters.Strings(), Entries: []agentstatus.LayoutEntry{}}

	if a.configFile, err = writeEmptyConfig(opts.ModelConfigDir); err != nil {
		return nil, err
	}
	a.lastText = EmptyModelConfig
	if err := a.prepareTFS(); err != nil {
		os.Remove(a.configFile)
		return nil, err
	}
	return a, nil
}

// DebugInfo is the service info's debug_info: json.dumps({'layout_path': ..., 'layout_filters':
// [...]}) with Python's separators and escaping.
func DebugInfo(layoutPath string, filters filter.Set) string {
	var b strings.Builder
	b.WriteString(`{"layout_path": `)
	b.WriteString(pyfmt.JSONString(layoutPath))
	b.WriteString(`, "layout_filters": [`)
	for i, f := range filters {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(pyfmt.JSONString(f.String()))
	}
	b.WriteString("]}")
	return b.String()
}

// writeEmptyConfig creates the model config file holding no model.
func writeEmptyConfig(dir string) (string, error) {
	// Absolute, since TF Serving reads it from its own working directory.
	abs, err := filepath.Abs(cmp.Or(dir, os.TempDir()))
	if err != nil {
		return "", fmt.Errorf("agent v3: model config directory: %w", err)
	}
	name, err := writeTemp(abs, "model_server_config_*.pbtxt", EmptyModelConfig)
	if err != nil {
		return "", fmt.Errorf("agent v3: %w", err)
	}
	return name, nil
}

func (a *Agent) prepareTFS() error {
	o := a.opts
	if o.TFS != nil {
		a.newTFS = func(bool) (tfs.Process, error) {
			p, err := o.TFS(a.configFile)
			if err != nil {
				return nil, fmt.Errorf("agent v3: tf serving: %w", err)
			}
			return p, nil
		}
		p, err := a.newTFS(false)
		if err != nil {
			return err
		}
		a.proc = p
		if o.Reloader != nil {
			a.reloader = newReloader(o.Reloader, o, a.log, a.metrics)
		}
		return nil
	}
	loc := agentbase.TFSLocator{Binary: o.TFSBinary, BinaryFrom: o.TFSBinaryFrom, Dir: o.TFSDir, LookupEnv: a.conf.LookupEnv,
		DefaultBinary: defaultTFSBinary}
	bin, err := loc.LocateBinary()
	if err != nil {
		return err
	}
	dir, source, err := loc.LocateDir(bin)
	if err != nil {
		return err
	}
	a.log.Info("tf serving", "binary", bin, "dir", dir, "dir_from", source)
	env := func(k string) string { v, _ := a.conf.LookupEnv(k); return v }
	a.newTFS = func(restart bool) (tfs.Process, error) {
		if restart {
			keepPreviousLog(o.TFSLog, a.log)
		}
		w, err := tfs.NewWrapper(tfs.WrapperConfig{
			Binary: bin, ArchonPort: *a.conf.TFSPortArchon, GRPCPort: *a.conf.TFSPortGRPC, HTTPPort: *a.conf.TFSPortHTTP,
			ModelConfigFile: a.configFile, TFS: a.conf.TfServingConfig, FetchPSTimeoutMs: a.conf.FetchPSTimeoutMs,
			LogFile: o.TFSLog, Dir: dir, PSM: env("TCE_PSM"), Cluster: env("TCE_CLUSTER"),
			Env: tfsEnv(os.Environ(), *a.conf.AgentPort),
		})
		if err != nil {
			return nil, fmt.Errorf("agent v3: %w", err)
		}
		p, err := newWrapperTFS(w, *a.conf.TFSPortGRPC)
		if err != nil {
			return nil, fmt.Errorf("agent v3: %w", err)
		}
		return p, nil
	}
	p, err := a.newTFS(false)
	if err != nil {
		return err
	}
	a.proc = p
	r := o.Reloader
	if r == nil {
		gr, err := DialReloader(fmt.Sprintf("localhost:%d", *a.conf.TFSPortGRPC))
		if err != nil {
			p.Stop(0) // nothing runs yet: this closes its status channel
			return fmt.Errorf("agent v3: %w", err)
		}
		r = gr
	}
	a.reloader = newReloader(r, o, a.log, a.metrics)
	return nil
}

// AgentPortEnv is where an entry server finds the agent's port (Monolith's agent_heartbeat.cc, and
// cmd/model_server): agent v1 sets it for its entry process; agent v3 for TF Serving.
const AgentPortEnv = "PORT2"

// tfsEnv is TF Serving's environment: the agent's with PORT2 = agent_port, so that the entry
// sub-graphs it serves reach this agent's AgentService (HeartBeat) to find their PS replicas, also
// when agent_port came from agent.conf or was a free port rather than from PORT2.
func tfsEnv(environ []string, agentPort int) []string {
	return agentbase.SetEnv(environ, AgentPortEnv, strconv.Itoa(agentPort))
}

// defaultTFSBinary is TF Serving's binary when neither Options.TFSBinary nor $MONOLITH_TFS_BINARY
// names one (a variable for the tests).
var defaultTFSBinary = agentbase.TFSBinary

// ModelConfigFile is TF Serving's model config file (the reference's _model_config_path).
func (a *Agent) ModelConfigFile() string { return a.configFile }

// Container is the container this agent advertises.
func (a *Agent) Container() backend.Container { return a.container }

// ServiceInfo is what the agent reports for its container.
func (a *Agent) ServiceInfo() backend.ContainerServiceInfo { return a.info }

// TFS is the TF Serving process (a new one after each restart).
func (a *Agent) TFS() tfs.Process {
	a.procMu.Lock()
	defer a.procMu.Unlock()
	return a.proc
}

// Backend is the agent's ZooKeeper backend (nil before Start).
func (a *Agent) Backend() *backend.ZKBackend {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.be
}

// AgentServiceAddr is the address the AgentService listens on ("" before Start).
func (a *Agent) AgentServiceAddr() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.svc == nil {
		return ""
	}
	return a.svc.Addr().String()
}

// Start starts TF Serving, connects to ZooKeeper, starts the AgentService, reports the service
// info, starts the periodic report and sync, and registers the layout callback (AgentV3.start).
// On failure everything started is stopped again.
func (a *Agent) Start(ctx context.Context) error {
	a.lifeMu.Lock()
	defer a.lifeMu.Unlock()
	a.mu.Lock()
	if a.started || a.stopped {
		a.mu.Unlock()
		return errkind.New(errkind.Runtime, "agent v3: already started or stopped")
	}
	a.started = true
	a.startedAt = time.Now()
	a.mu.Unlock()
	// Stop aborts a Start in progress (a ZooKeeper connection that does not come up).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(a.life, cancel)()
	if err := a.start(ctx); err != nil {
		sctx, scancel := context.WithTimeout(context.Background(), a.opts.TFSStopGrace+a.opts.ServiceStopGrace)
		defer scancel()
		a.stopOnce.Do(func() { a.stopErr = a.stop(sctx) })
		return err
	}
	return nil
}

func (a *Agent) start(ctx context.Context) error {
	if err := a.TFS().Start(ctx); err != nil {
		return fmt.Errorf("agent v3: start tf serving: %w", err)
	}
	a.procMu.Lock()
	a.tfsInfo.Running, a.tfsInfo.Restart = true, a.opts.TFSRestart
	a.procMu.Unlock()
	raw, owns := a.opts.ZK, false
	if raw == nil {
		c, err := a.connectZK(ctx)
		if err != nil {
			return err
		}
		raw, owns = c, true
	}
	client := a.metrics.InstrumentZK(raw)
	untrack := a.metrics.TrackZK(raw)
	be, err := backend.New(client, backend.Config{Bzid: *a.conf.Bzid, CallTimeout: a.opts.CallTimeout, Logger: a.opts.Logger})
	if err != nil {
		untrack()
		if owns {
			raw.Close()
		}
		return fmt.Errorf("agent v3: %w", err)
	}
	bg, cancel := context.WithCancel(context.Background())
	a.mu.Lock()
	a.client, a.rawClient, a.ownsZK, a.untrack, a.be, a.cancel = client, raw, owns, untrack, be, cancel
	a.mu.Unlock()

	res, err := agentsvc.ResourceFromConfig(a.conf)
	if err != nil {
		return fmt.Errorf("agent v3: %w", err)
	}
	svc, err := agentsvc.ListenOn(agentsvc.NewProviderService(a.AddrsMap, res, agentsvc.WithLogger(a.opts.Logger)),
		a.opts.ServiceHost, *a.conf.AgentPort, append([]grpc.ServerOption{grpc.UnaryInterceptor(a.metrics.UnaryServerInterceptor())}, a.opts.ServiceOptions...)...)
	if err != nil {
		return fmt.Errorf("agent v3: %w", err)
	}
	svc.Start()
	a.mu.Lock()
	a.svc = svc
	a.mu.Unlock()

	if a.reloader != nil {
		a.wg.Add(1)
		go func() { defer a.wg.Done(); a.reloader.run(bg) }()
	}
	// The first report is made here so the service info exists once Start returns.
	a.reportServiceInfo(ctx)
	a.every(bg, a.opts.ReportInterval, a.reportServiceInfo)
	a.every(bg, a.opts.LatestOnceRecheckInterval, func(context.Context) { a.recheckLatestOnce() })
	a.wg.Add(1)
	go func() { defer a.wg.Done(); a.syncLoop(bg) }()
	if a.opts.TFSRestart {
		a.wg.Add(1)
		go func() { defer a.wg.Done(); a.superviseTFS(bg) }()
	}
	if err := be.RegisterLayoutCallback(ctx, a.layoutPath, a.LayoutUpdate); err != nil {
		return fmt.Errorf("agent v3: layout %s: %w", a.layoutPath, err)
	}
	a.log.Info("agent v3 started", "layout", a.layoutPath, "filters", a.filters.Strings(),
		"container", a.container.String(), "agent_service", svc.Addr().String(), "model_config_file", a.configFile)
	return nil
}

// connectZK opens a session on zk_servers ("host:port,...[/chroot]", as kazoo reads it).
func (a *Agent) connectZK(ctx context.Context) (zk.Client, error) {
	if a.conf.ZKServers == nil || *a.conf.ZKServers == "" {
		return nil, errkind.New(errkind.Attribute, "agent v3: zk_servers is not set")
	}
	c, err := zkreal.ConnectHosts(ctx, *a.conf.ZKServers, zkreal.Options{Logger: a.opts.Logger,
		SessionTimeout: a.opts.ZKSessionTimeout, ConnectTimeout: a.opts.ZKConnectTimeout})
	if err != nil {
		// zkreal's error names the servers and what the connect waited for.
		return nil, fmt.Errorf("agent v3: zookeeper: %w", err)
	}
	return c, nil
}

// every runs fn every interval until ctx ends (start_bg_thread).
func (a *Agent) every(ctx context.Context, interval time.Duration, fn func(context.Context)) {
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				fn(ctx)
			}
		}
	}()
}

func (a *Agent) reportServiceInfo(ctx context.Context) {
	be := a.Backend()
	if be == nil {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, a.opts.CallTimeout)
	err := be.ReportServiceInfo(cctx, a.container, a.info)
	cancel()
	a.metrics.Report(err)
	if err != nil && ctx.Err() == nil {
		a.log.Error("report service info", "container", a.container.String(), "err", err)
	}
}

// SyncAvailableSavedModels advertises the models TF Serving reports AVAILABLE as this
// container's bindings (sync_available_saved_models). Calls are serialized, so the last one
// always writes what TF Serving reported last.
func (a *Agent) SyncAvailableSavedModels(ctx context.Context) error {
	_, err := a.sync(ctx)
	return err
}

// syncLoop syncs at once, then every SyncInterval, every PendingSyncInterval while a model is
// loading, and at once when woken by a layout change.
func (a *Agent) syncLoop(ctx context.Context) {
	for {
		pending, _ := a.sync(ctx)
		d := a.opts.SyncInterval
		if pending {
			d = min(d, a.opts.PendingSyncInterval)
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-a.syncWake:
			t.Stop()
		case <-t.C:
		}
	}
}

// wakeSync asks the sync loop for a sync now.
func (a *Agent) wakeSync() {
	select {
	case a.syncWake <- struct{}{}:
	default:
	}
}

// sync is SyncAvailableSavedModels; pending says whether a configured model is still on its way
// to AVAILABLE (or TF Serving could not be asked).
func (a *Agent) sync(ctx context.Context) (pending bool, err error) {
	be := a.Backend()
	if be == nil {
		return false, errkind.New(errkind.Runtime, "agent v3: not started")
	}
	a.syncMu.Lock()
	defer a.syncMu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, a.opts.CallTimeout)
	defer cancel()
	proc := a.TFS()
	if exited, _ := proc.Exited(); exited && a.opts.TFSRestart {
		// Restarting it (superviseTFS says so): the bindings stay until it answers again.
		return true, errkind.New(errkind.Runtime, "agent v3: sync: tf serving exited; restarting it")
	}
	versions, err := modelVersions(cctx, proc)
	if err != nil {
		err = fmt.Errorf("agent v3: sync: tf serving status: %w", err)
		a.metrics.Sync(err)
		if ctx.Err() == nil {
			a.log.Error("sync available saved models", "err", err)
		}
		return true, err
	}
	a.failedLatestOnce(a.noteFailures(failedLoads(versions)))
	statuses := newestAvailable(versions)
	a.metrics.SetModelStates(countStates(statuses))
	var models []backend.SavedModel
	for name, st := range statuses {
		// statuses lists the configured models only, so any other state is one on its way to
		// AVAILABLE: UNKNOWN, START, LOADING, and also UNLOADING or END of an old version of a
		// model unloaded and published again before TF Serving picked up the new one.
		if st.GetState() != servingapis.ModelVersionStatus_AVAILABLE {
			pending = true
			continue
		}
		sm, err := backend.ParseSavedModel(name)
		if err != nil { // not a name this agent wrote ("model:sub_graph")
			a.log.Warn("sync: skipping a model that is not model:sub_graph", "name", name)
			continue
		}
		models = append(models, sm)
	}
	sort.Slice(models, func(i, j int) bool { return models[i].String() < models[j].String() })
	err = be.SyncAvailableSavedModels(cctx, a.container, models)
	a.metrics.Sync(err)
	if err != nil {
		err = fmt.Errorf("agent v3: sync: %w", err)
		if ctx.Err() == nil {
			a.log.Error("sync available saved models", "err", err)
		}
		return pending, err
	}
	bound := make([]string, len(models))
	for i, m := range models {
		bound[i] = m.String()
	}
	a.mu.Lock()
	a.bound = bound
	a.mu.Unlock()
	return pending, nil
}

func countStates(statuses map[string]*servingapis.ModelVersionStatus) map[string]int {
	out := map[string]int{}
	for _, st := range statuses {
		out[st.GetState().String()]++
	}
	return out
}

// AddrsMap is the AgentService's address table (_gen_addrs_map): "model:sub_graph" -> the gRPC
// addresses of the containers bound to it when TF Serving is a gRPC remote-op build, else their
// archon addresses. Containers that advertise no such address are left out (the reference listed
// None).
func (a *Agent) AddrsMap() map[string][]string {
	out := map[string][]string{}
	a.eachBinding(func(model, sub string, addrs []string) { out[model+":"+sub] = addrs })
	return out
}

// eachBinding calls fn with each bound sub graph and AddrsMap's addresses for it (nothing before
// Start). Status uses it too, so it need not split AddrsMap's "model:sub_graph" keys again.
func (a *Agent) eachBinding(fn func(model, sub string, addrs []string)) {
	be := a.Backend()
	if be == nil {
		return
	}
	useGRPC := false
	if r, ok := a.TFS().(interface{ GRPCRemoteOp() bool }); ok {
		useGRPC = r.GRPCRemoteOp()
	}
	for model, subs := range be.ServiceMap() {
		for sub, infos := range subs {
			addrs := make([]string, 0, len(infos))
			for _, info := range infos {
				p := info.Archon
				if useGRPC {
					p = info.GRPC
				}
				if p != nil {
					addrs = append(addrs, *p)
				}
			}
			fn(model, sub, addrs)
		}
	}
}

// exitChan returns a channel closed when the TF Serving process proc exits: the process's own
// when it has one (tfs.Wrapper.Done), else one fed by polling Exited every PollInterval until ctx
// ends; wait returns once the poller (if any) has.
func (a *Agent) exitChan(ctx context.Context, proc tfs.Process) (exited <-chan struct{}, wait func()) {
	if d, ok := proc.(interface{ Done() <-chan struct{} }); ok {
		if ch := d.Done(); ch != nil {
			return ch, func() {}
		}
	}
	ch, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(a.opts.PollInterval)
		defer t.Stop()
		for {
			if exited, _ := proc.Exited(); exited {
				close(ch)
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return ch, func() { <-done }
}

// WaitForTermination blocks until ctx ends (the process was told to stop: nil), Stop is called
// (nil) or, unless Options.TFSRestart restarts it, TF Serving exits (a Runtime error with its exit
// code), then stops the agent (wait_for_termination).
func (a *Agent) WaitForTermination(ctx context.Context) error {
	a.mu.Lock()
	started := a.started
	a.mu.Unlock()
	if !started {
		return errkind.New(errkind.Runtime, "agent v3: not started")
	}
	pollCtx, cancel := context.WithCancel(ctx)
	var exited <-chan struct{} // nil: never (superviseTFS restarts it)
	waitPoller := func() {}
	proc := a.TFS()
	if !a.opts.TFSRestart {
		exited, waitPoller = a.exitChan(pollCtx, proc)
	}
	var reason error
	select {
	case <-ctx.Done():
		a.log.Info("agent v3 stopping", "reason", context.Cause(ctx))
	case <-a.stopping:
	case <-exited:
		_, code := proc.Exited()
		reason = errkind.New(errkind.Runtime, "agent v3: tf serving exited with code %d", code)
		a.log.Error("tf serving exited, stopping", "code", code)
	}
	cancel()
	waitPoller()
	stopCtx, stopCancel := context.WithTimeout(context.Background(), a.opts.TFSStopGrace+a.opts.ServiceStopGrace+a.opts.CallTimeout)
	defer stopCancel()
	return errors.Join(reason, a.Stop(stopCtx))
}

// Stop stops the periodic work, the AgentService, the backend (its bindings and service info
// go), the ZooKeeper session it opened and TF Serving, and removes the model config file. It may
// be called before Start and more than once; later calls return the first one's result.
func (a *Agent) Stop(ctx context.Context) error {
	a.endLife()
	a.lifeMu.Lock() // a Start in progress has returned
	defer a.lifeMu.Unlock()
	a.stopOnce.Do(func() { a.stopErr = a.stop(ctx) })
	return a.stopErr
}

func (a *Agent) stop(ctx context.Context) error {
	close(a.stopping)
	a.mu.Lock()
	a.stopped = true
	cancel, svc, be, raw, owns, untrack := a.cancel, a.svc, a.be, a.rawClient, a.ownsZK, a.untrack
	started := a.started
	a.mu.Unlock()
	var errs []error
	if cancel != nil {
		cancel()
	}
	a.wg.Wait()
	if svc != nil {
		grace := a.opts.ServiceStopGrace
		if dl, ok := ctx.Deadline(); ok {
			grace = min(grace, time.Until(dl))
		}
		svc.Stop(grace)
	}
	if be != nil {
		if err := be.Close(); err != nil {
			errs = append(errs, fmt.Errorf("agent v3: close backend: %w", err))
		}
	}
	if untrack != nil {
		untrack()
	}
	if owns && raw != nil {
		if err := raw.Close(); err != nil {
			errs = append(errs, fmt.Errorf("agent v3: close zookeeper: %w", err))
		}
	}
	if a.reloader != nil {
		if err := a.reloader.r.Close(); err != nil {
			errs = append(errs, fmt.Errorf("agent v3: close reloader: %w", err))
		}
	}
	if started {
		if err := a.TFS().Stop(a.opts.TFSStopGrace); err != nil {
			errs = append(errs, fmt.Errorf("agent v3: stop tf serving: %w", err))
		}
	}
	if err := os.Remove(a.configFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("agent v3: %w", err))
	}
	if len(errs) > 0 {
		a.log.Warn("agent v3 stopped with errors", "err", errors.Join(errs...))
	} else {
		a.log.Info("agent v3 stopped")
	}
	return errors.Join(errs...)
}

// writeConfigFile replaces the model config file atomically (a temp file renamed over it), so TF
// Serving's poll never reads a half-written config.
func writeConfigFile(path, text string) error {
	tmp, err := writeTemp(filepath.Dir(path), filepath.Base(path)+".tmp*", text)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("model config file: %w", err)
	}
	return nil
}

// writeTemp creates a file in dir (os.CreateTemp's pattern) holding text and returns its path; on
// failure nothing is left behind.
func writeTemp(dir, pattern, text string) (string, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return "", fmt.Errorf("model config file: %w", err)
	}
	_, werr := f.WriteString(text)
	if err := errors.Join(werr, f.Close()); err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("model config file: %w", err)
	}
	return f.Name(), nil
}
