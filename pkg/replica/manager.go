package replica

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	agentpb "github.com/monolith-go/monolith/gen/pb/monolith/serving/agent_service"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/zk"
)

// DefaultUseArchon is the address kind the Manager's watcher answers (gRPC).
const DefaultUseArchon = false

// Re-registration retry after a failure: doubling from reregisterMinDelay up to reregisterMaxDelay.
const (
	reregisterMinDelay = 50 * time.Millisecond
	reregisterMaxDelay = 5 * time.Second
)

// ManagerOptions configure a Manager. The watcher answers gRPC addresses (DefaultUseArchon)
// unless Watcher says otherwise; its OwnPaths and OnOwnMissing are the Manager's.
type ManagerOptions struct {
	Watcher WatcherOptions
	Updater UpdaterOptions
	// CallTimeout bounds each re-registration attempt; 0 means DefaultCallTimeout.
	CallTimeout time.Duration
	Logger      *slog.Logger
}

// Manager is the reference's ReplicaManager: it registers and updates this host's replicas
// (Updater), watches everybody's (Watcher), and follows the ZooKeeper connection: on LOST the
// status updates and the reconciliation pause; on CONNECTED after LOST the replicas are
// registered again on the new session, with the stat they had, then both resume. Meanwhile the
// watcher keeps this host's replicas in its answers (they are served all along; the reference
// dropped them, then listed them UNKNOWN until the next status update). The connection listener never blocks:
// it hands the re-registration to the Manager's goroutine (the reference slept 5 s inside it,
// stalling every ZooKeeper callback).
type Manager struct {
	zk      zk.Client
	conf    *agentconf.AgentConfig
	watcher *Watcher
	updater *Updater
	log     *slog.Logger
	timeout time.Duration

	mu             sync.Mutex
	hasLost        bool
	running        bool
	removeListener func()
	cancel         context.CancelFunc
	rereg, restore chan struct{}
	wg             sync.WaitGroup
}

// NewManager builds the watcher and the updater of conf on client.
func NewManager(client zk.Client, conf *agentconf.AgentConfig, opts ManagerOptions) (*Manager, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Watcher.Logger == nil {
		opts.Watcher.Logger = opts.Logger
	}
	if opts.Updater.Logger == nil {
		opts.Updater.Logger = opts.Logger
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	m := &Manager{zk: client, conf: conf, log: opts.Logger.With("component", "replica_manager"),
		timeout: opts.CallTimeout, rereg: make(chan struct{}, 1), restore: make(chan struct{}, 1)}
	u, err := NewUpdater(client, conf, opts.Updater)
	if err != nil {
		return nil, err
	}
	m.updater = u
	opts.Watcher.OwnPaths = u.Paths
	opts.Watcher.OnOwnMissing = func([]string) { m.requestRestore() }
	w, err := NewWatcher(client, conf, opts.Watcher)
	if err != nil {
		return nil, err
	}
	m.watcher = w
	return m, nil
}

// Watcher is the replica watcher.
func (m *Manager) Watcher() *Watcher { return m.watcher }

// Updater is the replica updater.
func (m *Manager) Updater() *Updater { return m.updater }

// Start listens to the connection, registers this host's replicas, watches the tree and starts
// the status updates (the reference's constructor listener and start).
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	if m.running {
		m.mu.Unlock()
		return errkind.New(errkind.Runtime, "replica manager: already started")
	}
	m.running = true
	m.hasLost = false
	rctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	m.mu.Unlock()
	// Listening first: a session lost while starting is then noticed and repaired.
	m.wg.Add(1)
	go m.reregisterLoop(rctx)
	remove := m.zk.AddListener(m.onState)
	m.mu.Lock()
	m.removeListener = remove
	m.mu.Unlock()

	err := m.updater.Register(ctx)
	if err != nil {
		err = fmt.Errorf("replica manager: register: %w", err)
	} else if err = m.watcher.Start(); err == nil {
		if err = m.updater.Start(); err != nil {
			m.watcher.Stop()
		}
	}
	if err != nil {
		remove()
		cancel()
		m.wg.Wait()
		m.mu.Lock()
		m.running = false
		m.mu.Unlock()
		return err
	}
	return nil
}

