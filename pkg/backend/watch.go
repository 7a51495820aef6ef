package backend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/zk"
)

// watchBindings follows /{bzid}/binding/{model} into the service map.
func (b *ZKBackend) watchBindings(ctx context.Context, model string) error {
	_, err := b.childrenWatch(ctx, b.bindingWatchPath(model), func(e *watchEntry, children []string) bool {
		return b.onBinding(e, model, children)
	})
	return err
}

// onBinding is the binding watch's function: it records the children and evaluates them, unless
// an evaluation of the same watch is running (it then evaluates them next).
func (b *ZKBackend) onBinding(e *watchEntry, model string, children []string) bool {
	b.mu.Lock()
	e.model, e.latest, e.due = model, slices.Clone(children), true
	b.mu.Unlock()
	return b.runBinding(e)
}

// runBinding evaluates e's bindings until nothing is due, unless another goroutine is doing so. It
// reports whether the watch goes on.
func (b *ZKBackend) runBinding(e *watchEntry) bool {
	b.mu.Lock()
	if e.evaluating {
		b.mu.Unlock()
		return true
	}
	e.evaluating = true
	for e.due && !e.stopped {
		e.due = false
		model, children := e.model, e.latest
		b.mu.Unlock()
		b.evaluateBinding(e, model, children)
		b.mu.Lock()
	}
	e.evaluating = false
	stopped := e.stopped
	b.signalLocked()
	b.mu.Unlock()
	return !stopped
}

// evaluateBinding is the reference's _bind_callback: the service infos of the containers bound to
// each sub-graph of model. A model no longer followed stops the watch.
//
// A binding whose container has no service info is left out, as in the reference, but the service
// info is then watched and the bindings evaluated again when it appears: its writer may create it
// after the binding (a Python agent re-reports it only every 60 s), and the reference left the
// container out until the bindings changed again.
func (b *ZKBackend) evaluateBinding(e *watchEntry, model string, children []string) {
	b.mu.Lock()
	if _, ok := b.svc[model]; !ok {
		// Decided under the lock that guards the map, so a layout change that follows the model
		// again starts a new watch instead of finding this one still active.
		b.stopLocked(e)
		w := e.w
		b.mu.Unlock()
		if w != nil {
			w.Stop() // a re-evaluation, not the watch's own call, may be the one that stops it
		}
		b.awaitServiceInfos(model, nil)
		b.log.Info("model no longer subscribed", "model", model)
		return
	}
	b.mu.Unlock()

	ctx, cancel := context.WithTimeout(b.ctx, b.callTimeout)
	defer cancel()
	type bound struct {
		child, sub string
		container  Container
	}
	var binds []bound
	for _, child := range children {
		if sub, c, ok := b.parseBinding(model, child); ok {
			binds = append(binds, bound{child, sub, c})
		}
	}
	paths := make([]string, len(binds))
	for i, bd := range binds {
		paths[i] = b.serviceInfoPath(bd.container)
	}
	reads := b.getNodes(ctx, paths)
	binding := map[string][]ContainerServiceInfo{}
	var missing []string
	for i, bd := range binds {
		r := reads[i]
		switch {
		case r.err != nil:
			b.log.Error("reading a service info failed; binding update dropped", "model", model, "err", r.err)
			return
		case !r.ok:
			// Watched below: the bindings are evaluated again once it appears.
			b.log.Info("binding without service info yet; waiting for it", "model", model, "binding", bd.child)
			missing = append(missing, paths[i])
			continue
		}
		info, err := DeserializeContainerServiceInfo(r.data)
		if err != nil {
			b.log.Error("bad service info; skipped", "container", bd.container.String(), "err", err)
			continue
		}
		binding[bd.sub] = append(binding[bd.sub], info)
	}
	b.mu.Lock()
	if _, ok := b.svc[model]; ok {
		b.svc[model] = binding
	}
	b.mu.Unlock()
	b.awaitServiceInfos(model, missing)
}

