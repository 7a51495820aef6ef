package zkreal

import (
	"errors"
	"sort"

	gozk "github.com/go-zookeeper/zk"

	"github.com/monolith-go/monolith/pkg/zk"
)

// Watch machinery. An idle watch is a small struct in an index keyed by path; it costs no
// goroutine. go-zookeeper reports every watch event to the client's event callback (from its
// receive loop, and EventNotWatching for each dropped watch when a session expires); the callback
// takes the watches the event fires (the library's own mapping, see watchMask) and queues them for
// a small pool of workers, which re-arm each watch (GetW / ExistsW / ChildrenW) and call its
// function. A watch is held by at most one goroutine at a time (the caller of DataWatch for the
// first call, then a worker), so its calls never overlap; it is in the index at most once, so it
// is queued at most once. The library's per-watch channels are never read: each holds one event,
// which the library sends before closing it, so nothing blocks; once fired it is garbage.

// Watch states; guarded by Client.wmu.
const (
	wsIdle   uint8 = iota // armed: waits in the index for an event
	wsQueued              // in the run queue
	wsBusy                // held by a goroutine: arming it or calling its function
	wsParked              // waits for the connection, or for a new session
	wsDone
)

// What a watch's library watch is, as go-zookeeper files it (its watchType); akNone: not in
// the index.
const (
	akNone   uint8 = iota
	akArming       // in the index, an arm in flight: the kind is not known yet
	akExist        // ExistsW on a missing node
	akData         // GetW, or ExistsW on an existing node
	akChild        // ChildrenW
)

// evCode is the event a watch delivers on its next call; evFirst is the first call (nil event).
type evCode uint8

const (
	evFirst evCode = iota
	evSession
	evCreated
	evDeleted
	evChanged
	evChild
)

var evTypes = [...]zk.EventType{evSession: zk.EventNone, evCreated: zk.EventCreated,
	evDeleted: zk.EventDeleted, evChanged: zk.EventChanged, evChild: zk.EventChild}

// Watch flags.
const (
	wfStopped          uint8 = 1 << iota
	wfPendingUncertain       // pending may predate the arm it hit (see onWatchEvent)
	wfUncertain              // ev may predate the last delivery: skip the call if nothing changed
)

// missingSig is the signature of a missing node (real zxids are >= 0).
const missingSig int64 = -1

// watch is a DataWatch or ChildrenWatch. c, full and children never change; the functions and
// sig belong to the goroutine holding the watch (state wsBusy), or to whoever ends it when none
// does; the rest is guarded by c.wmu.
type watch struct {
	c      *Client
	full   string // server path (chroot included)
	dataFn zk.DataWatchFunc
	kidsFn zk.ChildrenWatchFunc
	next   *watch        // next watch on the same path in the index
	done   chan struct{} // made by the first Done call
	// sig identifies the state last delivered (the node's mzxid for data, pzxid for children,
	// missingSig when absent), so a call caused by an event that may be stale can be skipped.
	sig      int64
	state    uint8
	kind     uint8
	flags    uint8
	ev       evCode // delivered by the next call
	pending  evCode // an event that came while the watch was held (evFirst: none)
	children bool   // a ChildrenWatch (else a DataWatch)
}

// closedCh is Done's channel for a watch that ended before anyone asked for it.
var closedCh = func() chan struct{} { ch := make(chan struct{}); close(ch); return ch }()

// Stop implements zk.Watch. An idle, queued or parked watch ends at once; one being armed or
// called ends when that is over.
func (w *watch) Stop() {
	c := w.c
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if w.flags&wfStopped != 0 || w.state == wsDone {
		return
	}
	w.flags |= wfStopped
	switch w.state {
	case wsIdle, wsQueued: // a queued watch stays in the queue; the worker skips it
		c.finishLocked(w)
	case wsParked:
		delete(c.wParked, w)
		c.finishLocked(w)
	}
}

