package backend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkreal"
)

// DefaultCallTimeout bounds each ZooKeeper call the backend makes on its own (from watches, the
// restore after a session expiry, Close), where no caller's context applies.
const DefaultCallTimeout = 10 * time.Second

// Config configures a ZKBackend.
type Config struct {
	// Bzid is the namespace: every node lives under /{Bzid}.
	Bzid string
	// CallTimeout bounds the backend's own ZooKeeper calls (DefaultCallTimeout when zero).
	CallTimeout time.Duration
	// Logger receives the backend's log (slog.Default() when nil).
	Logger *slog.Logger
}

// ephemeralRegistrar is implemented by clients that re-create registered ephemeral nodes on every
// new session themselves and give them to the current session when a stale one holds them
// (zkreal.Client). The backend uses it for its bindings and service infos when available.
type ephemeralRegistrar interface {
	RegisterEphemeral(ctx context.Context, path string, data []byte) error
	Unregister(ctx context.Context, path string) error
}

// ZKBackend keeps an agent's, a controller's or a sync client's view of ZooKeeper (the
// reference's ZKBackend, which is all three backends at once). Nodes, under /{bzid}:
//
//	saved_models/{model}/{sub_graph}                    persistent, SavedModelDeployConfig JSON
//	layouts/.../{layout}/{model}:{sub_graph}            persistent, empty
//	binding/{model}/{sub_graph}:{cluster}:{id}          ephemeral, empty
//	container_service/{cluster}:{id}                    ephemeral, ContainerServiceInfo JSON
//
// All methods are safe for concurrent use. Watch callbacks run without any lock of the backend
// held, so a layout callback may call the backend (except Close, which waits for the callbacks).
//
// After a session expiry the backend restores its bindings and service infos as soon as the new
// session is up, and its watches deliver the current state again (the reference restarted the
// client and re-created the bindings only at the next SyncAvailableSavedModels that changed the
// model set).
type ZKBackend struct {
	bzid        string
	client      zk.Client
	registrar   ephemeralRegistrar // nil when the client does not own ephemeral nodes itself
	ownsClient  bool
	log         *slog.Logger
	callTimeout time.Duration

	ctx       context.Context // ends on Close
	cancel    context.CancelFunc
	unlisten  func()
	restoreCh chan struct{} // a new session after LOST: restore the ephemeral nodes
	wg        sync.WaitGroup

	// writeMu serializes the writers of ephemeral nodes (SyncAvailableSavedModels,
	// ReportServiceInfo, the restore), so their view of what exists stays exact. Watch callbacks
	// never take it, so a write may trigger them synchronously (zkfake) while holding it.
	writeMu sync.Mutex

	mu      sync.Mutex
	closed  bool
	lost    bool                    // the session expired and no new one is announced yet
	desired map[SavedModel]bool     // the models of the last SyncAvailableSavedModels
	bound   map[SavedModel]bool     // the bindings this session has (cleared on LOST)
	boundTo Container               // the container of the last SyncAvailableSavedModels
	infos   map[Container][]byte    // service infos reported, serialized, for the restore
	svc     ServiceMap              // model -> sub-graph -> service infos
	watches map[string]*watchEntry  // by path: the active watches
	waits   map[string]*serviceWait // by path: service infos named by bindings but missing
	layouts map[*layoutState]bool   // the watched layouts
	syncSet bool                    // SubscribeModel was called
	syncMdl string                  // its model
	changed chan struct{}           // closed and replaced when a watch callback ends (Settle)
}

// watchEntry is a children watch of the backend and what its callback last saw.
type watchEntry struct {
	path      string
	w         zk.Watch
	stopped   bool
	running   int
	seen      bool     // a callback has run to its end
	missing   bool     // the node did not exist at the last callback
	delivered []string // the children at the last callback

	// A binding watch's evaluations run one at a time, whether the watch's own calls or the
	// re-evaluations asked for when a missing service info appears (see runBinding).
	model      string   // the model whose bindings these are
	latest     []string // the children last delivered, for re-evaluations
	evaluating bool     // an evaluation is running
	due        bool     // the children or a named service info changed since it read them
}

