package zkmirror

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/zk"
)

// Defaults of Config.
const (
	DefaultOpTimeout          = 10 * time.Second
	DefaultWaitLogInterval    = time.Minute
	DefaultElectionRetryDelay = time.Second
)

// Config configures a Mirror. Client and BZID are required.
type Config struct {
	// Client is the ZooKeeper session; the caller keeps ownership (Stop does not close it).
	Client zk.Client
	// BZID is the business id: every tree lives under /{BZID}.
	BZID string
	// ShardID is this host's TCE shard (tce_shard_id); -1 for an entry deployment.
	ShardID int
	// NumShard is the number of TCE shards (num_tce_shard); 0 means 1, as in the reference.
	NumShard int
	// DeployType is the deployment's type; "" means mixed. Entry deployments never run for leader.
	DeployType agentconf.DeployType
	// ReplicaID is this host's TCE replica (tce_replica_id). Nil: REPLICA_ID from the
	// environment, else the hash of MY_POD_NAME (agentconf.ReplicaIDFromPodName), else -1.
	ReplicaID *int
	// LocalHost is this host's address, compared with the host part of replica addresses to find
	// the local replicas. "": agentconf.LocalIP (MY_HOST_IP first).
	LocalHost string
	// Env reads the environment for the defaults above (os.LookupEnv when nil).
	Env agentconf.LookupEnv
	// OpTimeout bounds each ZooKeeper call the mirror makes on its own (in watch callbacks and
	// under the caller's context when that has no earlier deadline). 0: DefaultOpTimeout.
	OpTimeout time.Duration
	// Retry is the policy for the calls the reference wraps in zk.retry (ErrConnectionLoss only).
	Retry zk.RetryPolicy
	// WaitLogInterval is how often NumTCEReplica logs while it waits. 0: DefaultWaitLogInterval.
	WaitLogInterval time.Duration
	// ElectionRetryDelay is the pause before running for leader again after the election failed
	// (session expiry). 0: DefaultElectionRetryDelay.
	ElectionRetryDelay time.Duration
	// Logger receives the mirror's logs (slog.Default() when nil).
	Logger *slog.Logger
}

// Mirror is the port of the reference's ZKMirror. Its methods are safe for concurrent use.
type Mirror struct {
	zk         zk.Client
	bzid       string
	shardID    int
	numShard   int
	replicaID  int
	deployType agentconf.DeployType
	localHost  string
	env        agentconf.LookupEnv
	opTimeout  time.Duration
	retry      zk.RetryPolicy
	waitLog    time.Duration
	retryDelay time.Duration
	log        *slog.Logger
	queue      *Queue
	isLeader   atomic.Bool

	// Base paths.
	resourcePath, portalPath, publishPath, servicePath, electionPath string

	// ctx ends on Stop; the election goroutine and the mirror's own calls run under it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu            sync.RWMutex
	data          *cache
	publishCounts map[string]int  // mirrored publishes by model name
	changed       chan struct{}   // closed (and replaced) whenever data changes
	seen          map[string]bool // watched paths, by watch kind ("data:" or "children:" + path)
	started       map[string]bool // Watch* calls made ("portal", "publish", "resource", "service")
	watches       []zk.Watch      // every watch the mirror set, stopped by Stop
	stopped       bool
}

// New returns a mirror of cfg.BZID's trees. Nothing is watched until Start or a Watch* call.
func New(cfg Config) (*Mirror, error) {
	if cfg.Client == nil {
		return nil, errkind.New(errkind.Value, "zkmirror: no ZooKeeper client")
	}
	if cfg.BZID == "" || strings.ContainsRune(cfg.BZID, '/') {
		return nil, errkind.New(errkind.Value, "zkmirror: bzid %q: want a non-empty name without /", cfg.BZID)
	}
	if err := zk.ValidatePath("/" + cfg.BZID); err != nil {
		return nil, fmt.Errorf("zkmirror: bzid: %w", err)
	}
	m := &Mirror{
		zk: cfg.Client, bzid: cfg.BZID, shardID: cfg.ShardID, numShard: cfg.NumShard,
		deployType: cfg.DeployType, localHost: cfg.LocalHost, env: cfg.Env,
		opTimeout: cfg.OpTimeout, retry: cfg.Retry, waitLog: cfg.WaitLogInterval,
		retryDelay: cfg.ElectionRetryDelay, log: cfg.Logger,
		queue: NewQueue(), data: newCache(), publishCounts: map[string]int{}, changed: make(chan struct{}),
		seen: map[string]bool{}, started: map[string]bool{},
	}
	if m.numShard == 0 {
		m.numShard = 1
	}
	if m.numShard < 0 {
		return nil, errkind.New(errkind.Value, "zkmirror: num_tce_shard %d: want >= 1", m.numShard)
	}
	if m.deployType == "" {
		m.deployType = agentconf.DeployMixed
	}
	if m.env == nil {
		m.env = os.LookupEnv
	}
	if m.opTimeout <= 0 {
		m.opTimeout = DefaultOpTimeout
	}
	if m.waitLog <= 0 {
		m.waitLog = DefaultWaitLogInterval
	}
	if m.retryDelay <= 0 {
		m.retryDelay = DefaultElectionRetryDelay
	}
	if m.log == nil {
		m.log = slog.Default()
	}
	m.log = m.log.With("component", "zkmirror", "bzid", m.bzid)
	if m.localHost == "" {
		m.localHost = agentconf.LocalIP(m.env)
	}
	if cfg.ReplicaID != nil {
		m.replicaID = *cfg.ReplicaID
	} else {
		id, err := agentconf.ReplicaIDFromEnv(m.env)
		if err != nil {
			return nil, fmt.Errorf("zkmirror: %w", err)
		}
		m.replicaID = id
	}
	base := "/" + m.bzid
	m.resourcePath = base + "/resource"
	m.portalPath = base + "/portal"
	m.publishPath = base + "/publish"
	m.servicePath = base + "/service"
	m.electionPath = base + "/election"
	m.ctx, m.cancel = context.WithCancel(context.Background())
	return m, nil
}