// Done implements zk.Watch.
func (w *watch) Done() <-chan struct{} {
	c := w.c
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if w.done == nil {
		if w.state == wsDone {
			return closedCh
		}
		w.done = make(chan struct{})
	}
	return w.done
}

// finishLocked ends w: out of the index, Done closed, its function released.
func (c *Client) finishLocked(w *watch) {
	if w.state == wsDone {
		return
	}
	if w.kind != akNone {
		c.unindexLocked(w)
	}
	w.state = wsDone
	w.dataFn, w.kidsFn = nil, nil
	if w.done != nil {
		close(w.done)
	}
}

// indexLocked files w under its path as being armed: events on the path from now on concern it.
func (c *Client) indexLocked(w *watch) {
	w.kind = akArming
	w.next = c.wIndex[w.full]
	c.wIndex[w.full] = w
}

func (c *Client) unindexLocked(w *watch) {
	head := c.wIndex[w.full]
	if head == w {
		if w.next == nil {
			delete(c.wIndex, w.full)
		} else {
			c.wIndex[w.full] = w.next
		}
	} else {
		for p := head; p != nil; p = p.next {
			if p.next == w {
				p.next = w.next
				break
			}
		}
	}
	w.next, w.kind = nil, akNone
}

// watchMask says which library watch kinds an event fires (go-zookeeper's notifyWatches).
func watchMask(t gozk.EventType) (evCode, uint8) {
	const exist, data, child = 1 << akExist, 1 << akData, 1 << akChild
	switch t {
	case gozk.EventNodeCreated:
		return evCreated, exist
	case gozk.EventNodeDataChanged:
		return evChanged, exist | data
	case gozk.EventNodeChildrenChanged:
		return evChild, child
	case gozk.EventNodeDeleted:
		return evDeleted, exist | data | child
	}
	return evFirst, 0
}

