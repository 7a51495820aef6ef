package zkmirror

import (
	"context"
	"fmt"
	"slices"

	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/zk"
)

// A data watch's call is a "first" one (the node's state, not a change) when it is the call made
// at registration (nil event) or a real client's resync after a new session (EventNone: kazoo
// calls its DataWatch functions with event None again on reconnection).
func isFirst(ev *zk.WatchEvent) bool { return ev == nil || ev.Type == zk.EventNone }

func is(ev *zk.WatchEvent, t zk.EventType) bool { return ev != nil && ev.Type == t }

// begin records that the Watch* call kind was made; false when it was made before (the reference
// set the watches again, doubling every event) or the mirror has stopped.
func (m *Mirror) begin(kind string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return false, ErrStopped
	}
	if m.started[kind] {
		return false, nil
	}
	m.started[kind] = true
	return true, nil
}

// abandon forgets a Watch* call that failed, so it can be made again.
func (m *Mirror) abandon(kind string, err *error) {
	if *err != nil {
		m.mu.Lock()
		delete(m.started, kind)
		m.mu.Unlock()
	}
}

// claim marks path as watched by kind and reports whether it was not yet (sets dedupe children
// reported again, as the reference's models/publishs/instances/children_set do).
func (m *Mirror) claim(kind, path string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := kind + ":" + path
	if m.stopped || m.seen[key] {
		return false
	}
	m.seen[key] = true
	return true
}

// unclaim forgets path after its watch could not be set, so a later children call retries it.
func (m *Mirror) unclaim(kind, path string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.seen, kind+":"+path)
}

// keep records a watch for Stop, or stops it when the mirror stopped meanwhile.
func (m *Mirror) keep(w zk.Watch) {
	m.mu.Lock()
	stopped := m.stopped
	if !stopped {
		m.watches = append(m.watches, w)
	}
	m.mu.Unlock()
	if stopped {
		w.Stop()
	}
}

func (m *Mirror) running() bool { return m.ctx.Err() == nil }

// dataWatch sets a data watch on path once (see claim) and keeps it; false when it could not.
func (m *Mirror) dataWatch(path string, fn zk.DataWatchFunc) bool {
	if !m.claim("data", path) {
		return true
	}
	m.log.Debug("watch node data", "path", path)
	w, err := m.zk.DataWatch(path, func(data []byte, st *zk.Stat, ev *zk.WatchEvent) bool {
		return m.running() && fn(data, st, ev)
	})
	if err != nil {
		m.unclaim("data", path)
		m.log.Warn("cannot watch node data", "path", path, "err", err)
		return false
	}
	m.keep(w)
	return true
}

