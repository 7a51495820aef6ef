package agentv1

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	agentbase "github.com/monolith-go/monolith/pkg/agent/base"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// ProcessType is the kind of a serving process, with the reference's enum values (UNKONWN
// spelled as there).
type ProcessType int

// Process types.
const (
	PS      ProcessType = 1
	Entry   ProcessType = 2
	Proxy   ProcessType = 3
	Unkonwn ProcessType = 4
	Dense   ProcessType = 5
)

var typeNames = map[ProcessType]string{PS: "PS", Entry: "ENTRY", Proxy: "PROXY", Unkonwn: "UNKONWN", Dense: "DENSE"}

// String is the enum member's name (PS, ENTRY, ...).
func (t ProcessType) String() string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("ProcessType(%d)", int(t))
}

// LogPrefix is the prefix of the process's serving log (proc_type.name.lower()).
func (t ProcessType) LogPrefix() string { return strings.ToLower(t.String()) }

// serverType is the TF Serving server type of t ("" for the proxy).
func (t ProcessType) serverType() string {
	switch t {
	case PS:
		return agentconf.ServerPS
	case Entry:
		return agentconf.ServerEntry
	case Dense:
		return agentconf.ServerDense
	}
	return ""
}

// Errors of starting and supervising processes; match them with errors.Is.
var (
	// ErrStartTimeout: the PS or dense set, or a process's port, was not up within the bound.
	ErrStartTimeout = errors.New("start timed out")
	// ErrExited: a serving process exited.
	ErrExited = errors.New("serving process exited")
	// ErrKilled: the node was killed and is not started again.
	ErrKilled = errors.New("process node killed")
)

// Defaults of Timing (the reference's, where it has one).
const (
	// DefaultSetMaxWait bounds the entry's wait for the PS and dense sets (max_waiting_sec).
	DefaultSetMaxWait = 3600 * time.Second
	// DefaultPortPollInterval is the period of the port checks. The reference slept 10 s between
	// checks; a local connect is cheap and every process of the chain waits on it.
	DefaultPortPollInterval = time.Second
	// DefaultPortMaxWait bounds the wait for a process's port (max_waiting_sec).
	DefaultPortMaxWait = 3600 * time.Second
	// DefaultStopGrace is how long a process has between SIGTERM and SIGKILL.
	DefaultStopGrace = 10 * time.Second
)

// Timing are the intervals and bounds of a process node. Zero fields take the defaults.
type Timing struct {
	// SetPollInterval is the period of the entry's checks of the PS and dense sets; the reference's
	// is update_model_status_interval * 2 seconds (see TimingFor).
	SetPollInterval time.Duration
	// SetMaxWait bounds the whole wait for both sets.
	SetMaxWait time.Duration
	// PortPollInterval and PortMaxWait: the checks of the process's port.
	PortPollInterval, PortMaxWait time.Duration
	// StopGrace is the time between SIGTERM and SIGKILL when the process is stopped.
	StopGrace time.Duration
}

// TimingFor is Timing with the reference's set poll interval for conf (update_model_status_interval
// * 2 seconds) where t leaves it zero, and the defaults elsewhere.
func TimingFor(conf *agentconf.AgentConfig, t Timing) Timing {
	if t.SetPollInterval <= 0 && conf != nil && conf.UpdateModelStatusInterval > 0 {
		t.SetPollInterval = time.Duration(conf.UpdateModelStatusInterval) * 2 * time.Second
	}
	return t.withDefaults()
}

func (t Timing) withDefaults() Timing {
	if t.SetPollInterval <= 0 {
		t.SetPollInterval = 2 * time.Second
	}
	if t.SetMaxWait <= 0 {
		t.SetMaxWait = DefaultSetMaxWait
	}
	if t.PortPollInterval <= 0 {
		t.PortPollInterval = DefaultPortPollInterval
	}
	if t.PortMaxWait <= 0 {
		t.PortMaxWait = DefaultPortMaxWait
	}
	if t.StopGrace <= 0 {
		t.StopGrace = DefaultStopGrace
	}
	return t
}

// StartedSets tells whether the processes the entry needs are serving (the reference's replica
// manager's is_ps_set_started / is_dense_set_started; *replica.Manager is one).
type StartedSets interface {
	IsPSSetStarted() bool
	IsDenseSetStarted() bool
}