// New builds a backend on an open client, which stays the caller's: Close leaves it open (and
// deletes the backend's ephemeral nodes).
func New(client zk.Client, cfg Config) (*ZKBackend, error) {
	if client == nil {
		return nil, errkind.New(errkind.Value, "backend: no ZooKeeper client")
	}
	if cfg.Bzid == "" {
		return nil, errkind.New(errkind.Value, "backend: empty bzid")
	}
	if strings.Contains(cfg.Bzid, "/") {
		return nil, errkind.New(errkind.Value, "backend: bzid %q: must not contain /", cfg.Bzid)
	}
	if err := zk.ValidatePath("/" + cfg.Bzid); err != nil {
		return nil, errkind.New(errkind.Value, "backend: bzid %q: %w", cfg.Bzid, err)
	}
	if cfg.CallTimeout < 0 {
		return nil, errkind.New(errkind.Value, "backend: negative CallTimeout %v", cfg.CallTimeout)
	}
	if cfg.CallTimeout == 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	b := &ZKBackend{
		bzid: cfg.Bzid, client: client, log: cfg.Logger.With("component", "backend", "bzid", cfg.Bzid),
		callTimeout: cfg.CallTimeout, restoreCh: make(chan struct{}, 1),
		desired: map[SavedModel]bool{}, bound: map[SavedModel]bool{}, infos: map[Container][]byte{},
		svc: ServiceMap{}, watches: map[string]*watchEntry{}, waits: map[string]*serviceWait{}, layouts: map[*layoutState]bool{},
		changed: make(chan struct{}),
	}
	if r, ok := client.(ephemeralRegistrar); ok {
		b.registrar = r
	}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	b.unlisten = client.AddListener(b.onState)
	b.wg.Add(1)
	go b.restoreLoop()
	return b, nil
}

// Open connects to ZooKeeper (opts.Servers) and builds a backend that owns the session: Close
// ends it. This is the reference's ZKBackend(bzid, zk_servers) followed by start().
func Open(ctx context.Context, cfg Config, opts zkreal.Options) (*ZKBackend, error) {
	if opts.Logger == nil {
		opts.Logger = cfg.Logger
	}
	c, err := zkreal.Connect(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("backend: %w", err)
	}
	b, err := New(c, cfg)
	if err != nil {
		c.Close()
		return nil, err
	}
	b.ownsClient = true
	return b, nil
}

// Client returns the backend's ZooKeeper client.
func (b *ZKBackend) Client() zk.Client { return b.client }

// Close stops the watches and the restore, and waits for running callbacks; it must not be
// called from a layout callback. When the backend owns its session, the session ends (and its
// ephemeral nodes with it); otherwise the backend deletes its bindings and service infos itself
// (the session outlives the backend). Closing again does nothing.
func (b *ZKBackend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	var ws []zk.Watch
	for _, e := range b.watches {
		if e.w != nil {
			ws = append(ws, e.w)
		}
	}
	b.watches = map[string]*watchEntry{}
	for _, sw := range b.waits {
		sw.stopped = true
		if sw.w != nil {
			ws = append(ws, sw.w)
		}
	}
	b.waits = map[string]*serviceWait{}
	layouts := make([]*layoutState, 0, len(b.layouts))
	for ls := range b.layouts {
		layouts = append(layouts, ls)
	}
	b.mu.Unlock()

	b.unlisten()
	for _, w := range ws {
		w.Stop()
	}
	for _, ls := range layouts {
		ws = append(ws, ls.shutdown()...)
	}
	b.cancel() // ends calls made from callbacks and the restore
	if b.ownsClient {
		// Ending the session first also ends watch registrations that wait for a connection
		// (they take no context), so the callbacks below finish at once.
		err := b.client.Close()
		b.waitWatches(ws)
		b.wg.Wait()
		return err
	}
	b.waitWatches(ws)
	b.wg.Wait()
	return b.dropEphemerals()
}

// waitWatches waits for the stopped watches' last callbacks, for at most the call timeout: on a
// shared client that has lost its connection, a callback can be stuck registering a watch until
// the client reconnects or is closed, which the backend cannot hasten.
func (b *ZKBackend) waitWatches(ws []zk.Watch) {
	t := time.NewTimer(b.callTimeout)
	defer t.Stop()
	for _, w := range ws {
		select {
		case <-w.Done():
		case <-t.C:
			b.log.Warn("close: a watch callback is still waiting for ZooKeeper; it ends when the client reconnects or closes")
			return
		}
	}
}

