package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/zk"
)

// Defaults of WatcherOptions and UpdaterOptions.
const (
	// DefaultPollInterval is the reference's reconciliation period (its _poll sleeps 60 s).
	DefaultPollInterval = 60 * time.Second
	// DefaultParallelism bounds the ZooKeeper reads in flight at each level of the tree.
	DefaultParallelism = 64
	// DefaultCallTimeout bounds each ZooKeeper call (and each TF Serving status RPC) made in the
	// background.
	DefaultCallTimeout = 10 * time.Second
)

// WatcherOptions configure a Watcher. The zero value is the reference's ReplicaWatcher(zk, conf):
// gRPC addresses, IPv4 preferred, a reconciliation every 60 s.
type WatcherOptions struct {
	// UseArchon answers archon addresses instead of gRPC ones.
	UseArchon bool
	// AddressFamily is the preferred family, datadef.IPv4 (default) or datadef.IPv6. IPv4 becomes
	// IPv6 on an IPv6-only host, as in the reference.
	AddressFamily string
	// Env reads MY_HOST_IP and friends for the IPv6-only check; nil means the config's.
	Env agentconf.LookupEnv
	// PollInterval is the period of the reconciliation (Reconcile); 0 means DefaultPollInterval,
	// a negative value turns it off.
	PollInterval time.Duration
	// Parallelism bounds the concurrent ZooKeeper reads per tree level; 0 means DefaultParallelism.
	Parallelism int
	// CallTimeout bounds each ZooKeeper call of the reconciliation; 0 means DefaultCallTimeout.
	CallTimeout time.Duration
	// OwnPaths lists the replica nodes this process registers; with OnOwnMissing, a
	// reconciliation that finds one of them missing reports it (the Manager re-registers).
	OwnPaths     func() []string
	OnOwnMissing func(paths []string)
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Tree levels: what the children of a watched node are. Each level has its own bound on setups in
// flight; a setup only ever waits for setups of the next level, so the bounds cannot deadlock.
const (
	levelIDCCluster = iota // children of the prefix under dc_aware: {idc}:{cluster}
	levelTask              // {server_type}:{index}
	levelReplica           // replica nodes
	numLevels
)

// replicaWorkersPerTask is how many goroutines set up one task's replica watches.
const replicaWorkersPerTask = 4

// slot is a watch set up (or being set up) on a path. The map entry is reserved before the watch
// exists, so a path is never watched twice.
type slot struct{ w zk.Watch }

// Watcher keeps the replicas registered under /{bzid}/service/{base_name} (the reference's
// ReplicaWatcher): a chain of children watches down to one data watch per replica node, and a
// periodic reconciliation that rereads the tree.
//
// Start returns once every replica present at that time is in the cache: each level's new children
// are set up in parallel (bounded by Parallelism), which pipelines the reads on the ZooKeeper
// connection instead of reading node by node as the reference does.
type Watcher struct {
	zk        zk.Client
	conf      *agentconf.AgentConfig
	prefix    string
	useArchon bool
	family    string
	opts      WatcherOptions
	log       *slog.Logger
	sems      [numLevels]chan struct{}

	mu         sync.Mutex
	cache      cache
	gen        uint64 // bumped by Start and Stop: callbacks of an earlier run do nothing
	running    bool
	slots      map[string]*slot
	touched    map[string]struct{} // cache keys changed by watches while a reconciliation reads
	pollPaused bool                // the reference's _should_poll == False
	// While this process registers its replicas again on a new session (holdOwn), the vanishing
	// of their nodes is not passed on to the answers: holding lists them, held those kept in the
	// cache while their node was missing (releaseOwn settles them).
	holding map[string]bool
	held    map[string]bool
	// own lists this process's replica paths from the first holdOwn on. After releaseOwn a watch
	// re-armed on the new session may still deliver the absence it read before the nodes were
	// registered again: for an own path that absence is confirmed (recheck) before the replica
	// leaves the answers.
	own    map[string]bool
	cancel context.CancelFunc

	reconcileMu sync.Mutex
	wg          sync.WaitGroup
}

// NewWatcher returns a watcher of conf's replicas; it watches nothing until Start.
func NewWatcher(client zk.Client, conf *agentconf.AgentConfig, opts WatcherOptions) (*Watcher, error) {
	if client == nil || conf == nil {
		return nil, errkind.New(errkind.Value, "replica watcher: needs a ZooKeeper client and a config")
	}
	if conf.Bzid == nil || conf.BaseName == nil {
		return nil, errkind.New(errkind.Type, "replica watcher: bzid and base_name must be set")
	}
	if opts.AddressFamily == "" {
		opts.AddressFamily = datadef.IPv4
	}
	if opts.AddressFamily != datadef.IPv4 && opts.AddressFamily != datadef.IPv6 {
		return nil, errkind.New(errkind.Value, "replica watcher: address family %q: want %s or %s",
			opts.AddressFamily, datadef.IPv4, datadef.IPv6)
	}
	if opts.Env == nil {
		opts.Env = conf.LookupEnv
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.Parallelism <= 0 {
		opts.Parallelism = DefaultParallelism
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	w := &Watcher{
		zk: client, conf: conf, prefix: zk.Join(*conf.Bzid, "service", *conf.BaseName),
		useArchon: opts.UseArchon, family: opts.AddressFamily, opts: opts,
		log: opts.Logger.With("component", "replica_watcher"), cache: newCache(), slots: map[string]*slot{},
	}
	if err := zk.ValidatePath(w.prefix); err != nil {
		return nil, errkind.Wrap(errkind.Value, fmt.Errorf("replica watcher: prefix %q: %w", w.prefix, err))
	}
	if w.family == datadef.IPv4 && agentconf.IsIPv6Only(opts.Env) {
		w.log.Warn("zk_watch_address_family change to IPV6")
		w.family = datadef.IPv6
	}
	for i := range w.sems {
		w.sems[i] = make(chan struct{}, opts.Parallelism)
	}
	return w, nil
}

// PathPrefix is /{bzid}/service/{base_name}, the root of the watched tree.
func (w *Watcher) PathPrefix() string { return w.prefix }

// AddressFamily is the family addresses are answered in (IPv6 on an IPv6-only host).
func (w *Watcher) AddressFamily() string { return w.family }

// Start watches the tree (the reference's watch_data) and starts the reconciliation. It returns
// once the replicas present now are cached, or with the error that kept the root from being
// watched. Starting a running watcher is an error of kind Runtime.
func (w *Watcher) Start() error {
	w.mu.Lock()
	if w.running {
		w.mu.Unlock()
		return errkind.New(errkind.Runtime, "replica watcher: already started")
	}
	w.running = true
	w.gen++
	gen := w.gen
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	w.mu.Unlock()

	level := levelTask
	if w.conf.DCAware {
		level = levelIDCCluster
	}
	s, ok := w.reserve(gen, w.prefix)
	if !ok {
		return errkind.New(errkind.Runtime, "replica watcher: stopped while starting")
	}
	if err := w.startChildren(gen, w.prefix, s, level); err != nil {
		w.Stop()
		return fmt.Errorf("replica watcher: %w", err)
	}
	if w.opts.PollInterval > 0 {
		w.wg.Add(1)
		go w.pollLoop(ctx, gen)
	}
	return nil
}

// Stop ends every watch and the reconciliation, and empties the cache. It returns promptly: a
// reconciliation in progress is cancelled, not waited out. The watcher may be started again.
func (w *Watcher) Stop() {
	w.mu.Lock()
	if !w.running {
		w.mu.Unlock()
		return
	}
	w.running = false
	w.gen++
	var watches []zk.Watch
	for _, s := range w.slots {
		if s.w != nil {
			watches = append(watches, s.w)
		}
	}
	w.slots = map[string]*slot{}
	w.cache.clear()
	w.touched = nil
	w.holding, w.held = nil, nil
	cancel := w.cancel
	w.mu.Unlock()

	cancel()
	for _, wt := range watches {
		wt.Stop()
	}
	w.wg.Wait()
}

// setPollPaused pauses (true) or resumes the reconciliation; the connection listener pauses it
// while the session is lost.
func (w *Watcher) setPollPaused(p bool) {
	w.mu.Lock()
	w.pollPaused = p
	w.mu.Unlock()
}

// holdOwn keeps the replicas at paths (this process's own) in the answers while their nodes are
// missing, until releaseOwn: the Manager calls it when the session is lost, as the nodes go with
// it and come back only once they are registered on the new session. The processes serving
// them have not stopped, so the answers (GetReplicas) keep them rather than dropping them for the
// few milliseconds between the new session's watch deliveries and the re-registration.
func (w *Watcher) holdOwn(paths []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.holding = make(map[string]bool, len(paths))
	if w.own == nil {
		w.own = make(map[string]bool, len(paths))
	}
	for _, p := range paths {
		w.holding[p] = true
		w.own[p] = true
	}
}

// releaseOwn ends holdOwn once the replicas are registered again. A replica kept while its node
// was missing and not seen since is looked at again: a data watch is set on its node, which puts
// it back in the cache, or removes it if the node is still missing.
func (w *Watcher) releaseOwn() {
	w.mu.Lock()
	gen, held := w.gen, w.held
	w.holding, w.held = nil, nil
	w.mu.Unlock()
	for p := range held {
		if s, ok := w.reserve(gen, p); ok {
			if err := w.startData(gen, p, s); err != nil && w.current(gen) && !errors.Is(err, zk.ErrClosed) {
				w.log.Warn("watching an own replica again failed", "path", p, "err", err)
			}
		}
	}
}

// reserve claims path for a new watch; false when it is watched already or the run is over.
func (w *Watcher) reserve(gen uint64, path string) (*slot, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gen != gen || w.slots[path] != nil {
		return nil, false
	}
	s := &slot{}
	w.slots[path] = s
	return s, true
}

// settle records the watch set up for s, or drops it when s was released meanwhile (the node
// vanished, or Stop was called).
func (w *Watcher) settle(gen uint64, path string, s *slot, watch zk.Watch, err error) error {
	w.mu.Lock()
	ours := w.gen == gen && w.slots[path] == s
	if err != nil && ours {
		delete(w.slots, path)
	}
	if err == nil && ours {
		s.w = watch
	}
	w.mu.Unlock()
	if err != nil {
		return fmt.Errorf("watch %s: %w", path, err)
	}
	if !ours {
		watch.Stop()
	}
	return nil
}

// startChildren watches the children of path; level says what they are.
func (w *Watcher) startChildren(gen uint64, path string, s *slot, level int) error {
	watch, err := w.zk.ChildrenWatch(path, func(children []string, _ *zk.WatchEvent) bool {
		return w.onChildren(gen, path, s, level, children)
	})
	return w.settle(gen, path, s, watch, err)
}

// onChildren sets up watches on the children not watched yet, in parallel, and returns when they
// have delivered their first state.
func (w *Watcher) onChildren(gen uint64, parent string, s *slot, level int, children []string) bool {
	type pending struct {
		path string
		s    *slot
	}
	var todo []pending
	w.mu.Lock()
	if w.gen != gen || w.slots[parent] != s {
		w.mu.Unlock()
		return false
	}
	for _, name := range children {
		if level == levelReplica {
			if _, ok := replicaKey(name); !ok {
				continue // not a replica node (the reference's int() raised on it)
			}
		}
		p := parent + "/" + name
		if w.slots[p] != nil {
			continue
		}
		ns := &slot{}
		w.slots[p] = ns
		todo = append(todo, pending{p, ns})
	}
	w.mu.Unlock()

	errs := make([]error, len(todo))
	// Replicas: a few workers per task, many tasks at a time; the upper levels: as wide as allowed.
	workers := w.opts.Parallelism
	if level == levelReplica {
		workers = replicaWorkersPerTask
	}
	fanOut(len(todo), workers, w.sems[level], func(i int) {
		if level == levelReplica {
			errs[i] = w.startData(gen, todo[i].path, todo[i].s)
		} else {
			errs[i] = w.startChildren(gen, todo[i].path, todo[i].s, level+1)
		}
	})
	if err := errors.Join(errs...); err != nil && w.current(gen) && !errors.Is(err, zk.ErrClosed) {
		// The next reconciliation retries the paths left unwatched.
		w.log.Warn("watching new nodes failed", "parent", parent, "err", err)
	}
	return w.current(gen)
}

// startData watches one replica node.
func (w *Watcher) startData(gen uint64, path string, s *slot) error {
	task, key, _ := splitReplicaPath(path)
	watch, err := w.zk.DataWatch(path, func(data []byte, st *zk.Stat, ev *zk.WatchEvent) bool {
		return w.onData(gen, path, task, key, s, data, st, ev)
	})
	return w.settle(gen, path, s, watch, err)
}

// onData applies one delivery of a replica node's data watch (the reference's data_watch):
//   - node absent (DELETED, or gone before the watch was set): the replica leaves the cache, the
//     watch ends, and the node is looked up once more in case it was re-created meanwhile (its
//     parent's children watch would not report a name it still has);
//   - empty payload: a cached replica becomes UNKNOWN, an uncached one is ignored; an unreadable
//     payload is treated the same way (the reference raised in the callback);
//   - otherwise (first call, CREATED, CHANGED, and NONE, the state read again on a new session):
//     the replica is cached as read.
func (w *Watcher) onData(gen uint64, path, task, key string, s *slot, data []byte, st *zk.Stat, ev *zk.WatchEvent) bool {
	if ev != nil && ev.Type == zk.EventChild {
		return w.current(gen)
	}
	var meta datadef.ReplicaMeta
	var decodeErr error
	if st != nil && len(data) > 0 {
		meta, decodeErr = datadef.DeserializeReplicaMeta(data)
	}
	w.mu.Lock()
	if w.gen != gen || w.slots[path] != s {
		w.mu.Unlock()
		return false
	}
	w.touchLocked(task + "/" + key)
	switch {
	case st == nil:
		_, cached := w.cache.get(task, key)
		confirm := false
		switch {
		case cached && w.holding[path]:
			// An own replica being registered again: it stays as it was (see holdOwn).
			if w.held == nil {
				w.held = map[string]bool{}
			}
			w.held[path] = true
		case cached && w.own[path]:
			// Possibly a read from before the re-registration: it leaves only if still missing.
			confirm = true
		default:
			w.cache.remove(task, key)
		}
		delete(w.slots, path)
		w.mu.Unlock()
		w.recheck(gen, path, confirm)
		return false
	case len(data) == 0 || decodeErr != nil:
		w.cache.markUnknown(task, key)
	default:
		w.cache.put(task, key, meta, st.Czxid)
	}
	delete(w.held, path)
	w.mu.Unlock()
	if decodeErr != nil {
		w.log.Warn("unreadable replica node", "path", path, "err", decodeErr)
	}
	return true
}

// recheck watches path again if it exists: a node deleted and re-created before its watch noticed
// the deletion keeps its name in the parent's list, so no children event would bring it back.
// With confirm (an own replica kept in the cache), a node still missing leaves the cache now.
func (w *Watcher) recheck(gen uint64, path string, confirm bool) {
	ctx, cancel := context.WithTimeout(context.Background(), w.opts.CallTimeout)
	defer cancel()
	st, err := w.zk.Exists(ctx, path)
	if err == nil && st == nil && confirm {
		w.dropUnwatched(gen, path)
	}
	if err != nil || st == nil {
		return // gone, or unknown: the next reconciliation looks again
	}
	if s, ok := w.reserve(gen, path); ok {
		if err := w.startData(gen, path, s); err != nil {
			w.log.Warn("re-watching a re-created replica failed", "path", path, "err", err)
		}
	}
}

// dropUnwatched removes path's replica from the cache unless a watch or a hold has taken it up
// again meanwhile.
func (w *Watcher) dropUnwatched(gen uint64, path string) {
	task, key, _ := splitReplicaPath(path)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gen != gen || w.slots[path] != nil || w.holding[path] {
		return
	}
	w.touchLocked(task + "/" + key)
	w.cache.remove(task, key)
}

func (w *Watcher) touchLocked(key string) {
	if w.touched != nil {
		w.touched[key] = struct{}{}
	}
}

// current reports whether run gen is still the running one (a watch of an old run stops).
func (w *Watcher) current(gen uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.gen == gen
}

// fanOut runs fn(0..n-1) on at most `workers` goroutines of its own (the caller's included), each
// item holding a slot of sem, which bounds the items in flight across every caller sharing it.
// Reusing a few goroutines instead of one per item spares the stack growth of thousands of new
// goroutines during a large load.
func fanOut(n, workers int, sem chan struct{}, fn func(i int)) {
	var next atomic.Int64
	work := func() {
		for {
			i := int(next.Add(1) - 1)
			if i >= n {
				return
			}
			sem <- struct{}{}
			fn(i)
			<-sem
		}
	}
	var wg sync.WaitGroup
	for w := 1; w < min(n, workers); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work()
		}()
	}
	work()
	wg.Wait()
}