// NodeSpec describes a process node.
type NodeSpec struct {
	Type ProcessType
	// IsTCEMain marks the host's main process (the one failover never restarts).
	IsTCEMain bool
	// Cmd is the command line, split as the reference's cmd.split() (agentbase.Argv).
	Cmd string
	// Port is the port the process serves on; 0 counts it as started once launched.
	Port int
	// Env is the process's environment; nil means the agent's.
	Env []string
	// Dir is the working directory; "" means agentbase.BinDir, or the binary's directory where
	// that does not exist (agentbase.ProcessSpec).
	Dir string
	// Log receives the process's output; nil sends it to the agent's stdout.
	Log *agentbase.ServingLog
	// Sets and DenseAlone: an entry waits for the PS set, and for the dense set when DenseAlone,
	// before it starts. Required for an entry.
	Sets       StartedSets
	DenseAlone bool
	Timing     Timing
	// Logger defaults to slog.Default().
	Logger *slog.Logger

	// tfs, set for TF Serving by NewNodeFromConfig, finds its binary again at each start, so a
	// missing one fails with what was looked for ($MONOLITH_TFS_BINARY, the default path).
	tfs *agentbase.TFSLocator
}

// ProcessNode is one serving process and the processes started after it (the reference's
// ProcessNode). Its methods are safe for concurrent use.
type ProcessNode struct {
	spec   NodeSpec
	timing Timing
	log    *slog.Logger

	mu          sync.Mutex
	subs        []*ProcessNode
	cmd         *exec.Cmd
	done        chan struct{} // closed once cmd has been reaped
	killed      bool
	failingOver bool
	onExit      func() // set by the ProcessMgr: called after each exit
}

// NewProcessNode returns a node for spec; nothing runs until Run.
func NewProcessNode(spec NodeSpec) (*ProcessNode, error) {
	switch spec.Type {
	case PS, Entry, Proxy, Dense:
	default:
		// The reference asserts proc_type != UNKONWN.
		return nil, errkind.New(errkind.Precondition, "process node: type %v cannot run", spec.Type)
	}
	if len(agentbase.Argv(spec.Cmd)) == 0 {
		return nil, errkind.New(errkind.Value, "process node %v: empty command line", spec.Type)
	}
	if spec.Port < 0 || spec.Port > 65535 {
		return nil, errkind.New(errkind.Value, "process node %v: port %d out of range", spec.Type, spec.Port)
	}
	if spec.Type == Entry && spec.Sets == nil {
		return nil, errkind.New(errkind.Precondition, "process node ENTRY: needs the PS/dense sets to wait for")
	}
	if spec.Logger == nil {
		spec.Logger = slog.Default()
	}
	n := &ProcessNode{spec: spec, timing: spec.Timing.withDefaults()}
	n.log = spec.Logger.With("component", "process_node", "proc", spec.Type.String())
	return n, nil
}

// NodeOptions are the reference ProcessNode constructor's arguments besides the config and type.
type NodeOptions struct {
	IsTCEMain bool
	// ConfPath is the agent conf's directory (the proxy's proxy.conf is looked up there).
	ConfPath string
	// TFSLog names the serving logs ({dir}/{type}_{name}); "" sends output to the agent's stdout.
	TFSLog string
	// TFSBinary defaults to $MONOLITH_TFS_BINARY (in Env), else agentbase.TFSBinary;
	// ProxyBinary to agentbase.ProxyBinary.
	TFSBinary, ProxyBinary string
	// ConfigFile is TF Serving's model config file; "" lets agentconf write a temporary one.
	ConfigFile string
	// Env is the agent's environment (nil: os.Environ()); the entry gets PORT2 = agent_port on
	// top. MLP_POD_NAME in it sends the output to the agent's stdout, as in the reference.
	Env []string
	// Dir is the processes' working directory; "" means agentbase.BinDir, or the binary's
	// directory where that does not exist.
	Dir    string
	Sets   StartedSets
	Timing Timing
	Logger *slog.Logger
}

