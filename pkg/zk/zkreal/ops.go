package zkreal

import (
	"context"
	"errors"
	"sort"
	"strings"

	gozk "github.com/go-zookeeper/zk"

	"github.com/monolith-go/monolith/pkg/zk"
)

// full maps a client path to the server path under the chroot.
func (c *Client) full(p string) string {
	if c.chroot == "" {
		return p
	}
	if p == "/" {
		return c.chroot
	}
	return c.chroot + p
}

// rel maps a server path back to the client's view.
func (c *Client) rel(p string) string {
	if c.chroot == "" {
		return p
	}
	if p == c.chroot {
		return "/"
	}
	return strings.TrimPrefix(p, c.chroot)
}

// call runs fn (a blocking library call) and returns early with ctx's error when ctx ends first;
// fn then finishes in the background, bounded by the library's request timeout.
func (c *Client) call(ctx context.Context, fn func() error) error {
	if c.isClosed() {
		return gozk.ErrClosing
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if ctx.Done() == nil {
		return fn()
	}
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// read runs an idempotent read with retries on connection loss.
func (c *Client) read(ctx context.Context, op, path string, fn func() error) error {
	return zk.Retry(ctx, c.opts.ReadRetry, func(ctx context.Context) error {
		err := c.call(ctx, fn)
		if ctx.Err() != nil && err == ctx.Err() {
			return &zk.PathError{Op: op, Path: path, Err: err}
		}
		return mapErr(op, path, err, false)
	})
}

func (c *Client) write(ctx context.Context, op, path string, fn func() error) error {
	err := c.call(ctx, fn)
	if err != nil && err == ctx.Err() {
		return &zk.PathError{Op: op, Path: path, Err: err}
	}
	return mapErr(op, path, err, true)
}

func convStat(s *gozk.Stat) zk.Stat {
	if s == nil {
		return zk.Stat{}
	}
	return zk.Stat{Czxid: s.Czxid, Mzxid: s.Mzxid, Ctime: s.Ctime, Mtime: s.Mtime, Version: s.Version,
		CVersion: s.Cversion, AVersion: s.Aversion, EphemeralOwner: s.EphemeralOwner, DataLength: s.DataLength,
		NumChildren: s.NumChildren, Pzxid: s.Pzxid}
}

// Create implements zk.Client.
func (c *Client) Create(ctx context.Context, path string, data []byte, opts zk.CreateOptions) (string, error) {
	if err := zk.ValidateCreatePath(path, opts.Sequence); err != nil {
		return "", &zk.PathError{Op: "create", Path: path, Err: err}
	}
	if opts.MakePath {
		if parent := zk.Parent(strings.TrimSuffix(path, "/")); parent != "/" {
			if err := c.EnsurePath(ctx, parent); err != nil {
				return "", err
			}
		}
	}
	var flags int32
	if opts.Ephemeral {
		flags |= gozk.FlagEphemeral
	}
	if opts.Sequence {
		flags |= gozk.FlagSequence
	}
	var created string
	err := c.write(ctx, "create", path, func() error {
		var err error
		created, err = c.conn.Create(c.full(path), data, flags, c.opts.ACL)
		return err
	})
	if err != nil {
		return "", err
	}
	return c.rel(created), nil
}

// Get implements zk.Client.
func (c *Client) Get(ctx context.Context, path string) ([]byte, zk.Stat, error) {
	if err := zk.ValidatePath(path); err != nil {
		return nil, zk.Stat{}, &zk.PathError{Op: "get", Path: path, Err: err}
	}
	var data []byte
	var st *gozk.Stat
	err := c.read(ctx, "get", path, func() error {
		var err error
		data, st, err = c.conn.Get(c.full(path))
		return err
	})
	return data, convStat(st), err
}

// Set implements zk.Client.
func (c *Client) Set(ctx context.Context, path string, data []byte, version int32) (zk.Stat, error) {
	if err := zk.ValidatePath(path); err != nil {
		return zk.Stat{}, &zk.PathError{Op: "set", Path: path, Err: err}
	}
	var st *gozk.Stat
	err := c.write(ctx, "set", path, func() error {
		var err error
		st, err = c.conn.Set(c.full(path), data, version)
		return err
	})
	return convStat(st), err
}

// Delete implements zk.Client. A recursive delete removes the subtree depth first; nodes that
// vanish meanwhile are not errors.
func (c *Client) Delete(ctx context.Context, path string, opts zk.DeleteOptions) error {
	if err := zk.ValidatePath(path); err != nil {
		return &zk.PathError{Op: "delete", Path: path, Err: err}
	}
	if path == "/" {
		return &zk.PathError{Op: "delete", Path: path, Err: zk.ErrInvalidPath}
	}
	version := zk.AnyVersion
	if opts.CheckVersion {
		version = opts.Version
	}
	if opts.Recursive {
		children, err := c.Children(ctx, path)
		if err != nil {
			return err
		}
		for _, ch := range children {
			err := c.Delete(ctx, zk.Join(path, ch), zk.DeleteOptions{Recursive: true})
			if err != nil && !isNoNode(err) {
				return err
			}
		}
	}
	return c.write(ctx, "delete", path, func() error { return c.conn.Delete(c.full(path), version) })
}

func isNoNode(err error) bool { return err != nil && errors.Is(err, zk.ErrNoNode) }

// Exists implements zk.Client.
func (c *Client) Exists(ctx context.Context, path string) (*zk.Stat, error) {
	if err := zk.ValidatePath(path); err != nil {
		return nil, &zk.PathError{Op: "exists", Path: path, Err: err}
	}
	var ok bool
	var st *gozk.Stat
	err := c.read(ctx, "exists", path, func() error {
		var err error
		ok, st, err = c.conn.Exists(c.full(path))
		return err
	})
	if err != nil || !ok {
		return nil, err
	}
	s := convStat(st)
	return &s, nil
}

// Children implements zk.Client.
func (c *Client) Children(ctx context.Context, path string) ([]string, error) {
	if err := zk.ValidatePath(path); err != nil {
		return nil, &zk.PathError{Op: "children", Path: path, Err: err}
	}
	var children []string
	err := c.read(ctx, "children", path, func() error {
		var err error
		children, _, err = c.conn.Children(c.full(path))
		return err
	})
	sort.Strings(children)
	return children, err
}

// EnsurePath implements zk.Client.
func (c *Client) EnsurePath(ctx context.Context, path string) error {
	if err := zk.ValidatePath(path); err != nil {
		return &zk.PathError{Op: "ensure_path", Path: path, Err: err}
	}
	return c.ensureFull(ctx, c.full(path))
}

// ensureFull creates a server path and its ancestors (outside the chroot view, so it also makes
// the chroot itself).
func (c *Client) ensureFull(ctx context.Context, full string) error {
	if full == "/" {
		return nil
	}
	var ok bool
	err := c.call(ctx, func() error {
		var err error
		ok, _, err = c.conn.Exists(full)
		return err
	})
	if err != nil {
		return mapErr("ensure_path", c.rel(full), err, false)
	}
	if ok {
		return nil
	}
	if err := c.ensureFull(ctx, zk.Parent(full)); err != nil {
		return err
	}
	err = c.call(ctx, func() error {
		_, err := c.conn.Create(full, nil, 0, c.opts.ACL)
		return err
	})
	if err != nil && !errors.Is(err, gozk.ErrNodeExists) {
		return mapErr("ensure_path", c.rel(full), err, true)
	}
	return nil
}

// Election implements zk.Client with the shared recipe; its runs end when the client closes.
func (c *Client) Election(path, identifier string) zk.Election {
	return &closingElection{Election: zk.NewElection(c, path, identifier), closing: c.closing}
}

type closingElection struct {
	zk.Election
	closing <-chan struct{}
}

func (e *closingElection) Run(ctx context.Context, fn func(ctx context.Context)) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-e.closing:
			cancel(zk.ErrClosed)
		case <-ctx.Done():
		}
	}()
	return e.Election.Run(ctx, fn)
}
