package zkfake

import (
	"slices"
	"sync"

	"github.com/monolith-go/monolith/pkg/zk"
)

// delivery is one call of a watch function: a snapshot taken under the server lock when the
// change was applied, so every call sees the state right after its own change.
type delivery struct {
	data     []byte
	stat     *zk.Stat
	children []string
	ev       *zk.WatchEvent
}

// watch is a DataWatch (dataFn set) or a ChildrenWatch (childFn set).
//
// Changes enqueue deliveries while holding the server lock, so a watch's queue is in the
// order of the changes; the goroutine that made a change then makes the calls (batch.deliver)
// without any lock held. busy makes the calls of one watch never overlap: a delivery queued
// while the watch function runs (by the function itself, or by another goroutine) is made by
// the goroutine running it, after that call returns and the rest of its change's calls.
type watch struct {
	client  *Fake
	path    string
	dataFn  zk.DataWatchFunc
	childFn zk.ChildrenWatchFunc
	done    chan struct{}

	mu      sync.Mutex
	queue   []delivery
	busy    bool
	stopped bool
}

var _ zk.Watch = (*watch)(nil)

func newWatch(c *Fake, path string, dataFn zk.DataWatchFunc, childFn zk.ChildrenWatchFunc) *watch {
	return &watch{client: c, path: path, dataFn: dataFn, childFn: childFn, done: make(chan struct{})}
}

func (w *watch) Done() <-chan struct{} { return w.done }

// Stop marks the watch stopped and unregisters it. Safe from inside the watch function.
func (w *watch) Stop() {
	if w.markStopped() {
		w.client.server.removeWatch(w)
	}
}

// markStopped stops deliveries and reports whether this call did it (false if already stopped).
func (w *watch) markStopped() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return false
	}
	w.stopped = true
	w.queue = nil
	close(w.done)
	return true
}

// enqueue adds a delivery; called with the server lock held.
func (w *watch) enqueue(d delivery) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped {
		w.queue = append(w.queue, d)
	}
}

// drain calls the watch function for up to max queued deliveries (all when max < 0), unless
// another call of this watch is running: that caller goes on with the queue after it returns.
func (w *watch) drain(max int) {
	for ; max != 0; max-- {
		w.mu.Lock()
		if w.busy || w.stopped || len(w.queue) == 0 {
			w.mu.Unlock()
			return
		}
		d := w.queue[0]
		w.queue = w.queue[1:]
		w.busy = true
		w.mu.Unlock()

		if !w.call(d) {
			w.Stop()
		}
	}
}

// call runs the watch function once; busy is cleared even if it panics.
func (w *watch) call(d delivery) bool {
	defer func() {
		w.mu.Lock()
		w.busy = false
		w.mu.Unlock()
	}()
	if w.dataFn != nil {
		return w.dataFn(d.data, d.stat, d.ev)
	}
	return w.childFn(d.children, d.ev)
}

// batch lists the deliveries a change queued, one entry per delivery in the order of the
// change's events, to be made once the server lock is released.
type batch struct {
	entries []*watch
}

func (b *batch) add(w *watch) { b.entries = append(b.entries, w) }

// deliver makes the calls in event order, one per entry, then drains every watch touched: an
// entry skipped because its watch was busy (its function changing the tree, or another
// goroutine's call) is delivered by whoever is running that watch, or by this final pass.
func (b *batch) deliver() {
	for _, w := range b.entries {
		w.drain(1)
	}
	for i, w := range b.entries {
		if !slices.Contains(b.entries[:i], w) {
			w.drain(-1)
		}
	}
}

// notifyDataLocked queues a call of every data watch on n's path. n is the node after the change,
// nil when it was deleted (then data is the deleted node's last value).
func (s *Server) notifyDataLocked(b *batch, path string, n *node, oldData []byte, typ zk.EventType) {
	for _, w := range s.dataWatches[path] {
		d := delivery{ev: &zk.WatchEvent{Type: typ, Path: path}}
		if n != nil {
			d.data, d.stat = clone(n.data), n.statCopy()
		} else {
			d.data = clone(oldData)
		}
		w.enqueue(d)
		b.add(w)
	}
}

// notifyChildrenLocked queues a call of every children watch on n's path (n nil: deleted).
func (s *Server) notifyChildrenLocked(b *batch, path string, n *node, typ zk.EventType) {
	for _, w := range s.childWatches[path] {
		d := delivery{ev: &zk.WatchEvent{Type: typ, Path: path}}
		if n != nil {
			d.children = n.childNames()
		}
		w.enqueue(d)
		b.add(w)
	}
}

// addWatchLocked registers w and queues its first call (current state, nil event).
func (s *Server) addWatchLocked(w *watch) {
	n := s.lookupLocked(w.path)
	var d delivery
	if w.dataFn != nil {
		s.dataWatches[w.path] = append(s.dataWatches[w.path], w)
		if n != nil {
			d.data, d.stat = clone(n.data), n.statCopy()
		}
	} else {
		s.childWatches[w.path] = append(s.childWatches[w.path], w)
		if n != nil {
			d.children = n.childNames()
		}
	}
	w.enqueue(d)
}

func (s *Server) removeWatch(w *watch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removeWatchLocked(w)
}

func (s *Server) removeWatchLocked(w *watch) {
	m := s.childWatches
	if w.dataFn != nil {
		m = s.dataWatches
	}
	ws := slices.DeleteFunc(m[w.path], func(x *watch) bool { return x == w })
	if len(ws) == 0 {
		delete(m, w.path)
	} else {
		m[w.path] = ws
	}
}
