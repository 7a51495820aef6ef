package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pyint"
	"github.com/monolith-go/monolith/pkg/trainenv"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkreal"
)

// ZK defaults of the reference.
const (
	// DefaultRegistrationPeriod spaces the re-registrations of every registered node
	// (_ZK_REGISTRATION_PERIOD).
	DefaultRegistrationPeriod = 30 * time.Minute
	// ZKRoot is the parent of every job's directory.
	ZKRoot = "/monolith"
	// zkCloseTimeout bounds the deletion of registered nodes on Close of a shared client.
	zkCloseTimeout = 10 * time.Second
	// zkConnectTimeout bounds the first connection when the caller's context has no deadline.
	zkConnectTimeout = 30 * time.Second
)

// DefaultZKRetry is the reference's KazooRetry(max_tries=3, delay=5): the first call and three
// retries on a lost connection, 5 s apart and doubling.
var DefaultZKRetry = zk.RetryPolicy{MaxTries: 4, Delay: 5 * time.Second, Backoff: 2, MaxDelay: 60 * time.Second}

// ZKOptions configure NewZK.
type ZKOptions struct {
	// JobName names the job's directory /monolith/<JobName> (the RunnerConfig's deep_insight_name).
	JobName string
	// Servers is kazoo's hosts string ("host:port,host:port/chroot"); used when Client is nil.
	Servers string
	// Client, when set, is used instead of connecting to Servers. It stays the caller's: Close
	// deletes this discovery's nodes and leaves the client open.
	Client zk.Client
	// Env supplies ZK_AUTH (digest credentials) for the connection to Servers.
	Env trainenv.Env
	// SessionTimeout of the connection to Servers (zkreal's default when 0).
	SessionTimeout time.Duration
	// RegistrationPeriod spaces the periodic re-registrations (DefaultRegistrationPeriod when 0).
	RegistrationPeriod time.Duration
	// Retry bounds the retries of a register or deregister on a lost connection (DefaultZKRetry
	// when zero).
	Retry zk.RetryPolicy
	// Logger gets the discovery's log (slog.Default() when nil).
	Logger *slog.Logger
}

// ephemeralOwner is what zkreal.Client adds to zk.Client: nodes it re-creates on every new
// session, replacing one another session left behind.
type ephemeralOwner interface {
	RegisterEphemeral(ctx context.Context, path string, data []byte) error
	Unregister(ctx context.Context, path string) error
}

type regKey struct {
	name  string
	index int
}

// ZKDiscovery is the ZooKeeper discovery (ZKServiceDiscovery). Replica index of server type name
// is the ephemeral node /monolith/<job>/<name>.<index> holding its address. A children watch on the
// job's directory and a data watch on each child keep the cluster map that Query reads current.
// Registered nodes are written again every RegistrationPeriod and as soon as a new session
// follows an expired one; on a zkreal client they are also re-created by the client itself before
// the new session is announced.
type ZKDiscovery struct {
	client zk.Client
	owned  bool           // connected by NewZK: closed by Close
	eph    ephemeralOwner // nil when the client cannot own nodes across sessions
	prefix string
	period time.Duration
	retry  zk.RetryPolicy
	log    *slog.Logger

	// opMu serializes registrations, deregistrations and re-registrations, so a re-registration
	// never re-creates a node deregistered meanwhile. Watch callbacks never take it.
	opMu sync.Mutex
	regs map[regKey]string // what this instance registered -> address

	mu       sync.Mutex
	cluster  map[string]map[int]string
	children map[string]*childWatch // job directory child -> its data watch
	ignored  map[string]bool        // children whose names are not <type>.<index> (logged once)
	closed   bool
	lost     bool // the session expired and no new one is up yet

	root           zk.Watch
	removeListener func()
	wake           chan struct{}
	stop           chan struct{}
	wg             sync.WaitGroup
	closeOnce      sync.Once
}

// childWatch is the data watch of one child; stopped is set (under ZKDiscovery.mu) when the child
// is gone, so a late data callback cannot bring its entry back.
type childWatch struct {
	serverType string
	index      int
	w          zk.Watch
	stopped    bool
}

var _ ServiceDiscovery = (*ZKDiscovery)(nil)

