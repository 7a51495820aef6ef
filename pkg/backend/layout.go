package backend

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/zk"
)

// RegisterLayoutCallback makes sure layoutPath exists and calls cb with its saved models now and
// after every change of its children. A child "model:sub_graph" comes with the deploy config at
// /{bzid}/saved_models/{model}/{sub_graph}; a child without one is logged and left out, and the
// order of the children (sorted) is kept. The binding watches of the layout's models are set up
// before cb runs, so ServiceMap follows them. cb is never called concurrently with itself.
//
// The deploy configs are followed with data watches instead of being read again at every change
// (the reference read all of them each time, so a change cost one round trip per child): cb also
// runs when the deploy config of a child changes, appears or disappears, so it always has the
// current configs (the reference passed a changed config only at the next change of the layout).
//
// One watch per path: registering a path that is already watched logs and does nothing, as in the
// reference. If the layout node is deleted, cb gets an empty layout and the watch goes on, so a
// re-created layout is followed (kazoo's ChildrenWatch stopped silently). An update whose deploy
// configs cannot be read (a ZooKeeper error other than a missing node) is not passed on, since a
// partial layout would unload models: the next change, or the next session, delivers it again.
// cb returning false stops the watch.
func (b *ZKBackend) RegisterLayoutCallback(ctx context.Context, layoutPath string, cb LayoutCallback) error {
	if cb == nil {
		return errkind.New(errkind.Value, "backend: register layout callback on %s: nil callback", layoutPath)
	}
	if err := b.client.EnsurePath(ctx, layoutPath); err != nil {
		return wrapErr("register layout callback", err)
	}
	ls := &layoutState{b: b, path: layoutPath, cb: cb, configs: map[SavedModel]*configWatch{}}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return errkind.New(errkind.Runtime, "backend: register layout callback on %s: backend is closed", layoutPath)
	}
	b.layouts[ls] = true
	b.mu.Unlock()
	e, err := b.childrenWatch(ctx, layoutPath, ls.onChildren)
	if err != nil || e == nil { // failed, or the path was watched already
		ls.shutdown()
		return wrapErr("register layout callback", err)
	}
	return nil
}

// layoutState is a watched layout: its children, the data watches of their deploy configs, and
// the runner that calls the callback one call at a time.
type layoutState struct {
	b    *ZKBackend
	path string
	cb   LayoutCallback

	mu       sync.Mutex
	entry    *watchEntry // the children watch
	children []string    // as last delivered; nil while the node is missing
	configs  map[SavedModel]*configWatch
	running  bool // an evaluation (and call of cb) is in progress
	pending  bool // the children or a config changed since the running evaluation read them
	stopped  bool
}

// configWatch is the data watch of one child's deploy config.
type configWatch struct {
	w       zk.Watch
	data    []byte
	exists  bool
	cfg     SavedModelDeployConfig // data parsed, when exists and err is nil
	err     error                  // why data does not parse
	ready   bool                   // the first call has delivered
	stopped bool
}

// onChildren is the layout's children watch function.
func (ls *layoutState) onChildren(e *watchEntry, children []string) bool {
	ls.mu.Lock()
	ls.entry = e
	ls.children = slices.Clone(children)
	ls.pending = true
	ls.mu.Unlock()
	return ls.run()
}

// onConfig is the data watch function of a child's deploy config: a change of a config the
// layout uses re-runs the callback.
func (ls *layoutState) onConfig(sm SavedModel, cw *configWatch, data []byte, st *zk.Stat) bool {
	ls.mu.Lock()
	if cw.stopped {
		ls.mu.Unlock()
		return false
	}
	exists := st != nil
	changed := cw.ready && (exists != cw.exists || !bytes.Equal(data, cw.data))
	if !cw.ready || changed {
		cw.data, cw.exists, cw.ready = bytes.Clone(data), exists, true
		cw.cfg, cw.err = SavedModelDeployConfig{}, nil
		if exists {
			// Parsed once here rather than at every change of a large layout.
			cw.cfg, cw.err = DeserializeSavedModelDeployConfig(data)
		}
	}
	rerun := changed && ls.configs[sm] == cw && !ls.stopped
	if rerun {
		ls.pending = true
	}
	ls.mu.Unlock()
	if rerun {
		ls.b.log.Info("deploy config changed", "saved_model", sm.String(), "exists", exists)
		ls.run()
	}
	return true
}

// run evaluates the layout until nothing is pending, unless another goroutine is doing so (it
// then sees the pending change). Watch functions call it without waiting on each other, so a
// callback that changes its own layout or configs cannot deadlock. It reports whether the layout
// is still watched.
func (ls *layoutState) run() bool {
	ls.mu.Lock()
	if ls.running {
		ls.mu.Unlock()
		return true
	}
	ls.running = true
	for ls.pending && !ls.stopped {
		ls.pending = false
		children := ls.children
		ls.mu.Unlock()
		keep := ls.evaluate(children)
		ls.mu.Lock()
		if !keep {
			ls.stopped = true
		}
	}
	ls.running = false
	stopped := ls.stopped
	ls.mu.Unlock()
	ls.b.signal()
	if stopped {
		ls.shutdown()
	}
	return !stopped
}