// dropEphemerals deletes the bindings and service infos of the backend, on a client it does not
// own (whose session outlives the backend).
func (b *ZKBackend) dropEphemerals() error {
	b.writeMu.Lock()
	defer b.writeMu.Unlock()
	b.mu.Lock()
	var paths []string
	for sm := range b.bound {
		paths = append(paths, b.bindingPath(sm, b.boundTo))
	}
	for c := range b.infos {
		paths = append(paths, b.serviceInfoPath(c))
	}
	b.bound, b.desired, b.infos = map[SavedModel]bool{}, map[SavedModel]bool{}, map[Container][]byte{}
	b.mu.Unlock()
	sort.Strings(paths)
	ctx, cancel := context.WithTimeout(context.Background(), b.callTimeout)
	defer cancel()
	var errs []error
	for _, p := range paths {
		if err := b.deleteEphemeral(ctx, p); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("backend: close: %w", err)
	}
	return nil
}

// onState is the client's connection listener. It must not block (it runs on the client's event
// path), so the restore runs in its own goroutine.
func (b *ZKBackend) onState(s zk.State) {
	b.mu.Lock()
	wasLost := b.lost
	switch s {
	case zk.StateLost:
		b.lost = true
		// The session's ephemeral nodes are gone.
		b.bound = map[SavedModel]bool{}
	case zk.StateConnected:
		b.lost = false
	}
	b.mu.Unlock()
	switch {
	case s == zk.StateLost:
		b.log.Error("zk state lost, set lost flag")
	case s == zk.StateConnected && wasLost:
		b.log.Warn("zk state changed to CONNECTED on a new session, unset lost flag and restore bindings and service info")
		select {
		case b.restoreCh <- struct{}{}:
		default: // a restore is already pending
		}
	default:
		b.log.Warn("zookeeper state changed", "state", s.String())
	}
}

// restoreLoop re-creates the ephemeral nodes after each new session, retrying with backoff until
// it succeeds, the session is replaced again or the backend closes.
func (b *ZKBackend) restoreLoop() {
	defer b.wg.Done()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-b.restoreCh:
		}
		delay := 100 * time.Millisecond
		for !b.restore() {
			t := time.NewTimer(delay)
			select {
			case <-b.ctx.Done():
				t.Stop()
				return
			case <-b.restoreCh: // a newer session: restore on it at once
			case <-t.C:
			}
			t.Stop()
			delay = min(2*delay, 5*time.Second)
		}
	}
}

// restore re-creates every reported service info and the bindings of the last synced models; it
// reports whether all succeeded.
func (b *ZKBackend) restore() bool {
	b.writeMu.Lock()
	defer b.writeMu.Unlock()
	ctx, cancel := context.WithTimeout(b.ctx, b.callTimeout)
	defer cancel()
	b.mu.Lock()
	if b.lost || b.closed {
		b.mu.Unlock()
		return true // the next CONNECTED restores
	}
	infos := make(map[Container][]byte, len(b.infos))
	for c, d := range b.infos {
		infos[c] = d
	}
	var todo []SavedModel
	for sm := range b.desired {
		if !b.bound[sm] {
			todo = append(todo, sm)
		}
	}
	container := b.boundTo
	b.mu.Unlock()

	ok := true
	for _, c := range sortedContainers(infos) {
		if err := b.restoreEphemeral(ctx, b.serviceInfoPath(c), infos[c]); err != nil {
			b.log.Error("restoring service info failed", "container", c.String(), "err", err)
			ok = false
		}
	}
	sortSavedModels(todo)
	for _, sm := range todo {
		if err := b.restoreEphemeral(ctx, b.bindingPath(sm, container), nil); err != nil {
			b.log.Error("restoring binding failed", "saved_model", sm.String(), "err", err)
			ok = false
			continue
		}
		b.mu.Lock()
		if b.desired[sm] && b.boundTo == container && !b.lost {
			b.bound[sm] = true
		}
		b.mu.Unlock()
	}
	if ok {
		b.log.Info("restored bindings and service info on the new session", "bindings", len(todo), "service_infos", len(infos))
	}
	return ok
}

// restoreEphemeral re-creates an ephemeral node on a new session. A registrar client has done so
// already before announcing the session, so only a missing node is registered again.
func (b *ZKBackend) restoreEphemeral(ctx context.Context, path string, data []byte) error {
	if b.registrar != nil {
		st, err := b.client.Exists(ctx, path)
		if err != nil {
			return err
		}
		if st != nil {
			return nil
		}
	}
	return b.putEphemeral(ctx, path, data)
}

