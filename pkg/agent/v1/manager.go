package agentv1

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// MgrOptions configure a ProcessMgr.
type MgrOptions struct {
	// Failover restarts a PS or dense process that is not the host's main process when it exits
	// (ProcessNode.Failover) instead of taking the graph down. Off, as in the reference, which
	// left its failover call commented out: any exit takes the whole graph down.
	Failover bool
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// ProcessMgr starts the process graph and supervises it (the reference's ProcessMgr): when a
// process exits, every process is stopped and Done is closed, Err saying which one exited. Its
// state is its own (the reference kept _is_killed and the lock on the class, shared by every
// manager of the process), and it installs no signal handler: the agent's command turns SIGTERM
// and SIGINT into a context cancellation and calls KillAll through Agent.Stop.
type ProcessMgr struct {
	opts MgrOptions
	log  *slog.Logger

	life   context.Context // ends when the graph is taken down: aborts starts in progress
	cancel context.CancelFunc
	kick   chan struct{} // a process exited (coalesced)
	stop   chan struct{} // closed when the graph is taken down: the supervisor returns
	done   chan struct{} // closed once every process is down
	wg     sync.WaitGroup

	mu      sync.Mutex
	nodes   []*ProcessNode
	started bool
	killed  bool
	err     error
}

// NewProcessMgr returns a manager without processes.
func NewProcessMgr(opts MgrOptions) *ProcessMgr {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	m := &ProcessMgr{opts: opts, log: opts.Logger.With("component", "process_mgr"),
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	m.life, m.cancel = context.WithCancel(context.Background())
	return m
}

// AddSubproc adds a top-level node; nodes start in the order they were added.
func (m *ProcessMgr) AddSubproc(n *ProcessNode) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.nodes = append(m.nodes, n)
}

// SubProcs are the top-level nodes.
func (m *ProcessMgr) SubProcs() []*ProcessNode {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*ProcessNode(nil), m.nodes...)
}

// Start supervises the graph, then runs the top-level nodes in order (the reference's start). The
// supervision begins first, so a process that exits while a later one waits to start takes the
// graph down at once. When a node fails to start, or ctx ends first, every process is stopped and
// the error returned (the reference killed its own process then).
func (m *ProcessMgr) Start(ctx context.Context) error {
	m.mu.Lock()
	if m.started || m.killed {
		m.mu.Unlock()
		return errkind.New(errkind.Runtime, "process manager: already started or killed")
	}
	m.started = true
	nodes, all := append([]*ProcessNode(nil), m.nodes...), Flatten(m.nodes...)
	m.mu.Unlock()

	for _, n := range all {
		n.setOnExit(m.notify)
	}
	m.log.Info("start poll", "procs", len(all))
	m.wg.Add(1)
	go m.supervise(all)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopWatch := context.AfterFunc(m.life, cancel)
	defer stopWatch()
	for _, n := range nodes {
		if err := n.Run(ctx); err != nil {
			if reason := m.Err(); reason != nil {
				// The supervisor took the graph down meanwhile: that is the cause.
				err = reason
			}
			m.log.Error("start failed, kill all proc", "proc", n.Type().String(), "err", err)
			m.takeDown(nil)
			m.wg.Wait()
			return fmt.Errorf("process manager: %w", err)
		}
	}
	return nil
}

// notify is every node's exit hook.
func (m *ProcessMgr) notify() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// supervise is the reference's _poll, driven by exits instead of a 1 s poll.
func (m *ProcessMgr) supervise(all []*ProcessNode) {
	defer m.wg.Done()
	for {
		select {
		case <-m.stop:
			return
		case <-m.kick:
		}
		for _, n := range all {
			code, exited := n.Poll()
			if !exited {
				continue
			}
			if m.opts.Failover && n.Restartable() {
				m.log.Warn("process exited, failover", "proc", n.Type().String(), "returncode", code)
				err := n.Failover(m.life)
				if err == nil {
					continue
				}
				if m.isKilled() {
					return
				}
				m.log.Error("failover failed, kill all proc", "proc", n.Type().String(), "err", err)
				m.takeDown(errkind.Wrap(errkind.Runtime, fmt.Errorf("%v exited with returncode %d and failover failed: %w", n.Type(), code, err)))
				return
			}
			m.log.Info("process shutdown, kill all proc", "proc", n.Type().String(), "returncode", code)
			m.takeDown(errkind.Wrap(errkind.Runtime, fmt.Errorf("%v (pid %d) exited with returncode %d: %w", n.Type(), n.Pid(), code, ErrExited)))
			return
		}
	}
}

func (m *ProcessMgr) isKilled() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.killed
}

// takeDown stops every process once; reason (nil for a requested stop) becomes Err.
func (m *ProcessMgr) takeDown(reason error) {
	m.mu.Lock()
	if m.killed {
		m.mu.Unlock()
		<-m.done
		return
	}
	m.killed = true
	m.err = reason
	nodes := append([]*ProcessNode(nil), m.nodes...)
	m.mu.Unlock()
	m.cancel()
	close(m.stop)
	killAll(nodes)
	m.log.Info("all processes stopped")
	close(m.done)
}

// KillAll stops every process and returns once all are reaped (the reference's
// kill_all(include_self=False); its include_self SIGKILL of the agent is the command's business).
// It is safe to call more than once and concurrently with Start.
func (m *ProcessMgr) KillAll() {
	m.takeDown(nil)
	m.wg.Wait()
}

// Done is closed once the graph has been taken down, by the supervisor or by KillAll.
func (m *ProcessMgr) Done() <-chan struct{} { return m.done }

// Err says why the supervisor took the graph down (wrapping ErrExited); nil while it runs and
// after KillAll.
func (m *ProcessMgr) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}
