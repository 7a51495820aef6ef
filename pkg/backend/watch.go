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

// onBinding is the reference's _bind_callback: the service infos of the containers bound to each
// sub-graph of model. A model no longer followed stops the watch.
func (b *ZKBackend) onBinding(e *watchEntry, model string, children []string) bool {
	b.mu.Lock()
	if _, ok := b.svc[model]; !ok {
		// Decided under the lock that guards the map, so a layout change that follows the model
		// again starts a new watch instead of finding this one still active.
		b.stopLocked(e)
		b.mu.Unlock()
		b.log.Info(fmt.Sprintf("model %s no longer subscribed.", model))
		return false
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
	for i, bd := range binds {
		r := reads[i]
		switch {
		case r.err != nil:
			b.log.Error("reading a service info failed; binding update dropped", "model", model, "err", r.err)
			return true
		case !r.ok:
			b.log.Error(fmt.Sprintf("no serivice info of %s", bd.child))
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
	return true
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
		b.log.Info(fmt.Sprintf("active watcher exists on path %s", path))
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
	b.log.Info(fmt.Sprintf("registered new watcher on %s", path))
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
		if e.running > 0 || !e.seen {
			b.mu.Unlock()
			return false, wake, nil
		}
		views = append(views, view{e.path, e.missing, e.delivered})
	}
	b.mu.Unlock()
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