// evaluate is the reference's callback_wrap: the layout's saved models with their deploy configs,
// the service map and binding watches of their models, then the callback.
func (ls *layoutState) evaluate(children []string) bool {
	b := ls.b
	ctx, cancel := context.WithTimeout(b.ctx, b.callTimeout)
	defer cancel()
	b.log.Info("layout updated", "layout", ls.path, "children", children)
	var models []SavedModel
	for _, child := range children {
		sm, err := ParseSavedModel(child)
		if err != nil {
			b.log.Error("layout child is not model_name:sub_graph; skipped", "layout", ls.path, "child", child)
			continue
		}
		models = append(models, sm)
	}
	if err := ls.watchConfigs(ctx, models); err != nil {
		b.log.Error("reading deploy configs failed; layout update not passed on", "layout", ls.path, "err", err)
		return true
	}

	present := make(map[SavedModel]bool, len(models))
	for _, sm := range models {
		present[sm] = true
	}
	type config struct {
		cfg    SavedModelDeployConfig
		err    error
		exists bool
	}
	configs := make([]config, len(models))
	var drop []zk.Watch
	ls.mu.Lock()
	for sm, cw := range ls.configs {
		if !present[sm] {
			cw.stopped = true
			drop = append(drop, cw.w)
			delete(ls.configs, sm)
		}
	}
	stopped := ls.stopped
	for i, sm := range models {
		if cw := ls.configs[sm]; cw != nil {
			configs[i] = config{cw.cfg, cw.err, cw.exists}
		} else {
			stopped = true // shut down while the watches were being set up
		}
	}
	ls.mu.Unlock()
	for _, w := range drop {
		w.Stop()
	}
	if stopped {
		return false
	}

	entries := make([]LayoutEntry, 0, len(models))
	names := map[string]bool{}
	for i, sm := range models {
		if !configs[i].exists {
			b.log.Error("missing deploy config for saved model", "saved_model", sm.String())
			continue
		}
		if err := configs[i].err; err != nil {
			b.log.Error("bad deploy config for saved model; skipped", "saved_model", sm.String(), "err", err)
			continue
		}
		entries = append(entries, LayoutEntry{SavedModel: sm, DeployConfig: configs[i].cfg})
		names[sm.ModelName] = true
	}

	b.mu.Lock()
	if b.syncSet {
		names[b.syncMdl] = true
	}
	svc := make(ServiceMap, len(names))
	for m := range names {
		if cur, ok := b.svc[m]; ok {
			svc[m] = cur
		} else {
			svc[m] = map[string][]ContainerServiceInfo{}
		}
	}
	b.svc = svc
	b.mu.Unlock()
	sorted := make([]string, 0, len(names))
	for m := range names {
		sorted = append(sorted, m)
	}
	sort.Strings(sorted)
	for _, m := range sorted {
		if err := b.watchBindings(ctx, m); err != nil {
			b.log.Error("watching bindings failed", "model", m, "err", err)
		}
	}
	return ls.cb(entries)
}

// watchConfigs starts the data watches of the deploy configs of models that have none yet,
// concurrently; their first delivery is the current config.
func (ls *layoutState) watchConfigs(ctx context.Context, models []SavedModel) error {
	ls.mu.Lock()
	var todo []SavedModel
	for _, sm := range models {
		if _, ok := ls.configs[sm]; !ok && !slices.Contains(todo, sm) {
			todo = append(todo, sm)
		}
	}
	ls.mu.Unlock()
	errs := make([]error, len(todo)) // the first in order is returned, whichever failed first
	var g errgroup.Group
	g.SetLimit(readConcurrency)
	for i, sm := range todo {
		g.Go(func() error {
			errs[i] = ls.watchConfig(ctx, sm)
			return nil
		})
	}
	g.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (ls *layoutState) watchConfig(ctx context.Context, sm SavedModel) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	cw := &configWatch{}
	w, err := ls.b.client.DataWatch(ls.b.savedModelPath(sm), func(data []byte, st *zk.Stat, _ *zk.WatchEvent) bool {
		return ls.onConfig(sm, cw, data, st)
	})
	if err != nil {
		return fmt.Errorf("watch deploy config of %s: %w", sm, err)
	}
	ls.mu.Lock()
	if ls.stopped || !cw.ready {
		cw.stopped = true
		ls.mu.Unlock()
		w.Stop()
		if !cw.ready {
			return fmt.Errorf("watch deploy config of %s: no first delivery", sm)
		}
		return nil
	}
	cw.w = w
	ls.configs[sm] = cw
	ls.mu.Unlock()
	return nil
}

// shutdown stops the layout's watches (its children watch and config watches) and forgets it;
// it returns the stopped watches so that Close can wait for them.
func (ls *layoutState) shutdown() []zk.Watch {
	ls.mu.Lock()
	ls.stopped = true
	var ws []zk.Watch
	for sm, cw := range ls.configs {
		cw.stopped = true
		ws = append(ws, cw.w)
		delete(ls.configs, sm)
	}
	e := ls.entry
	ls.mu.Unlock()
	b := ls.b
	b.mu.Lock()
	delete(b.layouts, ls)
	var cw zk.Watch
	if e != nil {
		b.stopLocked(e)
		cw = e.w
	}
	b.mu.Unlock()
	if cw != nil {
		ws = append(ws, cw)
	}
	for _, w := range ws {
		w.Stop()
	}
	return ws
}

// busy reports whether an evaluation is running or due.
func (ls *layoutState) busy() bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.running || ls.pending
}

// configViews returns the deploy configs as the data watches last delivered them, by path.
func (ls *layoutState) configViews() map[string]configWatch {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	out := make(map[string]configWatch, len(ls.configs))
	for sm, cw := range ls.configs {
		out[ls.b.savedModelPath(sm)] = configWatch{data: cw.data, exists: cw.exists}
	}
	return out
}