// NewZK connects (unless opts.Client is set), creates /monolith/<job> and starts watching it.
// An empty job name or server list is an error of kind Value.
func NewZK(ctx context.Context, opts ZKOptions) (*ZKDiscovery, error) {
	if opts.JobName == "" || strings.Contains(opts.JobName, "/") {
		return nil, errkind.New(errkind.Value, "zk discovery: bad job name %q", opts.JobName)
	}
	prefix := zk.Join(ZKRoot, opts.JobName)
	if err := zk.ValidatePath(prefix); err != nil {
		return nil, fmt.Errorf("zk discovery: job name %q: %w", opts.JobName, err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	d := &ZKDiscovery{
		client: opts.Client, prefix: prefix, period: opts.RegistrationPeriod, retry: opts.Retry,
		log:  log.With("component", "zk_discovery", "job", opts.JobName),
		regs: map[regKey]string{}, cluster: map[string]map[int]string{},
		children: map[string]*childWatch{}, ignored: map[string]bool{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}),
	}
	if d.period <= 0 {
		d.period = DefaultRegistrationPeriod
	}
	if d.retry == (zk.RetryPolicy{}) {
		d.retry = DefaultZKRetry
	}
	if d.client == nil {
		c, err := connectZK(ctx, opts)
		if err != nil {
			return nil, err
		}
		d.client, d.owned = c, true
	}
	d.eph, _ = d.client.(ephemeralOwner)
	if err := d.start(ctx); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

func connectZK(ctx context.Context, opts ZKOptions) (zk.Client, error) {
	if strings.TrimSpace(opts.Servers) == "" {
		// The reference's default_zk_servers() is an empty list in the open-source release.
		return nil, errkind.New(errkind.Value, "zk discovery: no ZooKeeper servers (zk_server is empty)")
	}
	var auth []zkreal.Auth
	for _, a := range trainenv.ZKAuthData(opts.Env) {
		auth = append(auth, zkreal.Auth{Scheme: a.Scheme, Data: []byte(a.Credential)})
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, zkConnectTimeout)
		defer cancel()
	}
	c, err := zkreal.ConnectHosts(ctx, opts.Servers, zkreal.Options{SessionTimeout: opts.SessionTimeout, Auth: auth, Logger: opts.Logger})
	if err != nil {
		return nil, fmt.Errorf("zk discovery: %w", err)
	}
	return c, nil
}

func (d *ZKDiscovery) start(ctx context.Context) error {
	d.removeListener = d.client.AddListener(d.onState)
	if err := d.client.EnsurePath(ctx, d.prefix); err != nil {
		return fmt.Errorf("zk discovery: create %s: %w", d.prefix, err)
	}
	w, err := d.client.ChildrenWatch(d.prefix, d.onChildren)
	if err != nil {
		return fmt.Errorf("zk discovery: watch %s: %w", d.prefix, err)
	}
	d.mu.Lock()
	d.root = w
	d.mu.Unlock()
	d.wg.Add(1)
	go d.reregisterLoop()
	return nil
}

// onState wakes the re-registration as soon as a session follows an expired one (the reference's
// ZKListener).
func (d *ZKDiscovery) onState(s zk.State) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch s {
	case zk.StateLost:
		d.log.Warn("ZooKeeper session lost; registered nodes are re-created on the next session")
		d.lost = true
	case zk.StateConnected:
		if d.lost {
			d.lost = false
			d.log.Info("new ZooKeeper session after a lost one; registering again")
			select {
			case d.wake <- struct{}{}:
			default:
			}
		}
	}
}

// reregisterLoop writes every registered node again each period and when woken.
func (d *ZKDiscovery) reregisterLoop() {
	defer d.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-d.stop
		cancel()
	}()
	t := time.NewTimer(d.period)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
		case <-d.wake:
			if !t.Stop() {
				select {
				case <-t.C:
				default:
				}
			}
		}
		d.reregisterAll(ctx)
		t.Reset(d.period)
	}
}

// reregisterAll is best effort, as the reference's: a failure is logged and the next period tries
// again.
func (d *ZKDiscovery) reregisterAll(ctx context.Context) {
	d.opMu.Lock()
	defer d.opMu.Unlock()
	for k, addr := range d.regs {
		if ctx.Err() != nil {
			return
		}
		if err := d.put(ctx, d.path(k.name, k.index), addr); err != nil {
			d.log.Warn("periodic re-registration failed", "server_type", k.name, "index", k.index, "err", err)
		}
	}
}