// serviceWait is a data watch on a service info that bindings of some models name but that did
// not exist when they were read; when it appears, those models' bindings are evaluated again.
type serviceWait struct {
	path    string
	w       zk.Watch
	models  map[string]bool
	stopped bool
}

// awaitServiceInfos makes model wait for exactly the service infos at paths (none: stop waiting).
// A path no model waits for any more is no longer watched.
func (b *ZKBackend) awaitServiceInfos(model string, paths []string) {
	want := make(map[string]bool, len(paths))
	for _, p := range paths {
		want[p] = true
	}
	var stop []zk.Watch
	var start []*serviceWait
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	for p, sw := range b.waits {
		if !sw.models[model] || want[p] {
			continue
		}
		delete(sw.models, model)
		if len(sw.models) == 0 {
			sw.stopped = true
			delete(b.waits, p)
			if sw.w != nil {
				stop = append(stop, sw.w)
			}
		}
	}
	for p := range want {
		if sw := b.waits[p]; sw != nil {
			sw.models[model] = true
			continue
		}
		sw := &serviceWait{path: p, models: map[string]bool{model: true}}
		b.waits[p] = sw
		start = append(start, sw)
	}
	b.mu.Unlock()
	for _, w := range stop {
		w.Stop()
	}
	for _, sw := range start {
		b.startServiceWait(sw)
	}
}

// startServiceWait sets sw's data watch. Its first call finds the node if it appeared since the
// bindings were read.
func (b *ZKBackend) startServiceWait(sw *serviceWait) {
	w, err := b.client.DataWatch(sw.path, func(_ []byte, st *zk.Stat, _ *zk.WatchEvent) bool {
		return b.onServiceInfo(sw, st != nil)
	})
	b.mu.Lock()
	if err != nil {
		if b.waits[sw.path] == sw {
			delete(b.waits, sw.path)
		}
		sw.stopped = true
		b.mu.Unlock()
		if !errors.Is(err, zk.ErrClosed) {
			// The next change of the bindings, or the next session, evaluates them again.
			b.log.Warn("watching a missing service info failed", "path", sw.path, "err", err)
		}
		return
	}
	sw.w = w
	stop := sw.stopped || b.closed
	b.mu.Unlock()
	if stop {
		w.Stop()
	}
}

// onServiceInfo is a serviceWait's watch function: once the node exists the waiting models'
// bindings are evaluated again and the watch ends.
func (b *ZKBackend) onServiceInfo(sw *serviceWait, exists bool) bool {
	b.mu.Lock()
	if sw.stopped || b.closed {
		b.mu.Unlock()
		return false
	}
	if !exists {
		b.mu.Unlock()
		return true
	}
	sw.stopped = true
	if b.waits[sw.path] == sw {
		delete(b.waits, sw.path)
	}
	var due []*watchEntry
	for m := range sw.models {
		if e := b.watches[b.bindingWatchPath(m)]; e != nil && !e.stopped && e.model == m {
			e.due = true
			due = append(due, e)
		}
	}
	b.mu.Unlock()
	b.log.Info("a service info named by bindings appeared; evaluating them again", "path", sw.path)
	for _, e := range due {
		b.runBinding(e)
	}
	b.signal()
	return false
}