// NewNodeFromConfig is the reference's ProcessNode(config, replica_mgr, proc_type, ...): the
// command line and port come from agentbase.CmdAndPort for the type's server type (the proxy's
// for PROXY), and the entry's environment carries PORT2 = agent_port.
func NewNodeFromConfig(conf *agentconf.AgentConfig, t ProcessType, o NodeOptions) (*ProcessNode, error) {
	if t != PS && t != Entry && t != Dense && t != Proxy {
		return nil, errkind.New(errkind.Precondition, "process node: type %v cannot run", t)
	}
	env := o.Env
	if env == nil {
		env = os.Environ()
	}
	var tfs *agentbase.TFSLocator
	tfsBinary := o.TFSBinary
	if t != Proxy {
		tfs = &agentbase.TFSLocator{Binary: o.TFSBinary, LookupEnv: func(k string) (string, bool) { return lookupEnv(env, k) }}
		if p, err := tfs.LocateBinary(); err == nil {
			tfsBinary = p
		} else if v, ok := lookupEnv(env, agentbase.TFSBinaryEnv); ok && v != "" && tfsBinary == "" {
			// Not there (yet): the command names it, and starting reports what was looked for.
			tfsBinary = v
		}
	}
	cmd, port, err := agentbase.CmdAndPort(conf, agentbase.CmdOptions{
		ServerType: t.serverType(), ConfPath: o.ConfPath, ConfigFile: o.ConfigFile,
		TFSBinary: tfsBinary, ProxyBinary: o.ProxyBinary,
	})
	if err != nil {
		return nil, fmt.Errorf("process node %v: %w", t, err)
	}
	if t == Entry {
		if conf.AgentPort == nil {
			return nil, errkind.New(errkind.Attribute, "process node ENTRY: agent_port is not set")
		}
		env = agentbase.SetEnv(env, "PORT2", fmt.Sprint(*conf.AgentPort))
	}
	var log *agentbase.ServingLog
	if o.TFSLog != "" && !hasEnv(env, "MLP_POD_NAME") {
		log = &agentbase.ServingLog{Prefix: t.LogPrefix(), TFSLog: o.TFSLog}
	}
	return NewProcessNode(NodeSpec{
		Type: t, IsTCEMain: o.IsTCEMain, Cmd: cmd, Port: port, Env: env, Dir: o.Dir, Log: log,
		Sets: o.Sets, DenseAlone: conf.DenseAlone, Timing: TimingFor(conf, o.Timing), Logger: o.Logger, tfs: tfs,
	})
}

// lookupEnv is os.LookupEnv on an environment list (the last key= entry wins, as in exec).
func lookupEnv(env []string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v, true
		}
	}
	return "", false
}

func hasEnv(env []string, key string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, key+"=") {
			return true
		}
	}
	return false
}

// Type is the node's process type.
func (n *ProcessNode) Type() ProcessType { return n.spec.Type }

// IsTCEMain reports whether the node is the host's main process.
func (n *ProcessNode) IsTCEMain() bool { return n.spec.IsTCEMain }

// Cmd is the node's command line.
func (n *ProcessNode) Cmd() string { return n.spec.Cmd }

// Port is the port the node serves on (0: none checked).
func (n *ProcessNode) Port() int { return n.spec.Port }

// Env is the node's environment (nil: the agent's).
func (n *ProcessNode) Env() []string { return n.spec.Env }

// Log is the node's serving log (nil: the agent's stdout).
func (n *ProcessNode) Log() *agentbase.ServingLog { return n.spec.Log }

// Restartable reports whether failover restarts the node: PS and dense processes that are not
// the host's main process.
func (n *ProcessNode) Restartable() bool {
	return !n.spec.IsTCEMain && (n.spec.Type == PS || n.spec.Type == Dense)
}

// SubProcs are the nodes started after this one, in the order they were added.
func (n *ProcessNode) SubProcs() []*ProcessNode {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]*ProcessNode(nil), n.subs...)
}

// AddSubproc adds pn to the nodes started after this one; as in the reference, a second node of
// the same type is ignored with a warning (it reports false then).
func (n *ProcessNode) AddSubproc(pn *ProcessNode) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, s := range n.subs {
		if s.spec.Type == pn.spec.Type {
			n.log.Warn("process exists", "sub_proc", pn.spec.Type.String())
			return false
		}
	}
	n.subs = append(n.subs, pn)
	return true
}

// Pid is the process id of the node's current process (0 before the first start).
func (n *ProcessNode) Pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// Done is closed once the node's current process has exited and been reaped (nil before the
// first start).
func (n *ProcessNode) Done() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.done
}

