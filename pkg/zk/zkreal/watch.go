package zkreal

import (
	"errors"
	"sort"
	"sync"

	gozk "github.com/go-zookeeper/zk"

	"github.com/monolith-go/monolith/pkg/zk"
)

// watch is a running DataWatch or ChildrenWatch: one goroutine that re-arms the library's one-shot
// watch after every event, and after a new session.
type watch struct {
	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
}

func newWatch() *watch { return &watch{stop: make(chan struct{}), done: make(chan struct{})} }

// Stop implements zk.Watch.
func (w *watch) Stop() { w.stopOnce.Do(func() { close(w.stop) }) }

// Done implements zk.Watch.
func (w *watch) Done() <-chan struct{} { return w.done }

// armFunc reads the state and sets a library watch; ok false with a nil error means the watch
// must stop (client closed).
type armFunc func() (deliver func(ev *zk.WatchEvent) bool, ch <-chan gozk.Event, err error)

// run delivers the first state synchronously (kazoo calls the function before DataWatch returns),
// then waits for events in a goroutine.
func (c *Client) runWatch(path string, arm armFunc) (zk.Watch, error) {
	w := newWatch()
	deliver, ch, err := c.armRetrying(arm, w.stop)
	if err != nil {
		close(w.done)
		return nil, mapErr("watch", path, err, false)
	}
	if !deliver(nil) {
		w.Stop()
		close(w.done)
		return w, nil
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer close(w.done)
		for {
			var ev *zk.WatchEvent
			select {
			case <-w.stop:
				return
			case <-c.closing:
				return
			case e, ok := <-ch:
				if !ok {
					return
				}
				ev = c.watchEvent(path, e, w.stop)
				if ev == nil {
					return
				}
			}
			var err error
			deliver, ch, err = c.armRetrying(arm, w.stop)
			if err != nil {
				return
			}
			if !deliver(ev) {
				w.Stop()
				return
			}
		}
	}()
	return w, nil
}

// watchEvent maps a library watch event. After a session expiry (the library drops every watch)
// it waits for the new session and reports EventNone so the caller gets the current state once.
// nil means stop.
func (c *Client) watchEvent(path string, e gozk.Event, stop <-chan struct{}) *zk.WatchEvent {
	switch e.Type {
	case gozk.EventNodeCreated:
		return &zk.WatchEvent{Type: zk.EventCreated, Path: path}
	case gozk.EventNodeDeleted:
		return &zk.WatchEvent{Type: zk.EventDeleted, Path: path}
	case gozk.EventNodeDataChanged:
		return &zk.WatchEvent{Type: zk.EventChanged, Path: path}
	case gozk.EventNodeChildrenChanged:
		return &zk.WatchEvent{Type: zk.EventChild, Path: path}
	case gozk.EventNotWatching:
		if errors.Is(e.Err, gozk.ErrClosing) || c.isClosed() {
			return nil
		}
		gen := c.generation()
		if c.State() == zk.StateConnected && !errors.Is(e.Err, gozk.ErrSessionExpired) {
			gen-- // dropped on a live session (should not happen): just re-arm
		}
		if !c.waitNewSession(gen, stop) {
			return nil
		}
		return &zk.WatchEvent{Type: zk.EventNone, Path: path}
	}
	return &zk.WatchEvent{Type: zk.EventNone, Path: path}
}

// armRetrying arms the watch, waiting out connection loss until it succeeds, the watch stops or
// the client closes.
func (c *Client) armRetrying(arm armFunc, stop <-chan struct{}) (func(*zk.WatchEvent) bool, <-chan gozk.Event, error) {
	for {
		deliver, ch, err := arm()
		if err == nil {
			return deliver, ch, nil
		}
		if c.isClosed() || errors.Is(err, gozk.ErrClosing) {
			return nil, nil, gozk.ErrClosing
		}
		if !isConnLoss(err) && !errors.Is(err, gozk.ErrSessionExpired) {
			return nil, nil, err
		}
		// Wait for the connection (or a new session) before trying again.
		c.mu.Lock()
		changed := c.genCh
		c.mu.Unlock()
		if c.State() != zk.StateConnected {
			select {
			case <-changed:
			case <-stop:
				return nil, nil, errStopped
			case <-c.closing:
				return nil, nil, gozk.ErrClosing
			}
		}
	}
}

// DataWatch implements zk.Client.
func (c *Client) DataWatch(path string, fn zk.DataWatchFunc) (zk.Watch, error) {
	if err := zk.ValidatePath(path); err != nil {
		return nil, &zk.PathError{Op: "data_watch", Path: path, Err: err}
	}
	full := c.full(path)
	var mu sync.Mutex // serializes calls of fn (first call vs. the goroutine's)
	return c.runWatch(path, func() (func(*zk.WatchEvent) bool, <-chan gozk.Event, error) {
		data, st, ch, err := c.conn.GetW(full)
		if errors.Is(err, gozk.ErrNoNode) {
			var ok bool
			ok, _, ch, err = c.conn.ExistsW(full)
			if err == nil && ok {
				// Created between the two calls: read it again (the exists watch fires too).
				data, st, ch, err = c.conn.GetW(full)
				if errors.Is(err, gozk.ErrNoNode) {
					return nil, nil, gozk.ErrConnectionClosed // raced again: let the caller retry
				}
			} else if err == nil {
				return func(ev *zk.WatchEvent) bool { mu.Lock(); defer mu.Unlock(); return fn(nil, nil, ev) }, ch, nil
			}
		}
		if err != nil {
			return nil, nil, err
		}
		s := convStat(st)
		return func(ev *zk.WatchEvent) bool { mu.Lock(); defer mu.Unlock(); return fn(data, &s, ev) }, ch, nil
	})
}

// ChildrenWatch implements zk.Client.
func (c *Client) ChildrenWatch(path string, fn zk.ChildrenWatchFunc) (zk.Watch, error) {
	if err := zk.ValidatePath(path); err != nil {
		return nil, &zk.PathError{Op: "children_watch", Path: path, Err: err}
	}
	full := c.full(path)
	var mu sync.Mutex
	return c.runWatch(path, func() (func(*zk.WatchEvent) bool, <-chan gozk.Event, error) {
		children, _, ch, err := c.conn.ChildrenW(full)
		if errors.Is(err, gozk.ErrNoNode) {
			var ok bool
			ok, _, ch, err = c.conn.ExistsW(full)
			if err == nil && ok {
				return nil, nil, gozk.ErrConnectionClosed // created meanwhile: retry
			}
			if err == nil {
				return func(ev *zk.WatchEvent) bool { mu.Lock(); defer mu.Unlock(); return fn(nil, ev) }, ch, nil
			}
		}
		if err != nil {
			return nil, nil, err
		}
		if children == nil {
			children = []string{}
		}
		sort.Strings(children)
		return func(ev *zk.WatchEvent) bool { mu.Lock(); defer mu.Unlock(); return fn(children, ev) }, ch, nil
	})
}
