package replica

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	tfprotobuf "github.com/monolith-go/monolith/gen/pb/tensorflow/core/protobuf"
	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/modelconfig"
	"github.com/monolith-go/monolith/pkg/pyint"
	"github.com/monolith-go/monolith/pkg/tfs"
	"github.com/monolith-go/monolith/pkg/zk"
)

// DefaultUpdateInterval is the reference's status update period (its _updater sleeps 1 s).
const DefaultUpdateInterval = time.Second

// StatusSource answers TF Serving's GetModelStatus for a served model name ("ps_0", "entry",
// "dense_0"); *tfs.Monitor is one. A name this host does not serve gives no status.
type StatusSource interface {
	VersionStatus(ctx context.Context, name string, v modelconfig.Version, signature *string) ([]*servingapis.ModelVersionStatus, error)
}

// UpdaterOptions configure an Updater. The zero value is the reference's ReplicaUpdater(zk, conf).
type UpdaterOptions struct {
	// Env reads MY_HOST_IP and MY_HOST_IPV6; nil means the config's environment.
	Env agentconf.LookupEnv
	// Resolver finds the host's addresses when the environment does not; nil means SystemResolver.
	Resolver HostResolver
	// Status is where model states come from; nil means a tfs.Monitor for the config, connected
	// by Start and closed by Stop.
	Status StatusSource
	// UpdateInterval is the period of the status updates; 0 means DefaultUpdateInterval.
	UpdateInterval time.Duration
	// CallTimeout bounds each ZooKeeper call and status RPC; 0 means DefaultCallTimeout.
	CallTimeout time.Duration
	// Retry is the retry of ZooKeeper writes on connection loss (the reference's zk.retry); the
	// zero value is zk.DefaultRetryPolicy.
	Retry zk.RetryPolicy
	// Metrics receives the model version metrics (the reference's client for MetricsPrefix) and
	// GlobalMetrics the global ones (GlobalMetricsPrefix); with Metrics nil, as with use_metrics
	// false, none are emitted.
	Metrics, GlobalMetrics Metrics
	// VersionCheckInterval is the period of the version metrics; 0 means DefaultVersionCheckInterval.
	VersionCheckInterval time.Duration
	// Now is the clock of the metrics; nil means time.Now.
	Now func() time.Time
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Updater registers this host's replicas under the config's path prefix (ephemeral nodes holding
// a ReplicaMeta) and keeps their stat equal to what TF Serving reports (the reference's
// ReplicaUpdater).
type Updater struct {
	zk      zk.Client
	conf    *agentconf.AgentConfig
	prefix  string
	shardID int
	psTasks []int // the PS tasks of this shard (agentconf's ServerSchedule), when it serves PS
	opts    UpdaterOptions
	log     *slog.Logger
	status  StatusSource
	monitor *tfs.Monitor // owned: built here, connected by Start
	paused  atomic.Bool  // the reference's _should_update == False
	kick    chan struct{}

	// nodeLocks serialize the writes of one node by Register and by status updates, so an update
	// read before a re-registration cannot overwrite it.
	nodeLocks sync.Map // path -> *sync.Mutex

	mu        sync.Mutex
	replicaID int
	meta      map[string]datadef.ReplicaMeta
	versions  versionState

	runMu   sync.Mutex
	running bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// NewUpdater returns an updater for conf; nothing is registered until Register.
func NewUpdater(client zk.Client, conf *agentconf.AgentConfig, opts UpdaterOptions) (*Updater, error) {
	if client == nil || conf == nil {
		return nil, errkind.New(errkind.Value, "replica updater: needs a ZooKeeper client and a config")
	}
	prefix, err := conf.PathPrefix()
	if err != nil {
		return nil, fmt.Errorf("replica updater: %w", err)
	}
	shard, err := conf.ShardID()
	if err != nil {
		return nil, fmt.Errorf("replica updater: %w", err)
	}
	if opts.Env == nil {
		opts.Env = conf.LookupEnv
	}
	if opts.Resolver == nil {
		opts.Resolver = SystemResolver{}
	}
	if opts.UpdateInterval <= 0 {
		opts.UpdateInterval = DefaultUpdateInterval
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.VersionCheckInterval <= 0 {
		opts.VersionCheckInterval = DefaultVersionCheckInterval
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	u := &Updater{
		zk: client, conf: conf, prefix: prefix, shardID: shard, opts: opts,
		log: opts.Logger.With("component", "replica_updater"), status: opts.Status, kick: make(chan struct{}, 1),
		meta: map[string]datadef.ReplicaMeta{}, versions: newVersionState(),
	}
	if u.servesPS() && conf.NumPS > 0 {
		// The tasks i with i % num_shard == shard_id, as the model server config schedules them.
		schedule, err := conf.ServerSchedule(agentconf.ServerPS)
		if err != nil {
			return nil, fmt.Errorf("replica updater: %w", err)
		}
		for _, i := range schedule {
			u.psTasks = append(u.psTasks, *i)
		}
	}
	if conf.ReplicaID != nil {
		u.replicaID = *conf.ReplicaID
	} else {
		u.replicaID = -1
	}
	if u.status == nil {
		u.monitor = tfs.NewMonitor(conf)
		u.status = u.monitor
	}
	return u, nil
}

// PathPrefix is the config's path prefix, where this host's replicas are registered.
func (u *Updater) PathPrefix() string { return u.prefix }

// ReplicaID is the replica id: the config's, or the one ZooKeeper assigned when it was -1 and the
// entry node was created as a sequence node. (The reference writes it back into the shared
// config; the config is left alone here.)
func (u *Updater) ReplicaID() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.replicaID
}

// servesPS, servesEntry, servesDense say what this deploy type registers.
func (u *Updater) servesPS() bool {
	return u.conf.Deploy == agentconf.DeployMixed || u.conf.Deploy == agentconf.ServerPS
}

func (u *Updater) servesEntry() bool {
	return u.conf.Deploy == agentconf.DeployMixed || u.conf.Deploy == agentconf.ServerEntry
}

func (u *Updater) servesDense() bool {
	return u.conf.DenseAlone && (u.conf.Deploy == agentconf.DeployMixed || u.conf.Deploy == agentconf.ServerDense)
}

// ModelNames are the TF Serving models whose status this host reports: ps_{i} for its PS tasks,
// entry, dense_0, by deploy type.
func (u *Updater) ModelNames() []string {
	var names []string
	if u.servesPS() {
		for _, i := range u.psTasks {
			names = append(names, agentconf.ServerPS+"_"+strconv.Itoa(i))
		}
	}
	if u.servesEntry() {
		names = append(names, agentconf.ServerEntry)
	}
	if u.servesDense() {
		names = append(names, agentconf.ServerDense+"_0")
	}
	return names
}

// EntryPath is {prefix}/entry:0/{replica_id} (unpadded, as the reference's entry_path property;
// the entry registers under the zero-padded name, see Register).
func (u *Updater) EntryPath() string { return u.replicaPath(agentconf.ServerEntry, 0, u.ReplicaID()) }

// PSPath is {prefix}/ps:{task}/{replica_id}.
func (u *Updater) PSPath(task int) string {
	return u.replicaPath(agentconf.ServerPS, task, u.ReplicaID())
}

// DensePath is {prefix}/dense:0/{replica_id}.
func (u *Updater) DensePath() string { return u.replicaPath(agentconf.ServerDense, 0, u.ReplicaID()) }

func (u *Updater) replicaPath(st string, task, replica int) string {
	return u.prefix + "/" + st + ":" + strconv.Itoa(task) + "/" + strconv.Itoa(replica)
}

// entryRegisterPath is where the entry registers: {replica_id:011d}, or a sequence node under
// ".../0" when the replica id is -1 (ZooKeeper appends ten digits: the id has eleven).
func (u *Updater) entryRegisterPath(replicaID int) string {
	if replicaID == -1 {
		return u.prefix + "/" + agentconf.ServerEntry + ":0/0"
	}
	return fmt.Sprintf("%s/%s:0/%011d", u.prefix, agentconf.ServerEntry, replicaID)
}

// Paths lists the registered replica nodes, sorted (the keys of the reference's meta).
func (u *Updater) Paths() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make([]string, 0, len(u.meta))
	for p := range u.meta {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// Meta returns the ReplicaMeta last written for a registered node.
func (u *Updater) Meta(path string) (datadef.ReplicaMeta, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	m, ok := u.meta[path]
	return m, ok
}

func port(p *int, name string) (int, error) {
	if p == nil {
		return 0, errkind.New(errkind.Attribute, "replica updater: %s is not set", name)
	}
	return *p, nil
}

// Register creates (or rewrites) this host's replica nodes with stat UNKNOWN: the entry node under
// entry:0 (a sequence node when the replica id is -1, which then becomes the assigned number), one
// node per PS task of this shard, the dense node when dense runs alone. Each node is ephemeral, its
// parents created as needed; a node that exists already is rewritten when its data differs. The
// status updates set the real stat afterwards. Registering again (on a new session) keeps the stat
// last written instead of UNKNOWN: the reference's re-registration made a serving replica UNKNOWN
// until its next status update.
func (u *Updater) Register(ctx context.Context) error {
	c := u.conf
	// Every node holds the same host addresses: resolve them once, not once per node.
	host := resolveHost(ctx, u.opts.Env, u.opts.Resolver)
	if u.servesEntry() {
		grpc, err := port(c.TFSEntryPort, "tfs_entry_port")
		if err != nil {
			return err
		}
		archon, err := port(c.TFSEntryArchonPort, "tfs_entry_archon_port")
		if err != nil {
			return err
		}
		if err := u.register(ctx, u.entryRegisterPath(u.ReplicaID()), host.meta(grpc, archon), true); err != nil {
			return err
		}
	}
	if u.servesPS() {
		grpc, err := port(c.TFSPSPort, "tfs_ps_port")
		if err != nil {
			return err
		}
		archon, err := port(c.TFSPSArchonPort, "tfs_ps_archon_port")
		if err != nil {
			return err
		}
		err = parallel(ctx, len(u.psTasks), DefaultParallelism, func(ctx context.Context, i int) error {
			return u.register(ctx, u.PSPath(u.psTasks[i]), host.meta(grpc, archon), false)
		})
		if err != nil {
			return err
		}
	}
	if u.servesDense() {
		grpc, err := port(c.TFSDensePort, "tfs_dense_port")
		if err != nil {
			return err
		}
		archon, err := port(c.TFSDenseArchonPort, "tfs_dense_archon_port")
		if err != nil {
			return err
		}
		if err := u.register(ctx, u.DensePath(), host.meta(grpc, archon), false); err != nil {
			return err
		}
	}
	return nil
}

// register is the reference's _do_register for one node.
func (u *Updater) register(ctx context.Context, path string, meta datadef.ReplicaMeta, entry bool) error {
	unlock := u.lockNode(path)
	defer unlock()
	u.mu.Lock()
	if prev, ok := u.meta[path]; ok {
		// Registered again (a new session): the replica keeps the stat last written, so a replica
		// that serves does not turn UNKNOWN until the next status update.
		meta.Stat = prev.Stat
	}
	data := meta.Serialize()
	u.meta[path] = meta
	sequence := entry && u.replicaID == -1
	u.mu.Unlock()

	cur, _, err := u.get(ctx, path)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		// Not registered yet: create it below.
	case err != nil:
		return err
	case bytes.Equal(cur, data):
		return nil
	default:
		return u.set(ctx, path, data)
	}
	real, err := u.create(ctx, path, data, sequence)
	if errors.Is(err, zk.ErrNodeExists) {
		u.log.Info("replica node already exists", "path", path)
		return u.set(ctx, path, data)
	}
	if err != nil {
		return err
	}
	if sequence {
		id, perr := pyint.Atoi(zk.Base(real))
		if perr != nil {
			return errkind.New(errkind.Value, "replica updater: sequence node %s: not a replica id", real)
		}
		u.mu.Lock()
		u.replicaID = id
		delete(u.meta, path)
		u.meta[real] = meta
		u.mu.Unlock()
	}
	return nil
}

// UpdateOnce reads each model's status and writes the stat of its replica node when it changed
// (the reference's _do_update over model_names). Unlike the reference, a model whose status
// cannot be used does not keep the others from being updated: the errors are joined.
func (u *Updater) UpdateOnce(ctx context.Context) error {
	var errs []error
	for _, name := range u.ModelNames() {
		if err := u.update(ctx, name); err != nil {
			errs = append(errs, fmt.Errorf("update %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// update is the reference's _do_update: the replica's stat becomes the state of the newest
// AVAILABLE version (else of the highest version); UNKNOWN when the status RPC fails; a status
// with an error code is an error (kind Generic, the reference's bare Exception) and changes
// nothing.
func (u *Updater) update(ctx context.Context, name string) error {
	var path string
	switch {
	case strings.HasPrefix(name, agentconf.ServerEntry):
		path = u.entryRegisterPath(u.ReplicaID())
	case strings.HasPrefix(name, agentconf.ServerPS):
		// name.split("_")[1] in the reference: "ps_1_x" is task 1.
		parts := strings.Split(name, "_")
		if len(parts) < 2 {
			return errkind.New(errkind.Value, "model name %q: no PS task index", name)
		}
		task, err := pyint.Atoi(parts[1])
		if err != nil {
			return errkind.New(errkind.Value, "model name %q: no PS task index", name)
		}
		path = u.PSPath(task)
	default:
		path = u.DensePath()
	}
	if _, ok := u.Meta(path); !ok {
		return errkind.New(errkind.NotFound, "replica node %s is not registered", path)
	}
	rctx, cancel := context.WithTimeout(ctx, u.opts.CallTimeout)
	statuses, err := u.status.VersionStatus(rctx, name, modelconfig.Version{}, nil)
	cancel()
	if err != nil {
		u.log.Debug("model status unavailable", "model", name, "err", err)
		return u.setStat(ctx, path, datadef.StateUnknown)
	}
	if len(statuses) == 0 {
		return nil
	}
	chosen := chooseStatus(statuses)
	if code := chosen.GetStatus().GetErrorCode(); code != tfprotobuf.Code_OK {
		return errkind.New(errkind.Generic, "%s", chosen.GetStatus().GetErrorMessage())
	}
	return u.setStat(ctx, path, datadef.ModelState(chosen.GetState()))
}

// chooseStatus picks the newest AVAILABLE version, else the highest version (the first listed
// among equal versions, as the reference's stable sort does).
func chooseStatus(statuses []*servingapis.ModelVersionStatus) *servingapis.ModelVersionStatus {
	var best *servingapis.ModelVersionStatus
	for _, s := range statuses {
		if s.GetState() == servingapis.ModelVersionStatus_AVAILABLE && (best == nil || s.GetVersion() > best.GetVersion()) {
			best = s
		}
	}
	if best != nil {
		return best
	}
	return latestStatus(statuses)
}

// latestStatus is the status of the highest version, the first listed among equal ones; statuses
// must not be empty.
func latestStatus(statuses []*servingapis.ModelVersionStatus) *servingapis.ModelVersionStatus {
	return slices.MaxFunc(statuses, func(a, b *servingapis.ModelVersionStatus) int {
		return cmp.Compare(a.GetVersion(), b.GetVersion())
	})
}

// setStat writes the node's stat when it differs from the one last written; a missing node is
// created again (ephemeral). The cached meta changes only once the write succeeded, so a failed
// write is retried on the next round (the reference updated it first and never retried).
func (u *Updater) setStat(ctx context.Context, path string, stat datadef.ModelState) error {
	unlock := u.lockNode(path)
	defer unlock()
	meta, ok := u.Meta(path)
	if !ok || meta.Stat == stat {
		return nil
	}
	meta.Stat = stat
	data := meta.Serialize()
	err := u.set(ctx, path, data)
	if errors.Is(err, zk.ErrNoNode) {
		_, err = u.create(ctx, path, data, false)
		if errors.Is(err, zk.ErrNodeExists) {
			err = u.set(ctx, path, data)
		}
	}
	if err != nil {
		return err
	}
	u.mu.Lock()
	if _, still := u.meta[path]; still {
		u.meta[path] = meta
	}
	u.mu.Unlock()
	return nil
}

func (u *Updater) lockNode(path string) (unlock func()) {
	m, _ := u.nodeLocks.LoadOrStore(path, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// ZooKeeper calls, each under CallTimeout; writes retried on connection loss.

func (u *Updater) exists(ctx context.Context, path string) (*zk.Stat, error) {
	ctx, cancel := context.WithTimeout(ctx, u.opts.CallTimeout)
	defer cancel()
	return u.zk.Exists(ctx, path)
}

func (u *Updater) get(ctx context.Context, path string) ([]byte, zk.Stat, error) {
	ctx, cancel := context.WithTimeout(ctx, u.opts.CallTimeout)
	defer cancel()
	return u.zk.Get(ctx, path)
}

func (u *Updater) set(ctx context.Context, path string, data []byte) error {
	return zk.Retry(ctx, u.opts.Retry, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, u.opts.CallTimeout)
		defer cancel()
		_, err := u.zk.Set(ctx, path, data, zk.AnyVersion)
		return err
	})
}

func (u *Updater) create(ctx context.Context, path string, data []byte, sequence bool) (string, error) {
	var real string
	err := zk.Retry(ctx, u.opts.Retry, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, u.opts.CallTimeout)
		defer cancel()
		var err error
		real, err = u.zk.Create(ctx, path, data, zk.CreateOptions{Ephemeral: true, MakePath: true, Sequence: sequence})
		return err
	})
	return real, err
}

// setPaused stops (true) or resumes the status updates; the connection listener pauses them
// while the session is lost.
func (u *Updater) setPaused(p bool) { u.paused.Store(p) }

// kickUpdate asks for a status update round now.
func (u *Updater) kickUpdate() {
	select {
	case u.kick <- struct{}{}:
	default:
	}
}

// Restore re-creates the registered nodes that are missing, with the data last written (the
// reference's reconciliation re-created them from its cache, with the wrong gRPC port). Nodes that
// exist are left alone.
func (u *Updater) Restore(ctx context.Context) error {
	var errs []error
	for _, path := range u.Paths() {
		errs = append(errs, u.restore(ctx, path))
	}
	return errors.Join(errs...)
}

func (u *Updater) restore(ctx context.Context, path string) error {
	unlock := u.lockNode(path)
	defer unlock()
	meta, ok := u.Meta(path)
	if !ok {
		return nil
	}
	st, err := u.exists(ctx, path)
	if err != nil || st != nil {
		return err
	}
	_, err = u.create(ctx, path, meta.Serialize(), false)
	if errors.Is(err, zk.ErrNodeExists) {
		return nil
	}
	if err == nil {
		u.log.Info("re-created a missing replica node", "path", path)
	}
	return err
}

// Start connects the status source it owns and starts the status updates (every UpdateInterval)
// and, with Metrics set, the version metrics. Starting twice is an error of kind Runtime.
func (u *Updater) Start() error {
	u.runMu.Lock()
	defer u.runMu.Unlock()
	if u.running {
		return errkind.New(errkind.Runtime, "replica updater: already started")
	}
	if u.monitor != nil {
		if err := u.monitor.Connect(); err != nil {
			return fmt.Errorf("replica updater: %w", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	u.running, u.cancel = true, cancel
	u.wg.Add(1)
	go u.updateLoop(ctx)
	if u.opts.Metrics != nil {
		u.wg.Add(1)
		go u.versionLoop(ctx)
	}
	return nil
}

// Stop ends the loops (an RPC or write in progress is cancelled), closes the status source it
// owns and forgets the registered nodes (they stay in ZooKeeper until the session ends).
func (u *Updater) Stop() {
	u.runMu.Lock()
	defer u.runMu.Unlock()
	if !u.running {
		return
	}
	u.running = false
	u.cancel()
	u.wg.Wait()
	if u.monitor != nil {
		u.monitor.Close()
	}
	u.mu.Lock()
	u.meta = map[string]datadef.ReplicaMeta{}
	u.mu.Unlock()
}

func (u *Updater) updateLoop(ctx context.Context) {
	defer u.wg.Done()
	t := time.NewTicker(u.opts.UpdateInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-u.kick:
		}
		if u.paused.Load() {
			continue
		}
		if err := u.UpdateOnce(ctx); err != nil && ctx.Err() == nil {
			u.log.Error("replica status update failed", "err", err)
		}
	}
}