func (d *ZKDiscovery) path(name string, index int) string {
	return zk.Join(d.prefix, fmt.Sprintf("%s.%d", name, index))
}

// put writes the node: owned across sessions on a client that can, else created ephemeral or, when
// it exists, given the address (the reference's _try_create).
func (d *ZKDiscovery) put(ctx context.Context, path, addr string) error {
	data := []byte(addr)
	return zk.Retry(ctx, d.retry, func(ctx context.Context) error {
		if d.eph != nil {
			return d.eph.RegisterEphemeral(ctx, path, data)
		}
		_, err := d.client.Create(ctx, path, data, zk.CreateOptions{Ephemeral: true, MakePath: true})
		if errors.Is(err, zk.ErrNodeExists) {
			_, err = d.client.Set(ctx, path, data, zk.AnyVersion)
		}
		return err
	})
}

func (d *ZKDiscovery) remove(ctx context.Context, path string) error {
	return zk.Retry(ctx, d.retry, func(ctx context.Context) error {
		var err error
		if d.eph != nil {
			err = d.eph.Unregister(ctx, path)
		} else {
			err = d.client.Delete(ctx, path, zk.DeleteOptions{Recursive: true})
		}
		if errors.Is(err, zk.ErrNoNode) {
			d.log.Info("node to deregister does not exist", "path", path)
			return nil
		}
		return err
	})
}

func validName(name string, index int) error {
	if name == "" || strings.Contains(name, "/") || index < 0 {
		return errkind.New(errkind.Value, "zk discovery: bad server type %q or index %d", name, index)
	}
	return nil
}

// Register writes addr at /monolith/<job>/<name>.<index> and keeps it there: this instance
// re-registers it periodically and after a session expiry. Registering the same name and index
// again replaces the address (the reference also started a second re-registration thread).
func (d *ZKDiscovery) Register(ctx context.Context, name string, index int, addr string) error {
	if err := validName(name, index); err != nil {
		return err
	}
	d.opMu.Lock()
	defer d.opMu.Unlock()
	if d.isClosed() {
		return ErrClosed
	}
	if err := d.put(ctx, d.path(name, index), addr); err != nil {
		d.log.Error("register failed", "server_type", name, "index", index, "err", err)
		return fmt.Errorf("zk discovery: register %s.%d: %w", name, index, err)
	}
	d.regs[regKey{name, index}] = addr
	return nil
}

// Deregister deletes the node of name's replica index (a missing node is fine) and stops
// re-registering it. When this instance had not registered it, the node is deleted all the same
// and the error is a *NotRegisteredError, as the reference raised KeyError after the delete.
func (d *ZKDiscovery) Deregister(ctx context.Context, name string, index int, _ string) error {
	if err := validName(name, index); err != nil {
		return err
	}
	d.opMu.Lock()
	defer d.opMu.Unlock()
	if d.isClosed() {
		return ErrClosed
	}
	if err := d.remove(ctx, d.path(name, index)); err != nil {
		d.log.Error("deregister failed", "server_type", name, "index", index, "err", err)
		return fmt.Errorf("zk discovery: deregister %s.%d: %w", name, index, err)
	}
	k := regKey{name, index}
	if _, ok := d.regs[k]; !ok {
		return &NotRegisteredError{Name: name, Index: index}
	}
	delete(d.regs, k)
	return nil
}

// Query returns the replicas of name the watches have seen.
func (d *ZKDiscovery) Query(_ context.Context, name string) (map[int]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, ErrClosed
	}
	return copyMap(d.cluster[name]), nil
}

// Snapshot returns the whole cluster map the watches have seen, server type -> index -> address.
func (d *ZKDiscovery) Snapshot() map[string]map[int]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]map[int]string, len(d.cluster))
	for t, m := range d.cluster {
		out[t] = copyMap(m)
	}
	return out
}

// parseChild splits "<server_type>.<index>" at its last dot; the reference split at every dot, so
// a server type with a dot broke its watch.
func parseChild(child string) (string, int, bool) {
	i := strings.LastIndexByte(child, '.')
	if i <= 0 {
		return "", 0, false
	}
	idx, err := pyint.Atoi(child[i+1:])
	if err != nil || idx < 0 {
		return "", 0, false
	}
	return child[:i], idx, true
}