// Stop stops listening, the status updates and the watcher, in that order.
func (m *Manager) Stop() {
	m.mu.Lock()
	if !m.running {
		m.mu.Unlock()
		return
	}
	m.running = false
	remove, cancel := m.removeListener, m.cancel
	m.mu.Unlock()
	remove()
	cancel()
	m.wg.Wait()
	m.updater.Stop()
	m.watcher.Stop()
}

// onState is the connection listener (the reference's ZKListener). It only flips flags and
// signals: it runs on the client's event path.
func (m *Manager) onState(s zk.State) {
	switch s {
	case zk.StateLost:
		// The session is gone and its ephemeral nodes with it: stop writing stats and stop
		// reconciling (the own nodes would look removed) until they are registered again.
		m.log.Warn("ZooKeeper session lost; replicas will be registered again on the new session")
		m.mu.Lock()
		m.hasLost = true
		m.mu.Unlock()
		m.watcher.setPollPaused(true)
		m.watcher.holdOwn(m.updater.Paths())
		m.updater.setPaused(true)
	case zk.StateConnected:
		m.mu.Lock()
		lost := m.hasLost
		m.hasLost = false
		m.mu.Unlock()
		if lost {
			m.log.Info("connected after a lost session: registering the replicas again")
			m.requestReregister()
		}
	}
}

func (m *Manager) requestReregister() { signal(m.rereg) }

func (m *Manager) requestRestore() { signal(m.restore) }

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default: // one is pending already
	}
}

// reregisterLoop registers the replicas again on a new session, and re-creates own nodes the
// watcher found missing, off the connection listener's path.
func (m *Manager) reregisterLoop(ctx context.Context) {
	defer m.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.rereg:
			m.reregister(ctx)
		case <-m.restore:
			if m.updater.paused.Load() {
				continue // the session is lost: the re-registration that follows covers it
			}
			rctx, cancel := context.WithTimeout(ctx, m.timeout)
			if err := m.updater.Restore(rctx); err != nil && ctx.Err() == nil {
				m.log.Warn("re-creating missing replica nodes failed", "err", err)
			}
			cancel()
		}
	}
}

// reregister is Register, retried with backoff until it succeeds (or the manager stops), then
// the status updates resume at once and the reconciliation resumes.
func (m *Manager) reregister(ctx context.Context) {
	delay := reregisterMinDelay
	for {
		rctx, cancel := context.WithTimeout(ctx, m.timeout)
		err := m.updater.Register(rctx)
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		m.log.Warn("registering the replicas again failed; retrying", "err", err, "in", delay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, reregisterMaxDelay)
	}
	m.mu.Lock()
	lostAgain := m.hasLost
	m.mu.Unlock()
	if lostAgain {
		return // the session went again meanwhile: the next CONNECTED asks again
	}
	m.updater.setPaused(false)
	m.updater.kickUpdate()
	m.watcher.releaseOwn()
	m.watcher.setPollPaused(false)
}

// GetAllReplicas is Watcher.GetAllReplicas.
func (m *Manager) GetAllReplicas(st agentpb.ServerType, dc *DC) map[string][]string {
	return m.watcher.GetAllReplicas(st, dc)
}

// GetReplicas is Watcher.GetReplicas.
func (m *Manager) GetReplicas(st agentpb.ServerType, task int, dc *DC) []string {
	return m.watcher.GetReplicas(st, task, dc)
}

// GetReplica is Watcher.GetReplica.
func (m *Manager) GetReplica(st agentpb.ServerType, task, replica int, dc *DC) []string {
	return m.watcher.GetReplica(st, task, replica, dc)
}

// IsPSSetStarted reports whether every PS task (0..num_ps-1) has an AVAILABLE replica in this
// host's location.
func (m *Manager) IsPSSetStarted() bool {
	dc := ConfDC(m.conf)
	for i := 0; i < m.conf.NumPS; i++ {
		if len(m.watcher.GetReplicas(agentpb.ServerType_PS, i, dc)) == 0 {
			return false
		}
	}
	m.log.Info("PS set started", "replicas", m.watcher.GetAllReplicas(agentpb.ServerType_PS, nil))
	return true
}

// IsDenseSetStarted reports whether dense task 0 has an AVAILABLE replica, in any location.
func (m *Manager) IsDenseSetStarted() bool {
	replicas := m.watcher.GetReplicas(agentpb.ServerType_DENSE, 0, nil)
	if len(replicas) == 0 {
		return false
	}
	m.log.Info("dense set started", "replicas", replicas)
	return true
}