// BZID is the business id.
func (m *Mirror) BZID() string { return m.bzid }

// TCEShardID is this host's shard (tce_shard_id).
func (m *Mirror) TCEShardID() int { return m.shardID }

// NumTCEShard is the number of shards (num_tce_shard).
func (m *Mirror) NumTCEShard() int { return m.numShard }

// TCEReplicaID is this host's replica (tce_replica_id), resolved once by New.
func (m *Mirror) TCEReplicaID() int { return m.replicaID }

// LocalHost is the address compared with replica hosts.
func (m *Mirror) LocalHost() string { return m.localHost }

// DeployType is the deployment type.
func (m *Mirror) DeployType() agentconf.DeployType { return m.deployType }

// ResourcePath is /{bzid}/resource.
func (m *Mirror) ResourcePath() string { return m.resourcePath }

// PortalPath is /{bzid}/portal.
func (m *Mirror) PortalPath() string { return m.portalPath }

// PublishPath is /{bzid}/publish.
func (m *Mirror) PublishPath() string { return m.publishPath }

// ServicePath is /{bzid}/service.
func (m *Mirror) ServicePath() string { return m.servicePath }

// ElectionPath is /{bzid}/election.
func (m *Mirror) ElectionPath() string { return m.electionPath }

// Queue is the event queue the watches feed (PORTAL and PUBLISH events).
func (m *Mirror) Queue() *Queue { return m.queue }

// IsLeader reports whether this mirror leads: set by SetLeader, and while the leader function
// given to Election runs.
func (m *Mirror) IsLeader() bool { return m.isLeader.Load() }

// SetLeader marks this mirror as the leader.
func (m *Mirror) SetLeader() { m.isLeader.Store(true) }