// onChildren follows the job directory: a data watch for each new child, none for a child gone
// (whose entry leaves the map).
func (d *ZKDiscovery) onChildren(children []string, _ *zk.WatchEvent) bool {
	present := make(map[string]bool, len(children))
	for _, c := range children {
		if c != "" {
			present[c] = true
		}
	}
	var gone []zk.Watch
	var added []string
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return false
	}
	for name, cw := range d.children {
		if present[name] {
			continue
		}
		cw.stopped = true
		if cw.w != nil {
			gone = append(gone, cw.w)
		}
		d.dropLocked(cw.serverType, cw.index)
		delete(d.children, name)
	}
	for name := range present {
		if _, ok := d.children[name]; ok || d.ignored[name] {
			continue
		}
		typ, idx, ok := parseChild(name)
		if !ok {
			d.ignored[name] = true
			d.log.Warn("ignoring a node whose name is not <server_type>.<index>", "node", zk.Join(d.prefix, name))
			continue
		}
		d.children[name] = &childWatch{serverType: typ, index: idx}
		added = append(added, name)
	}
	for name := range d.ignored {
		if !present[name] {
			delete(d.ignored, name)
		}
	}
	d.mu.Unlock()
	for _, w := range gone {
		w.Stop()
	}
	for _, name := range added {
		d.watchChild(name)
	}
	return true
}

func (d *ZKDiscovery) watchChild(name string) {
	d.mu.Lock()
	cw := d.children[name]
	d.mu.Unlock()
	if cw == nil {
		return
	}
	w, err := d.client.DataWatch(zk.Join(d.prefix, name), func(data []byte, stat *zk.Stat, _ *zk.WatchEvent) bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		if cw.stopped || d.closed {
			return false
		}
		if stat != nil && len(data) > 0 {
			m := d.cluster[cw.serverType]
			if m == nil {
				m = map[int]string{}
				d.cluster[cw.serverType] = m
			}
			m[cw.index] = string(data)
		} else {
			d.dropLocked(cw.serverType, cw.index)
		}
		return true
	})
	if err != nil {
		if !errors.Is(err, zk.ErrClosed) {
			d.log.Warn("cannot watch a node", "node", zk.Join(d.prefix, name), "err", err)
		}
		d.mu.Lock()
		if d.children[name] == cw {
			// Forget it, so the next children change tries again.
			delete(d.children, name)
		}
		d.mu.Unlock()
		return
	}
	d.mu.Lock()
	cw.w = w
	stopped := cw.stopped
	d.mu.Unlock()
	if stopped {
		w.Stop()
	}
}

func (d *ZKDiscovery) dropLocked(serverType string, index int) {
	if m := d.cluster[serverType]; m != nil {
		delete(m, index)
	}
}

func (d *ZKDiscovery) isClosed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed
}

// Close stops the watches and the re-registration. A client NewZK connected is closed (its
// session's nodes go with it); a caller's client stays open and this instance's nodes are deleted.
func (d *ZKDiscovery) Close() error {
	var err error
	d.closeOnce.Do(func() {
		d.mu.Lock()
		d.closed = true
		watches := []zk.Watch{}
		if d.root != nil {
			watches = append(watches, d.root)
		}
		for _, cw := range d.children {
			cw.stopped = true
			if cw.w != nil {
				watches = append(watches, cw.w)
			}
		}
		d.children = map[string]*childWatch{}
		d.mu.Unlock()
		close(d.stop)
		d.wg.Wait()
		if d.removeListener != nil {
			d.removeListener()
		}
		for _, w := range watches {
			w.Stop()
		}
		if d.owned {
			err = d.client.Close()
			return
		}
		d.opMu.Lock()
		defer d.opMu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), zkCloseTimeout)
		defer cancel()
		for k := range d.regs {
			if rerr := d.remove(ctx, d.path(k.name, k.index)); rerr != nil {
				err = errors.Join(err, fmt.Errorf("zk discovery: close: delete %s.%d: %w", k.name, k.index, rerr))
			}
		}
		d.regs = map[regKey]string{}
	})
	return err
}