// onWatchEvent runs on the library's receive loop (and on its connection loop for
// EventNotWatching): it must not block, so it only moves watches between lists.
//
// A watch being armed has no known kind yet. The event may be for the arm in flight (the server
// set the watch, then the node changed) or older (another watch of this session on the path): the
// watch is taken either way, and the call that follows is skipped if the node turns out unchanged.
func (c *Client) onWatchEvent(ev gozk.Event) {
	if ev.Type == gozk.EventNotWatching {
		c.onNotWatching(ev)
		return
	}
	code, mask := watchMask(ev.Type)
	if mask == 0 {
		return
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.wClosed {
		return
	}
	var keep, last *watch
	for w := c.wIndex[ev.Path]; w != nil; {
		next := w.next
		take := mask&(1<<w.kind) != 0
		uncertain := false
		if w.kind == akArming {
			// A data watch cares about its node's existence and data, a children watch about
			// its existence and children.
			take = code == evCreated || code == evDeleted || (code == evChild) == w.children
			uncertain = true
		}
		if !take {
			w.next = nil
			if last == nil {
				keep = w
			} else {
				last.next = w
			}
			last = w
			w = next
			continue
		}
		w.next, w.kind = nil, akNone
		switch w.state {
		case wsBusy:
			w.pending = code
			if uncertain {
				w.flags |= wfPendingUncertain
			}
		case wsIdle:
			w.ev = code
			w.flags &^= wfUncertain
			c.enqueueLocked(w)
		}
		w = next
	}
	if keep == nil {
		delete(c.wIndex, ev.Path)
	} else {
		c.wIndex[ev.Path] = keep
	}
}

// onNotWatching: the library dropped its watches on ev.Path (session expiry, or Close). Every
// watch on the path waits for a new session, then delivers its state with EventNone.
func (c *Client) onNotWatching(ev gozk.Event) {
	if errors.Is(ev.Err, gozk.ErrClosing) || c.isClosed() {
		return // Close ends the watches
	}
	gen := c.generation()
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.wClosed {
		return
	}
	// The session in use when the library dropped the watches is gone: wait for a newer one
	// (gen is that session's generation or an older one, as the dispatcher may lag).
	c.wExpGen = max(c.wExpGen, gen)
	w := c.wIndex[ev.Path]
	delete(c.wIndex, ev.Path)
	for w != nil {
		next := w.next
		w.next, w.kind = nil, akNone
		switch w.state {
		case wsBusy:
			w.pending = evSession
			w.flags &^= wfPendingUncertain
		case wsIdle:
			w.ev = evSession
			w.flags &^= wfUncertain
			c.parkLocked(w, 0)
		}
		w = next
	}
}

// enqueueLocked puts w on the run queue and starts a worker if fewer than the limit run.
func (c *Client) enqueueLocked(w *watch) {
	if c.wClosed {
		c.finishLocked(w)
		return
	}
	w.state = wsQueued
	c.wQueue = append(c.wQueue, w)
	if c.wWorkers < c.opts.WatchWorkers {
		c.wWorkers++
		c.wWG.Add(1)
		go c.watchWorker()
	}
}

// parkLocked makes w wait until it can be armed: for a new session when it is to deliver
// EventNone, else for the connection (seq is the state sequence seen before the failed arm: a
// change since then means the connection came back meanwhile).
func (c *Client) parkLocked(w *watch, seq uint64) {
	if c.wClosed {
		c.finishLocked(w)
		return
	}
	c.mu.Lock()
	gen := c.gen
	ready := c.state == zk.StateConnected && !c.closed
	if w.ev == evSession {
		ready = ready && c.gen > c.wExpGen
	} else {
		ready = ready && c.seq != seq
	}
	c.mu.Unlock()
	if ready {
		c.enqueueLocked(w)
		return
	}
	w.state = wsParked
	c.wParked[w] = gen
}

// wakeParked queues the parked watches that can be armed now; the dispatcher calls it after
// every change to CONNECTED.
func (c *Client) wakeParked() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if len(c.wParked) == 0 {
		return
	}
	c.mu.Lock()
	connected, gen := c.state == zk.StateConnected && !c.closed, c.gen
	c.mu.Unlock()
	if !connected {
		return
	}
	newSession := gen > c.wExpGen
	for w, parkedAt := range c.wParked {
		if w.ev == evSession && !newSession {
			continue
		}
		delete(c.wParked, w)
		if gen > parkedAt {
			// A new session began while it waited: whatever it was re-arming for, what it
			// delivers now is the state on the new session.
			w.ev = evSession
			w.flags &^= wfUncertain
		}
		c.enqueueLocked(w)
	}
	if len(c.wParked) == 0 {
		c.wParked = map[*watch]uint64{} // let the space of a large batch go
	}
}

// watchWorker runs queued watches until the queue is empty, then exits: an idle client has no
// worker.
func (c *Client) watchWorker() {
	defer c.wWG.Done()
	c.wmu.Lock()
	for {
		var w *watch
		for w == nil && len(c.wQueue) > 0 && !c.wClosed {
			w = c.wQueue[0]
			c.wQueue[0] = nil
			c.wQueue = c.wQueue[1:]
			if w.state != wsQueued {
				w = nil // stopped while queued
			}
		}
		if w == nil {
			if len(c.wQueue) == 0 {
				c.wQueue = nil // let a large backlog's array go
			}
			c.wWorkers--
			c.wmu.Unlock()
			return
		}
		w.state = wsBusy
		c.wmu.Unlock()
		c.runWatch(w)
		c.wmu.Lock()
	}
}

// armResult is the state an arm read: data and stat for a data watch, children for a children
// watch; exists false when the node is missing.
type armResult struct {
	data     []byte
	stat     *gozk.Stat
	children []string
	exists   bool
	kind     uint8
}

func (r *armResult) sig(children bool) int64 {
	switch {
	case !r.exists || r.stat == nil:
		return missingSig
	case children:
		return r.stat.Pzxid
	default:
		return r.stat.Mzxid
	}
}

