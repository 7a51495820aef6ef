package zkfake

import (
	"context"
	"errors"
	"sync"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/zk"
)

// Fake is one client session on a Server; it implements zk.Client (its methods are documented
// there). See the package doc for how it differs from a real server. A Fake starts no
// goroutine: everything runs in the caller's.
type Fake struct {
	server *Server

	// Guarded by server.mu, so a change and the session state it checks are one step.
	session int64
	state   zk.State
	closed  bool

	lmu       sync.Mutex
	listeners []*listener

	emu       sync.Mutex
	elections map[int]func() // cancel funcs of the Runs in progress
	nextRun   int
}

var _ zk.Client = (*Fake)(nil)

// SessionID is the id of the client's current session (Stat.EphemeralOwner of its ephemeral
// nodes); ExpireSession gives the client a new one.
func (c *Fake) SessionID() int64 {
	c.server.mu.Lock()
	defer c.server.mu.Unlock()
	return c.session
}

// Server returns the tree the client is connected to.
func (c *Fake) Server() *Server { return c.server }

// do runs one operation: it checks ctx and the session, applies change under the server lock,
// then calls the watches the change touched, with no lock held. Errors come back as
// *zk.PathError naming op and p.
func (c *Fake) do(ctx context.Context, op, p string, change func(b *batch) error) error {
	if err := ctx.Err(); err != nil {
		return &zk.PathError{Op: op, Path: p, Err: err}
	}
	var b batch
	c.server.mu.Lock()
	err := c.usableLocked()
	if err == nil {
		err = change(&b)
	}
	c.server.mu.Unlock()
	b.deliver()
	if err != nil {
		return &zk.PathError{Op: op, Path: p, Err: err}
	}
	return nil
}

// usableLocked says why the session cannot take calls now, if it cannot.
func (c *Fake) usableLocked() error {
	switch {
	case c.closed:
		return zk.ErrClosed
	case c.state == zk.StateSuspended:
		return zk.ErrConnectionLoss
	case c.state == zk.StateLost:
		return zk.ErrSessionExpired
	}
	return nil
}

// validate returns a *zk.PathError for op when p is not a valid path.
func validate(op, p string, sequence bool) error {
	if err := zk.ValidateCreatePath(p, sequence); err != nil {
		var pe *zk.PathError
		if errors.As(err, &pe) {
			return &zk.PathError{Op: op, Path: p, Err: pe.Err}
		}
		return err
	}
	return nil
}

func (c *Fake) Create(ctx context.Context, p string, data []byte, opts zk.CreateOptions) (string, error) {
	if err := validate("create", p, opts.Sequence); err != nil {
		return "", err
	}
	var created string
	err := c.do(ctx, "create", p, func(b *batch) error {
		owner := int64(0)
		if opts.Ephemeral {
			owner = c.session
		}
		var err error
		created, err = c.server.createLocked(b, p, data, opts, owner)
		return err
	})
	return created, err
}

func (c *Fake) Get(ctx context.Context, p string) ([]byte, zk.Stat, error) {
	if err := validate("get", p, false); err != nil {
		return nil, zk.Stat{}, err
	}
	var data []byte
	var st zk.Stat
	err := c.do(ctx, "get", p, func(*batch) error {
		n := c.server.lookupLocked(p)
		if n == nil {
			return zk.ErrNoNode
		}
		data, st = clone(n.data), n.stat
		return nil
	})
	return data, st, err
}

func (c *Fake) Set(ctx context.Context, p string, data []byte, version int32) (zk.Stat, error) {
	if err := validate("set", p, false); err != nil {
		return zk.Stat{}, err
	}
	var st zk.Stat
	err := c.do(ctx, "set", p, func(b *batch) error {
		var err error
		st, err = c.server.setLocked(b, p, data, version)
		return err
	})
	return st, err
}

func (c *Fake) Delete(ctx context.Context, p string, opts zk.DeleteOptions) error {
	if err := validate("delete", p, false); err != nil {
		return err
	}
	return c.do(ctx, "delete", p, func(b *batch) error {
		return c.server.deleteLocked(b, p, opts)
	})
}

func (c *Fake) Exists(ctx context.Context, p string) (*zk.Stat, error) {
	if err := validate("exists", p, false); err != nil {
		return nil, err
	}
	var st *zk.Stat
	err := c.do(ctx, "exists", p, func(*batch) error {
		if n := c.server.lookupLocked(p); n != nil {
			st = n.statCopy()
		}
		return nil
	})
	return st, err
}

func (c *Fake) Children(ctx context.Context, p string) ([]string, error) {
	if err := validate("children", p, false); err != nil {
		return nil, err
	}
	var names []string
	err := c.do(ctx, "children", p, func(*batch) error {
		n := c.server.lookupLocked(p)
		if n == nil {
			return zk.ErrNoNode
		}
		names = n.childNames()
		return nil
	})
	return names, err
}

func (c *Fake) EnsurePath(ctx context.Context, p string) error {
	if err := validate("ensure_path", p, false); err != nil {
		return err
	}
	return c.do(ctx, "ensure_path", p, func(b *batch) error {
		_, err := c.server.ensureLocked(b, p)
		return err
	})
}

func (c *Fake) DataWatch(p string, fn zk.DataWatchFunc) (zk.Watch, error) {
	if fn == nil {
		return nil, &zk.PathError{Op: "data_watch", Path: p, Err: errkind.New(errkind.Value, "nil watch function")}
	}
	return c.addWatch("data_watch", newWatch(c, p, fn, nil))
}

func (c *Fake) ChildrenWatch(p string, fn zk.ChildrenWatchFunc) (zk.Watch, error) {
	if fn == nil {
		return nil, &zk.PathError{Op: "children_watch", Path: p, Err: errkind.New(errkind.Value, "nil watch function")}
	}
	return c.addWatch("children_watch", newWatch(c, p, nil, fn))
}

// addWatch registers w and makes its first call before returning, as kazoo's recipes do.
func (c *Fake) addWatch(op string, w *watch) (zk.Watch, error) {
	if err := validate(op, w.path, false); err != nil {
		return nil, err
	}
	err := c.do(context.Background(), op, w.path, func(b *batch) error {
		c.server.addWatchLocked(w)
		b.add(w)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

func (c *Fake) Election(p, identifier string) zk.Election {
	return &election{c: c, path: p, inner: zk.NewElection(c, p, identifier)}
}