// Poll is the reference's poll / returncode: exited is false before the first start, while the
// process runs and during a failover; code is Popen's returncode (the exit status, or -signal).
func (n *ProcessNode) Poll() (code int, exited bool) {
	n.mu.Lock()
	cmd, done, failingOver := n.cmd, n.done, n.failingOver
	n.mu.Unlock()
	if failingOver || cmd == nil {
		return 0, false
	}
	select {
	case <-done:
		return returnCode(cmd.ProcessState), true
	default:
		return 0, false
	}
}

// returnCode is Popen.returncode: -signal for a process killed by a signal.
func returnCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -int(ws.Signal())
	}
	return ps.ExitCode()
}

// Run starts the node (the reference's run): an entry first waits for the PS set (and the dense
// set under dense_alone); then the process starts, Run waits until its port accepts connections,
// and runs the sub nodes in order. A node whose process still runs is not started again. Every
// wait ends when ctx does. On failure the processes already started are left running: the
// ProcessMgr kills the graph.
func (n *ProcessNode) Run(ctx context.Context) error {
	if n.spec.Type == Entry {
		if err := n.waitForSets(ctx); err != nil {
			return fmt.Errorf("start %v: %w", n.spec.Type, err)
		}
	}
	if err := n.start(ctx); err != nil {
		return err
	}
	if err := n.WaitForStarted(ctx); err != nil {
		return fmt.Errorf("start %v: %w", n.spec.Type, err)
	}
	for _, s := range n.SubProcs() {
		if err := s.Run(ctx); err != nil {
			return fmt.Errorf("start %v's sub process: %w", n.spec.Type, err)
		}
	}
	return nil
}