// childrenWatch is the reference's _children_watch: one active watch per path; the path is
// created first so that the watch sees its children. It returns the new watch's entry, or nil
// when the path is watched already.
func (b *ZKBackend) childrenWatch(ctx context.Context, path string, fn func(e *watchEntry, children []string) bool) (*watchEntry, error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, errkind.New(errkind.Runtime, "backend: watch %s: backend is closed", path)
	}
	if e, ok := b.watches[path]; ok && !e.stopped {
		b.mu.Unlock()
		b.log.Info("active watcher exists", "path", path)
		return nil, nil
	}
	e := &watchEntry{path: path}
	b.watches[path] = e
	b.mu.Unlock()

	fail := func(err error) (*watchEntry, error) {
		b.mu.Lock()
		b.stopLocked(e)
		b.mu.Unlock()
		return nil, err
	}
	if err := b.client.EnsurePath(ctx, path); err != nil {
		return fail(err)
	}
	w, err := b.client.ChildrenWatch(path, func(children []string, _ *zk.WatchEvent) bool {
		b.mu.Lock()
		if e.stopped {
			b.mu.Unlock()
			return false
		}
		e.running++
		b.mu.Unlock()
		keep := fn(e, children)
		b.mu.Lock()
		e.running--
		e.seen, e.missing, e.delivered = true, children == nil, slices.Clone(children)
		if !keep {
			b.stopLocked(e)
		}
		b.signalLocked()
		b.mu.Unlock()
		return keep
	})
	if err != nil {
		return fail(err)
	}
	b.mu.Lock()
	e.w = w
	closed := b.closed
	b.mu.Unlock()
	if closed { // Close ran meanwhile and could not stop it
		w.Stop()
	}
	b.log.Info("registered new watcher", "path", path)
	return e, nil
}

// signal wakes Settle: a callback has ended.
func (b *ZKBackend) signal() {
	b.mu.Lock()
	b.signalLocked()
	b.mu.Unlock()
}

func (b *ZKBackend) signalLocked() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// stopLocked marks e stopped and forgets it, so the path can be watched again.
func (b *ZKBackend) stopLocked(e *watchEntry) {
	e.stopped = true
	if b.watches[e.path] == e {
		delete(b.watches, e.path)
	}
}

// settlePoll is how often Settle looks again while a change is on its way to a watch.
const settlePoll = 2 * time.Millisecond

// Settle waits until every watch of the backend has delivered the state its node has now (the
// children of layouts and bindings, the deploy configs of layout children) and no callback is
// running or due. Changes made before the call, by any client, have then reached the layout
// callbacks and the service map. Each round reads every watched node; ctx bounds the wait.
func (b *ZKBackend) Settle(ctx context.Context) error {
	for {
		done, wake, err := b.settled(ctx)
		if err != nil {
			return fmt.Errorf("backend: settle: %w", err)
		}
		if done {
			return nil
		}
		t := time.NewTimer(settlePoll)
		select {
		case <-wake:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("backend: settle: %w", ctx.Err())
		}
		t.Stop()
	}
}

func (b *ZKBackend) settled(ctx context.Context) (bool, <-chan struct{}, error) {
	type view struct {
		path      string
		missing   bool
		delivered []string
	}
	b.mu.Lock()
	wake := b.changed
	layouts := make([]*layoutState, 0, len(b.layouts))
	for ls := range b.layouts {
		layouts = append(layouts, ls)
	}
	var views []view
	for _, e := range b.watches {
		if e.stopped {
			continue
		}
		if e.running > 0 || !e.seen || e.evaluating || e.due {
			b.mu.Unlock()
			return false, wake, nil
		}
		views = append(views, view{e.path, e.missing, e.delivered})
	}
	waits := make([]string, 0, len(b.waits))
	for p := range b.waits {
		waits = append(waits, p)
	}
	b.mu.Unlock()
	for _, p := range waits {
		// A service info waited for exists: its watch is about to evaluate the bindings again.
		st, err := b.client.Exists(ctx, p)
		if err != nil {
			return false, wake, err
		}
		if st != nil {
			return false, wake, nil
		}
	}
	for _, v := range views {
		kids, err := b.client.Children(ctx, v.path)
		missing := errors.Is(err, zk.ErrNoNode)
		if err != nil && !missing {
			return false, wake, err
		}
		if missing != v.missing || !slices.Equal(kids, v.delivered) {
			return false, wake, nil
		}
	}
	for _, ls := range layouts {
		if ls.busy() {
			return false, wake, nil
		}
		for path, cw := range ls.configViews() {
			data, _, err := b.client.Get(ctx, path)
			missing := errors.Is(err, zk.ErrNoNode)
			if err != nil && !missing {
				return false, wake, err
			}
			if missing == cw.exists || (!missing && !bytes.Equal(data, cw.data)) {
				return false, wake, nil
			}
		}
	}
	return true, wake, nil
}
