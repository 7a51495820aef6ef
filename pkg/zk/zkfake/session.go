package zkfake

import (
	"slices"

	"github.com/monolith-go/monolith/pkg/zk"
)

type listener struct {
	fn func(zk.State)
}

// AddListener registers fn for connection state changes. Listeners run synchronously, in the
// goroutine that changes the state (ExpireSession, Suspend, Resume), in the order added.
func (c *Fake) AddListener(fn func(zk.State)) (remove func()) {
	if fn == nil {
		return func() {}
	}
	l := &listener{fn: fn}
	c.lmu.Lock()
	c.listeners = append(c.listeners, l)
	c.lmu.Unlock()
	return func() {
		c.lmu.Lock()
		defer c.lmu.Unlock()
		c.listeners = slices.DeleteFunc(c.listeners, func(x *listener) bool { return x == l })
	}
}

// notify calls the listeners with s. A listener removed (or a Close begun) before its turn is
// not called.
func (c *Fake) notify(s zk.State) {
	c.lmu.Lock()
	ls := slices.Clone(c.listeners)
	c.lmu.Unlock()
	for _, l := range ls {
		c.lmu.Lock()
		live := slices.Contains(c.listeners, l)
		c.lmu.Unlock()
		if live {
			l.fn(s)
		}
	}
}

func (c *Fake) State() zk.State {
	c.server.mu.Lock()
	defer c.server.mu.Unlock()
	if c.closed {
		return zk.StateLost // kazoo reports LOST once stopped
	}
	return c.state
}

// setState changes the state under the server lock, unless the client is closed.
func (c *Fake) setState(s zk.State, change func(b *batch)) error {
	var b batch
	c.server.mu.Lock()
	if c.closed {
		c.server.mu.Unlock()
		return &zk.PathError{Op: "session", Path: "/", Err: zk.ErrClosed}
	}
	c.state = s
	if change != nil {
		change(&b)
	}
	c.server.mu.Unlock()
	b.deliver()
	c.notify(s)
	return nil
}

// ExpireSession ends the client's session as the server would on a session timeout: its
// ephemeral nodes are deleted (every watch on them fires, this client's own included), then the
// listeners get LOST, and the client reconnects with a new session (listeners get CONNECTED).
// Watches survive, as kazoo's recipes do. It fails with ErrClosed after Close.
func (c *Fake) ExpireSession() error {
	err := c.setState(zk.StateLost, func(b *batch) {
		c.server.removeEphemeralsLocked(b, c.session)
		c.session = c.server.newSessionLocked()
	})
	if err != nil {
		return err
	}
	return c.setState(zk.StateConnected, nil)
}

// Suspend simulates a dropped connection: listeners get SUSPENDED and every call fails with
// ErrConnectionLoss until Resume. The session (and its ephemeral nodes) stays.
func (c *Fake) Suspend() error { return c.setState(zk.StateSuspended, nil) }

// Resume ends a Suspend: listeners get CONNECTED.
func (c *Fake) Resume() error { return c.setState(zk.StateConnected, nil) }

// Close ends the session: later calls fail with ErrClosed, the client's watches stop (without a
// last call), its elections end (Run returns ErrClosed), its ephemeral nodes are deleted
// (other clients' watches fire), and no listener is called. Closing again returns nil.
func (c *Fake) Close() error {
	c.lmu.Lock()
	c.listeners = nil
	c.lmu.Unlock()

	var b batch
	s := c.server
	s.mu.Lock()
	if c.closed {
		s.mu.Unlock()
		return nil
	}
	c.closed = true
	for _, m := range []map[string][]*watch{s.dataWatches, s.childWatches} {
		for _, ws := range m {
			for _, w := range slices.Clone(ws) {
				if w.client == c && w.markStopped() {
					s.removeWatchLocked(w)
				}
			}
		}
	}
	s.removeEphemeralsLocked(&b, c.session)
	s.mu.Unlock()

	c.cancelElections()
	b.deliver()
	return nil
}