// errRearm: the node appeared or vanished between two calls of an arm; arm again at once.
var errRearm = errors.New("zkreal: node changed while arming")

// arm reads w's node and sets a library watch. w must be held by the caller.
func (c *Client) arm(w *watch) (armResult, error) {
	c.wmu.Lock()
	c.indexLocked(w)
	c.wmu.Unlock()
	var r armResult
	var err error
	if w.children {
		r, err = c.armChildren(w.full)
	} else {
		r, err = c.armData(w.full)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err == nil {
		if w.kind == akArming {
			w.kind = r.kind
		}
		// kind akNone: an event took the watch while it was being armed; it is pending.
		return r, nil
	}
	if w.kind != akNone {
		c.unindexLocked(w)
	}
	// The watch is armed again anyway; a dropped session still means EventNone.
	if w.pending == evSession {
		w.ev = evSession
		w.flags &^= wfUncertain
	}
	w.pending = evFirst
	w.flags &^= wfPendingUncertain
	return r, err
}

func (c *Client) armData(full string) (armResult, error) {
	data, st, _, err := c.conn.GetW(full)
	if err == nil {
		return armResult{data: data, stat: st, exists: true, kind: akData}, nil
	}
	if !errors.Is(err, gozk.ErrNoNode) {
		return armResult{}, err
	}
	ok, _, _, err := c.conn.ExistsW(full)
	if err != nil {
		return armResult{}, err
	}
	if !ok {
		return armResult{kind: akExist}, nil
	}
	// Created between the two calls (the exists call set a data watch): read it.
	data, st, _, err = c.conn.GetW(full)
	if errors.Is(err, gozk.ErrNoNode) {
		return armResult{}, errRearm
	}
	if err != nil {
		return armResult{}, err
	}
	return armResult{data: data, stat: st, exists: true, kind: akData}, nil
}

func (c *Client) armChildren(full string) (armResult, error) {
	children, st, _, err := c.conn.ChildrenW(full)
	if err == nil {
		if children == nil {
			children = []string{}
		}
		sort.Strings(children)
		return armResult{children: children, stat: st, exists: true, kind: akChild}, nil
	}
	if !errors.Is(err, gozk.ErrNoNode) {
		return armResult{}, err
	}
	ok, _, _, err := c.conn.ExistsW(full)
	if err != nil {
		return armResult{}, err
	}
	if ok {
		return armResult{}, errRearm // created meanwhile
	}
	return armResult{kind: akExist}, nil
}

// deliver hands r to w's function with event ev; false stops the watch.
func (c *Client) deliver(w *watch, r *armResult, ev evCode) bool {
	var wev *zk.WatchEvent
	if ev != evFirst {
		wev = &zk.WatchEvent{Type: evTypes[ev], Path: c.rel(w.full)}
	}
	if w.children {
		if !r.exists {
			return w.kidsFn(nil, wev)
		}
		return w.kidsFn(r.children, wev)
	}
	if !r.exists {
		return w.dataFn(nil, nil, wev)
	}
	s := convStat(r.stat)
	return w.dataFn(r.data, &s, wev)
}

// runWatch arms w and delivers its event; w is held (wsBusy) by the calling worker.
func (c *Client) runWatch(w *watch) {
	c.wmu.Lock()
	if w.flags&wfStopped != 0 || c.wClosed {
		c.finishLocked(w)
		c.wmu.Unlock()
		return
	}
	ev, uncertain := w.ev, w.flags&wfUncertain != 0
	c.wmu.Unlock()

	seq, gen := c.stateSeq()
	r, err := c.arm(w)
	if err != nil {
		c.wmu.Lock()
		defer c.wmu.Unlock()
		switch {
		case w.flags&wfStopped != 0 || c.wClosed || c.isClosed() || errors.Is(err, gozk.ErrClosing):
			c.finishLocked(w)
		case errors.Is(err, errRearm):
			c.enqueueLocked(w)
		case errors.Is(err, gozk.ErrSessionExpired):
			// The arm went to a session that is gone: deliver EventNone on a newer one.
			c.wExpGen = max(c.wExpGen, gen)
			w.ev = evSession
			w.flags &^= wfUncertain
			c.parkLocked(w, seq)
		case isConnLoss(err):
			c.parkLocked(w, seq)
		default:
			c.log.Warn("zookeeper watch ended: cannot set it again", "path", c.rel(w.full), "err", err)
			c.finishLocked(w)
		}
		return
	}
	ok := true
	if sig := r.sig(w.children); !uncertain || sig != w.sig {
		w.sig = sig
		ok = c.deliver(w, &r, ev)
	}
	c.settle(w, ok)
}

// settle decides what follows a call: the watch ends, runs again for an event that came
// meanwhile, or waits in the index.
func (c *Client) settle(w *watch, ok bool) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	switch {
	case !ok || w.flags&wfStopped != 0 || c.wClosed:
		c.finishLocked(w)
	case w.pending != evFirst:
		w.ev, w.pending = w.pending, evFirst
		w.flags &^= wfUncertain
		if w.flags&wfPendingUncertain != 0 {
			w.flags = w.flags&^wfPendingUncertain | wfUncertain
		}
		if w.ev == evSession {
			c.parkLocked(w, 0)
		} else {
			c.enqueueLocked(w)
		}
	default:
		w.state = wsIdle
	}
}

