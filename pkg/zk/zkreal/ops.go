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
	_, err := callV(ctx, c, func() (struct{}, error) { return struct{}{}, fn() })
	return err
}

// callV is call for a library call with a result. The result travels through the channel, so a
// call abandoned when ctx ended never writes to variables its caller can still see.
func callV[T any](ctx context.Context, c *Client, fn func() (T, error)) (T, error) {
	var zero T
	if c.isClosed() {
		return zero, gozk.ErrClosing
	}
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	if ctx.Done() == nil {
		return fn()
	}
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := fn()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// read runs an idempotent read with retries on connection loss and returns its result.
func read[T any](ctx context.Context, c *Client, op, path string, fn func() (T, error)) (T, error) {
	var out T
	err := zk.Retry(ctx, c.opts.ReadRetry, func(ctx context.Context) error {
		v, err := callV(ctx, c, fn)
		if ctx.Err() != nil && err == ctx.Err() {
			return &zk.PathError{Op: op, Path: path, Err: err}
		}
		if err == nil {
			out = v // only this attempt's result, in the retrying goroutine
		}
		return mapErr(op, path, err, false)
	})
	return out, err
}

// write runs a write once (it may not be idempotent) and returns its result.
func write[T any](ctx context.Context, c *Client, op, path string, fn func() (T, error)) (T, error) {
	v, err := callV(ctx, c, fn)
	if err != nil && err == ctx.Err() {
		return v, &zk.PathError{Op: op, Path: path, Err: err}
	}
	return v, mapErr(op, path, err, true)
}

// wireData is what a write sends for data: never nil. go-zookeeper encodes a nil slice as length
// -1 (no data), which kazoo reads back as None where the reference, writing b"", reads b""; Python
// agents sharing these nodes expect b"".
func wireData(data []byte) []byte {
	if data == nil {
		return []byte{}
	}
	return data
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
	created, err := write(ctx, c, "create", path, func() (string, error) {
		return c.conn.Create(c.full(path), wireData(data), flags, c.opts.ACL)
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
	type got struct {
		data []byte
		st   *gozk.Stat
	}
	g, err := read(ctx, c, "get", path, func() (got, error) {
		data, st, err := c.conn.Get(c.full(path))
		return got{data, st}, err
	})
	return g.data, convStat(g.st), err
}

// Set implements zk.Client.
func (c *Client) Set(ctx context.Context, path string, data []byte, version int32) (zk.Stat, error) {
	if err := zk.ValidatePath(path); err != nil {
		return zk.Stat{}, &zk.PathError{Op: "set", Path: path, Err: err}
	}
	st, err := write(ctx, c, "set", path, func() (*gozk.Stat, error) {
		return c.conn.Set(c.full(path), wireData(data), version)
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
	_, err := write(ctx, c, "delete", path, func() (struct{}, error) { return struct{}{}, c.conn.Delete(c.full(path), version) })
	return err
}

func isNoNode(err error) bool { return err != nil && errors.Is(err, zk.ErrNoNode) }

// Exists implements zk.Client.
func (c *Client) Exists(ctx context.Context, path string) (*zk.Stat, error) {
	if err := zk.ValidatePath(path); err != nil {
		return nil, &zk.PathError{Op: "exists", Path: path, Err: err}
	}
	st, err := read(ctx, c, "exists", path, func() (*gozk.Stat, error) {
		ok, st, err := c.conn.Exists(c.full(path))
		if !ok {
			st = nil
		}
		return st, err
	})
	if err != nil || st == nil {
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
	children, err := read(ctx, c, "children", path, func() ([]string, error) {
		children, _, err := c.conn.Children(c.full(path))
		return children, err
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
	ok, err := callV(ctx, c, func() (bool, error) {
		ok, _, err := c.conn.Exists(full)
		return ok, err
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
		_, err := c.conn.Create(full, wireData(nil), 0, c.opts.ACL)
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