// childrenWatch sets a children watch on path, calling child once for each child name (again
// on a later call when it reported false). The names already handled are this watch's own: its
// calls never overlap, so no lock is needed (the reference's models/publishs/instances sets).
func (m *Mirror) childrenWatch(path string, child func(name string) bool) error {
	known := map[string]bool{}
	w, err := m.zk.ChildrenWatch(path, func(children []string, _ *zk.WatchEvent) bool {
		if !m.running() {
			return false
		}
		for _, c := range children {
			if !known[c] && child(c) {
				known[c] = true
			}
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("zkmirror: watch children of %s: %w", path, err)
	}
	m.keep(w)
	return nil
}

// WatchPortal first deletes the publishes of models that are not in the portal any more (all of
// them when the portal is empty), then queues a PORTAL event (the model node's path and its
// ModelMeta with an action) for every model node: NONE when it is first seen (at the start or
// when it appears), DELETED when it goes, CREATED when it comes back. Data changes give no event.
func (m *Mirror) WatchPortal(ctx context.Context) (err error) {
	first, err := m.begin("portal")
	if err != nil || !first {
		return err
	}
	defer m.abandon("portal", &err)
	for _, p := range []string{m.portalPath, m.publishPath} {
		if err := m.EnsurePath(ctx, p); err != nil {
			return err
		}
	}
	if err := m.dropOrphanPublishes(ctx); err != nil {
		return err
	}
	m.log.Info("add children watch in portal")
	return m.childrenWatch(m.portalPath, func(model string) bool {
		path := zk.Join(m.portalPath, model)
		return m.dataWatch(path, func(data []byte, st *zk.Stat, ev *zk.WatchEvent) bool {
			m.portalChanged(path, model, data, st, ev)
			return true
		})
	})
}

// dropOrphanPublishes is the reference's portal/publish consistency check.
func (m *Mirror) dropOrphanPublishes(ctx context.Context) error {
	ctx, cancel := m.opCtx(ctx)
	defer cancel()
	inPortal, err := m.zk.Children(ctx, m.portalPath)
	if err != nil {
		return fmt.Errorf("zkmirror: list %s: %w", m.portalPath, err)
	}
	publishes, err := m.zk.Children(ctx, m.publishPath)
	if err != nil {
		return fmt.Errorf("zkmirror: list %s: %w", m.publishPath, err)
	}
	for _, key := range publishes {
		model := publishModel(key)
		if slices.Contains(inPortal, model) {
			continue
		}
		m.log.Info("delete the publish of a model not in the portal", "publish", key, "model", model)
		if err := m.Delete(ctx, zk.Join(m.publishPath, key), true); err != nil {
			return err
		}
	}
	return nil
}

// portalChanged queues the PORTAL event of one model node's call.
func (m *Mirror) portalChanged(path, model string, data []byte, st *zk.Stat, ev *zk.WatchEvent) {
	var action string
	switch {
	case isFirst(ev) && st == nil:
		action = zk.EventDeleted.String() // gone at the start (or while the session was lost)
	case isFirst(ev):
		action = zk.EventNone.String()
	case is(ev, zk.EventCreated), is(ev, zk.EventDeleted):
		action = ev.Type.String()
	default:
		return // CHANGED: the reference ignores data changes of a portal node
	}
	mm := datadef.NewModelMeta()
	if len(data) > 0 {
		var err error
		if mm, err = datadef.DeserializeModelMeta(data); err != nil {
			m.log.Warn("portal: bad ModelMeta, event dropped", "path", path, "err", err)
			return
		}
	} else {
		mm.ModelName = &model
	}
	mm.Action = action
	m.mu.Lock()
	defer m.mu.Unlock()
	m.queue.Put(datadef.Event{Path: &path, Data: mm.Serialize(), EType: datadef.EventPortal})
}

// WatchPublish mirrors the LOAD publishes, and queues a PUBLISH event (the publish's path, the
// mirrored value of the publish it names, else the value seen) when a model's mirrored publishes
// reach its total_publish_num (load) or none is left (unload).
func (m *Mirror) WatchPublish(ctx context.Context) (err error) {
	first, err := m.begin("publish")
	if err != nil || !first {
		return err
	}
	defer m.abandon("publish", &err)
	if err := m.EnsurePath(ctx, m.publishPath); err != nil {
		return err
	}
	return m.childrenWatch(m.publishPath, func(name string) bool {
		path := zk.Join(m.publishPath, name)
		return m.dataWatch(path, func(data []byte, st *zk.Stat, ev *zk.WatchEvent) bool {
			m.publishChanged(path, data, st, ev)
			return true
		})
	})
}

func (m *Mirror) publishChanged(path string, data []byte, st *zk.Stat, ev *zk.WatchEvent) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(data) == 0 {
		data, _ = m.data.get(path) // a real client gives no data on DELETED: use the mirrored one
	}
	if len(data) == 0 {
		m.log.Info("watch_publish: no data", "path", path, "event", ev)
		return
	}
	pm, err := datadef.DeserializePublishMeta(data)
	if err != nil {
		m.log.Warn("watch_publish: bad PublishMeta, ignored", "path", path, "err", err)
		return
	}
	switch {
	case is(ev, zk.EventDeleted), isFirst(ev) && st == nil:
		m.delData(path)
	case isFirst(ev), is(ev, zk.EventCreated):
		if pm.PType == datadef.PublishLoad {
			m.setData(path, data, decoded[datadef.PublishMeta]{v: pm})
		} else {
			if _, mirrored := m.data.get(path); !mirrored {
				// Nothing loaded to unload: no event (the reference's del raised KeyError here,
				// ending the callback before its count).
				return
			}
			m.delData(path)
		}
	default:
		// CHANGED: the mirror keeps the value it had (the reference does so too), but the count
		// is checked again below.
	}
	model := ""
	if pm.ModelName != nil {
		model = *pm.ModelName
	}
	cnt := m.publishCounts[model]
	if cnt != 0 && cnt != pm.TotalPublishNum {
		return
	}
	what := "load"
	if cnt == 0 {
		what = "unload"
	}
	m.log.Info("all the publishes of a model arrived, sending an event", "model", model, "to", what)
	value := data
	if d, ok := m.data.get(pm.Path(m.publishPath)); ok {
		value = d
	}
	m.queue.Put(datadef.Event{Path: &path, Data: value, EType: datadef.EventPublish})
}

// WatchResource mirrors /{bzid}/resource/* (ResourceSpecs). The resource node need not exist:
// its children are mirrored once it does (kazoo gave up on a missing node, so the reference
// mirrored nothing on a real ZooKeeper when watch_resource ran before the first report).
func (m *Mirror) WatchResource(ctx context.Context) (err error) {
	first, err := m.begin("resource")
	if err != nil || !first {
		return err
	}
	defer m.abandon("resource", &err)
	return m.childrenWatch(m.resourcePath, func(name string) bool {
		path := zk.Join(m.resourcePath, name)
		return m.dataWatch(path, m.mirrorNode(path, decodeResource))
	})
}

// WatchService mirrors /{bzid}/service/{model}/{server_type}:{task}/{replica} (ReplicaMetas).
func (m *Mirror) WatchService(ctx context.Context) (err error) {
	first, err := m.begin("service")
	if err != nil || !first {
		return err
	}
	defer m.abandon("service", &err)
	if err := m.EnsurePath(ctx, m.servicePath); err != nil {
		return err
	}
	return m.childrenWatch(m.servicePath, func(model string) bool {
		return m.treeLevel(zk.Join(m.servicePath, model), func(taskPath string) bool {
			return m.treeLevel(taskPath, func(replicaPath string) bool {
				return m.dataWatch(replicaPath, m.mirrorNode(replicaPath, decodeReplica))
			})
		})
	})
}

// treeLevel sets a children watch on path once, calling child for every child's path; false when
// the watch could not be set.
func (m *Mirror) treeLevel(path string, child func(childPath string) bool) bool {
	if !m.claim("children", path) {
		return true
	}
	m.log.Debug("watch children", "path", path)
	err := m.childrenWatch(path, func(name string) bool { return child(zk.Join(path, name)) })
	if err != nil {
		m.unclaim("children", path)
		m.log.Warn("cannot watch children", "path", path, "err", err)
		return false
	}
	return true
}

// mirrorNode keeps path's value (and its decoded form) in the mirror while the node exists.
func (m *Mirror) mirrorNode(path string, decode func([]byte) any) zk.DataWatchFunc {
	return func(data []byte, st *zk.Stat, ev *zk.WatchEvent) bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		switch {
		case is(ev, zk.EventDeleted), isFirst(ev) && st == nil:
			m.delData(path)
		case isFirst(ev), is(ev, zk.EventCreated), is(ev, zk.EventChanged):
			if data == nil {
				data = []byte{}
			}
			m.setData(path, data, decode(data))
		}
		return true
	}
}