// putEphemeral creates (or updates) an ephemeral node of this session, with its parents. On a
// plain client an existing node gets the data set, as the reference's create_znode does.
func (b *ZKBackend) putEphemeral(ctx context.Context, path string, data []byte) error {
	if b.registrar != nil {
		return b.registrar.RegisterEphemeral(ctx, path, data)
	}
	return b.createOrSet(ctx, path, data, true)
}

// createOrSet is the reference's create_znode: create with parents; an existing node gets the data
// set (retried on connection loss).
func (b *ZKBackend) createOrSet(ctx context.Context, path string, data []byte, ephemeral bool) error {
	_, err := b.client.Create(ctx, path, data, zk.CreateOptions{Ephemeral: ephemeral, MakePath: true})
	if err == nil || !errors.Is(err, zk.ErrNodeExists) {
		return err
	}
	return zk.Retry(ctx, zk.DefaultRetryPolicy, func(ctx context.Context) error {
		_, err := b.client.Set(ctx, path, data, zk.AnyVersion)
		return err
	})
}

// deleteEphemeral deletes an ephemeral node of this session; a missing node is not an error.
func (b *ZKBackend) deleteEphemeral(ctx context.Context, path string) error {
	if b.registrar != nil {
		return b.registrar.Unregister(ctx, path)
	}
	err := b.client.Delete(ctx, path, zk.DeleteOptions{})
	if errors.Is(err, zk.ErrNoNode) {
		b.log.Info("node to delete is already gone", "path", path)
		return nil
	}
	return err
}

// getNode returns a node's data, or ok false when it does not exist (the reference's get_znode).
func (b *ZKBackend) getNode(ctx context.Context, path string) (data []byte, ok bool, err error) {
	data, _, err = b.client.Get(ctx, path)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return data, true, nil
}

// readConcurrency bounds the reads a callback has in flight: a layout of hundreds of saved models
// is read in a few round trips instead of one per child.
const readConcurrency = 32

// nodeRead is the outcome of one read of getNodes.
type nodeRead struct {
	data []byte
	ok   bool
	err  error
}

// getNodes reads paths concurrently and returns the outcomes in order.
func (b *ZKBackend) getNodes(ctx context.Context, paths []string) []nodeRead {
	out := make([]nodeRead, len(paths))
	if len(paths) == 1 {
		d, ok, err := b.getNode(ctx, paths[0])
		out[0] = nodeRead{d, ok, err}
		return out
	}
	var g errgroup.Group
	g.SetLimit(readConcurrency)
	for i, p := range paths {
		g.Go(func() error {
			d, ok, err := b.getNode(ctx, p)
			out[i] = nodeRead{d, ok, err}
			return nil
		})
	}
	g.Wait()
	return out
}

func (b *ZKBackend) bindingPath(sm SavedModel, c Container) string {
	return "/" + b.bzid + "/binding/" + sm.ModelName + "/" + sm.SubGraph + ":" + c.String()
}

// parseBinding reads a binding node name "sub_graph:cluster:id[:...]" of model as the reference
// does (split(":")); a name with fewer fields is logged and not ok.
func (b *ZKBackend) parseBinding(model, name string) (subGraph string, c Container, ok bool) {
	parts := strings.Split(name, ":")
	if len(parts) < 3 {
		b.log.Error("binding is not sub_graph:cluster:id; skipped", "model", model, "child", name)
		return "", Container{}, false
	}
	return parts[0], Container{Cluster: parts[1], ID: parts[2]}, true
}

func (b *ZKBackend) bindingWatchPath(model string) string {
	return "/" + b.bzid + "/binding/" + model
}

func (b *ZKBackend) serviceInfoPath(c Container) string {
	return "/" + b.bzid + "/container_service/" + c.String()
}

func (b *ZKBackend) savedModelPath(sm SavedModel) string {
	return "/" + b.bzid + "/saved_models/" + sm.ModelName + "/" + sm.SubGraph
}

func sortSavedModels(s []SavedModel) {
	sort.Slice(s, func(i, j int) bool { return s[i].String() < s[j].String() })
}

func sortedContainers(m map[Container][]byte) []Container {
	out := make([]Container, 0, len(m))
	for c := range m {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}