// startWatch arms w and makes its first call in the caller's goroutine (kazoo calls the function
// before DataWatch returns), waiting out connection loss.
func (c *Client) startWatch(w *watch, op, path string) (zk.Watch, error) {
	c.wmu.Lock()
	if c.wClosed {
		c.wmu.Unlock()
		return nil, mapErr(op, path, gozk.ErrClosing, false)
	}
	w.state = wsBusy
	c.wmu.Unlock()
	for {
		seq, _ := c.stateSeq()
		r, err := c.arm(w)
		if err == nil {
			w.sig = r.sig(w.children)
			c.settle(w, c.deliver(w, &r, evFirst))
			return w, nil
		}
		if errors.Is(err, errRearm) {
			continue
		}
		if !c.isClosed() && !errors.Is(err, gozk.ErrClosing) && (isConnLoss(err) || errors.Is(err, gozk.ErrSessionExpired)) &&
			c.waitStateChange(seq) {
			continue
		}
		c.wmu.Lock()
		c.finishLocked(w)
		c.wmu.Unlock()
		if c.isClosed() {
			err = gozk.ErrClosing
		}
		return nil, mapErr(op, path, err, false)
	}
}

// DataWatch implements zk.Client.
func (c *Client) DataWatch(path string, fn zk.DataWatchFunc) (zk.Watch, error) {
	if err := zk.ValidatePath(path); err != nil {
		return nil, &zk.PathError{Op: "data_watch", Path: path, Err: err}
	}
	return c.startWatch(&watch{c: c, full: c.full(path), dataFn: fn}, "data_watch", path)
}

// ChildrenWatch implements zk.Client.
func (c *Client) ChildrenWatch(path string, fn zk.ChildrenWatchFunc) (zk.Watch, error) {
	if err := zk.ValidatePath(path); err != nil {
		return nil, &zk.PathError{Op: "children_watch", Path: path, Err: err}
	}
	return c.startWatch(&watch{c: c, full: c.full(path), children: true, kidsFn: fn}, "children_watch", path)
}

// endWatches ends every watch no goroutine holds; Close calls it once the workers have stopped.
func (c *Client) endWatches() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	for _, head := range c.wIndex {
		for w := head; w != nil; {
			next := w.next
			if w.state == wsIdle {
				c.finishLocked(w) // unindexes w (and so edits the list being walked: next is saved)
			}
			w = next
		}
	}
	for _, w := range c.wQueue {
		c.finishLocked(w)
	}
	c.wQueue = nil
	for w := range c.wParked {
		c.finishLocked(w)
	}
	clear(c.wParked)
}