// opCtx bounds one ZooKeeper call by OpTimeout and by Stop.
func (m *Mirror) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, m.opTimeout)
	stop := context.AfterFunc(m.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

func (m *Mirror) checkRunning() error {
	if m.ctx.Err() != nil {
		return ErrStopped
	}
	return nil
}

// retried runs fn under the mirror's retry policy (the reference's zk.retry).
func (m *Mirror) retried(ctx context.Context, fn func(ctx context.Context) error) error {
	return zk.Retry(ctx, m.retry, fn)
}

// Create makes a node holding value; if it exists, its value is set instead (the reference's
// create). opts.MakePath is what the reference's makepath=True default means: callers pass it.
func (m *Mirror) Create(ctx context.Context, path string, value []byte, opts zk.CreateOptions) error {
	if err := m.checkRunning(); err != nil {
		return err
	}
	ctx, cancel := m.opCtx(ctx)
	defer cancel()
	_, err := m.zk.Create(ctx, path, value, opts)
	if errors.Is(err, zk.ErrNodeExists) {
		err = m.retried(ctx, func(ctx context.Context) error {
			_, err := m.zk.Set(ctx, path, value, zk.AnyVersion)
			return err
		})
	}
	if err != nil {
		return fmt.Errorf("zkmirror: create %s: %w", path, err)
	}
	return nil
}

// EnsurePath creates path and its missing ancestors.
func (m *Mirror) EnsurePath(ctx context.Context, path string) error {
	if err := m.checkRunning(); err != nil {
		return err
	}
	ctx, cancel := m.opCtx(ctx)
	defer cancel()
	if err := m.retried(ctx, func(ctx context.Context) error { return m.zk.EnsurePath(ctx, path) }); err != nil {
		return fmt.Errorf("zkmirror: ensure_path %s: %w", path, err)
	}
	return nil
}

// Set replaces path's value, creating the node (and its ancestors) when it does not exist.
func (m *Mirror) Set(ctx context.Context, path string, value []byte) error {
	if err := m.checkRunning(); err != nil {
		return err
	}
	ctx, cancel := m.opCtx(ctx)
	defer cancel()
	err := m.retried(ctx, func(ctx context.Context) error {
		_, err := m.zk.Set(ctx, path, value, zk.AnyVersion)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		_, err = m.zk.Create(ctx, path, value, zk.CreateOptions{MakePath: true})
	}
	if err != nil {
		return fmt.Errorf("zkmirror: set %s: %w", path, err)
	}
	return nil
}

// Exists reports whether path exists in ZooKeeper. When ZooKeeper cannot answer, the mirror
// answers instead (the reference's fallback on ZookeeperError); the failure is logged.
func (m *Mirror) Exists(ctx context.Context, path string) bool {
	if m.ctx.Err() == nil {
		octx, cancel := m.opCtx(ctx)
		st, err := m.zk.Exists(octx, path)
		cancel()
		if err == nil {
			return st != nil
		}
		m.log.Info("exists: ZooKeeper did not answer, using the mirror", "path", path, "err", err)
	}
	_, ok := m.Get(path)
	return ok
}

// Delete removes path; with recursive its descendants too. A missing node is not an error (it is
// logged); a non-recursive delete of a node with children deletes them too, as the reference does.
func (m *Mirror) Delete(ctx context.Context, path string, recursive bool) error {
	if err := m.checkRunning(); err != nil {
		return err
	}
	ctx, cancel := m.opCtx(ctx)
	defer cancel()
	del := func(recursive bool) error {
		return m.retried(ctx, func(ctx context.Context) error {
			return m.zk.Delete(ctx, path, zk.DeleteOptions{Recursive: recursive})
		})
	}
	err := del(recursive)
	if errors.Is(err, zk.ErrNotEmpty) {
		err = del(true)
	}
	switch {
	case errors.Is(err, zk.ErrNoNode):
		m.log.Info("delete: no node", "path", path)
		return nil
	case err != nil:
		return fmt.Errorf("zkmirror: delete %s: %w", path, err)
	}
	return nil
}

// Get returns the mirrored value of path (ok false when it is not mirrored).
func (m *Mirror) Get(path string) ([]byte, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	d, ok := m.data.get(path)
	return d, ok
}

// Children returns the names of path's mirrored children, once each, in the order they were
// first mirrored.
func (m *Mirror) Children(path string) []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.data.children(path)
}

// MirroredPaths returns every mirrored path, in the order they were first mirrored.
func (m *Mirror) MirroredPaths() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.data.paths()
}

// setData and delData change the mirror; called with mu held. memo is data decoded.
func (m *Mirror) setData(path string, data []byte, memo any) {
	_, had := m.data.get(path)
	if m.data.set(path, data, memo) {
		if !had {
			m.countPublish(path, 1)
		}
		m.notifyLocked()
	}
}

func (m *Mirror) delData(path string) {
	if m.data.del(path) {
		m.countPublish(path, -1)
		m.notifyLocked()
	}
}

// countPublish keeps publishCounts (mirrored publishes by model) up to date.
func (m *Mirror) countPublish(path string, delta int) {
	name, ok := strings.CutPrefix(path, m.publishPath+"/")
	if !ok || strings.Contains(name, "/") {
		return
	}
	model := publishModel(name)
	if m.publishCounts[model] += delta; m.publishCounts[model] == 0 {
		delete(m.publishCounts, model)
	}
}

func (m *Mirror) notifyLocked() {
	close(m.changed)
	m.changed = make(chan struct{})
}

// Start watches the service tree and, unless isClient, the publish tree (the reference's start;
// the client is already connected). Watches already set are not set again.
func (m *Mirror) Start(ctx context.Context, isClient bool) error {
	if err := m.WatchService(ctx); err != nil {
		return err
	}
	if !isClient {
		return m.WatchPublish(ctx)
	}
	return nil
}

// Stop ends the mirror: its watches stop, a running election is cancelled (the leader function's
// context ends; Stop waits for it to return), the queue is closed and later calls fail with
// ErrStopped. The client is left open. Stop may be called more than once, but not from the
// leader function.
func (m *Mirror) Stop() {
	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		return
	}
	m.stopped = true
	watches := m.watches
	m.watches = nil
	m.mu.Unlock()

	m.cancel()
	for _, w := range watches {
		w.Stop()
	}
	m.queue.Close()
	m.wg.Wait()
	// A real client's watch goroutine ends once its current callback returns; a callback busy
	// setting a new watch while the connection is down can take until the connection is back,
	// so the wait is bounded (the client's Close ends them all).
	deadline := time.NewTimer(m.opTimeout)
	defer deadline.Stop()
	for _, w := range watches {
		select {
		case <-w.Done():
		case <-deadline.C:
			m.log.Warn("stop: watches still running after the op timeout; they end when the client closes")
			return
		}
	}
}