// waitForSets is the entry's wait: one poll interval first (the PS status needs a moment to
// change, as in the reference), then every PS task must have an AVAILABLE replica, then, under
// dense_alone, the dense task; both within SetMaxWait in all.
func (n *ProcessNode) waitForSets(ctx context.Context) error {
	deadline := time.Now().Add(n.timing.SetMaxWait)
	if err := sleep(ctx, n.timing.SetPollInterval); err != nil {
		return err
	}
	wait := func(what string, started func() bool) error {
		for !started() {
			if !time.Now().Before(deadline) {
				n.log.Error("found " + what + " timeout")
				return errkind.Wrap(errkind.Runtime, fmt.Errorf("%s set not started within %v: %w", what, n.timing.SetMaxWait, ErrStartTimeout))
			}
			if err := sleep(ctx, n.timing.SetPollInterval); err != nil {
				return fmt.Errorf("waiting for the %s set: %w", what, err)
			}
		}
		return nil
	}
	if err := wait("PS", n.spec.Sets.IsPSSetStarted); err != nil {
		return err
	}
	if n.spec.DenseAlone {
		return wait("Dense", n.spec.Sets.IsDenseSetStarted)
	}
	return nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// start launches the process unless it runs already.
func (n *ProcessNode) start(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.killed {
		return fmt.Errorf("start %v: %w", n.spec.Type, errkind.Wrap(errkind.Runtime, ErrKilled))
	}
	if n.cmd != nil {
		select {
		case <-n.done:
		default:
			return nil
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("start %v: %w", n.spec.Type, context.Cause(ctx))
	}
	if n.spec.tfs != nil {
		if _, err := n.spec.tfs.LocateBinary(); err != nil {
			return fmt.Errorf("start %v: %w", n.spec.Type, err)
		}
	}
	// The process outlives ctx: it is stopped by Kill (SIGTERM, then SIGKILL), never by
	// exec.CommandContext's immediate SIGKILL.
	cmd, err := agentbase.StartProcess(context.WithoutCancel(ctx), agentbase.ProcessSpec{
		Cmd: n.spec.Cmd, Dir: n.spec.Dir, Env: n.spec.Env, Log: n.spec.Log})
	if err != nil {
		return fmt.Errorf("start %v: %w", n.spec.Type, err)
	}
	done := make(chan struct{})
	n.cmd, n.done = cmd, done
	n.log.Info("process started", "pid", cmd.Process.Pid, "cmd", n.spec.Cmd)
	go n.reap(cmd, done)
	return nil
}

// reap waits for cmd, so no child is left a zombie, and tells the ProcessMgr.
func (n *ProcessNode) reap(cmd *exec.Cmd, done chan struct{}) {
	err := cmd.Wait()
	n.mu.Lock()
	onExit := n.onExit
	n.mu.Unlock()
	close(done)
	n.log.Info("process exited", "pid", cmd.Process.Pid, "returncode", returnCode(cmd.ProcessState), "err", err)
	if onExit != nil {
		onExit()
	}
}

func (n *ProcessNode) setOnExit(f func()) {
	n.mu.Lock()
	n.onExit = f
	n.mu.Unlock()
}

// WaitForStarted waits until the node's port accepts connections (the reference's
// wait_for_started): at once for port 0, else with a check every PortPollInterval for up to
// PortMaxWait. Unlike the reference it gives up as soon as the process exits.
func (n *ProcessNode) WaitForStarted(ctx context.Context) error {
	if n.spec.Port == 0 {
		return nil
	}
	done := n.Done()
	if done == nil {
		return errkind.New(errkind.Runtime, "%v not started", n.spec.Type)
	}
	deadline := time.Now().Add(n.timing.PortMaxWait)
	for {
		select {
		case <-done:
			code, _ := n.Poll()
			return errkind.Wrap(errkind.Runtime, fmt.Errorf("%v exited with returncode %d before port %d opened: %w", n.spec.Type, code, n.spec.Port, ErrExited))
		default:
		}
		if agentconf.CheckPortOpen(ctx, n.spec.Port) {
			n.log.Info("proc opened", "port", n.spec.Port)
			return nil
		}
		if !time.Now().Before(deadline) {
			n.log.Error("proc start failed", "port", n.spec.Port)
			return errkind.Wrap(errkind.Runtime, fmt.Errorf("port %d not open within %v: %w", n.spec.Port, n.timing.PortMaxWait, ErrStartTimeout))
		}
		t := time.NewTimer(n.timing.PortPollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("waiting for port %d: %w", n.spec.Port, context.Cause(ctx))
		case <-done:
			t.Stop()
		case <-t.C:
		}
	}
}

// Kill stops the sub nodes, then the node's own process, for good (the reference's kill): each
// process gets SIGTERM, then SIGKILL if it still runs after StopGrace, and is reaped before Kill
// returns. The sub nodes are stopped concurrently. A killed node is not started again.
func (n *ProcessNode) Kill() {
	n.mu.Lock()
	n.killed = true
	subs := append([]*ProcessNode(nil), n.subs...)
	n.mu.Unlock()
	killAll(subs)
	n.stopProcess()
}

// killAll kills nodes concurrently and returns once all are down.
func killAll(nodes []*ProcessNode) {
	var wg sync.WaitGroup
	for _, s := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.Kill()
		}()
	}
	wg.Wait()
}

func (n *ProcessNode) stopProcess() {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	n.log.Info("kill proc", "pid", cmd.Process.Pid, "signal", "SIGTERM")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		n.log.Warn("SIGTERM failed", "pid", cmd.Process.Pid, "err", err)
	}
	t := time.NewTimer(n.timing.StopGrace)
	defer t.Stop()
	select {
	case <-done:
		return
	case <-t.C:
	}
	n.log.Warn("process still running after the grace period; killing it", "pid", cmd.Process.Pid, "grace", n.timing.StopGrace)
	if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		n.log.Warn("SIGKILL failed", "pid", cmd.Process.Pid, "err", err)
	}
	<-done
}

// Failover is the reference's failover: a PS or dense node that is not the main process is run
// again; any other is killed. Poll reports no exit meanwhile.
func (n *ProcessNode) Failover(ctx context.Context) error {
	n.mu.Lock()
	n.failingOver = true
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		n.failingOver = false
		n.mu.Unlock()
	}()
	if n.Restartable() {
		n.log.Info("failover, run")
		return n.Run(ctx)
	}
	n.log.Info("failover, kill")
	n.Kill()
	return nil
}

// Flatten lists nodes and their sub nodes, depth first (the reference's get_proc).
func Flatten(nodes ...*ProcessNode) []*ProcessNode {
	var out []*ProcessNode
	for _, n := range nodes {
		if n == nil {
			continue
		}
		out = append(out, n)
		out = append(out, Flatten(n.SubProcs()...)...)
	}
	return out
}
