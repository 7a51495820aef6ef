package zkreal

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/monolith-go/monolith/pkg/zk"
)

// restoreTimeout bounds the re-creation of owned ephemeral nodes on a new session.
const restoreTimeout = 30 * time.Second

// ownedNode is a registered ephemeral node: its data, and when it was first registered.
type ownedNode struct {
	data []byte
	seq  uint64
}

// RegisterEphemeral creates an ephemeral node this client owns: it is re-created on every new
// session until Unregister. A node already there but owned by another session (a previous session
// of this process that has not expired yet, say) is deleted and re-created, so it lives exactly as
// long as this session; one owned by this session gets its data set.
//
// On a new session the nodes are re-created one at a time in the order of their first
// registration (registering a node again changes its data, not its place), so a node that others
// read when another appears (a service info named by a binding) can be registered first and is
// back first.
func (c *Client) RegisterEphemeral(ctx context.Context, path string, data []byte) error {
	if err := zk.ValidatePath(path); err != nil {
		return &zk.PathError{Op: "register_ephemeral", Path: path, Err: err}
	}
	c.mu.Lock()
	if n := c.owned[path]; n != nil {
		n.data = append([]byte(nil), data...)
	} else {
		c.ownedSeq++
		c.owned[path] = &ownedNode{data: append([]byte(nil), data...), seq: c.ownedSeq}
	}
	c.mu.Unlock()
	return c.ensureEphemeral(ctx, path, data)
}

// Unregister stops re-creating path and deletes it.
func (c *Client) Unregister(ctx context.Context, path string) error {
	c.mu.Lock()
	delete(c.owned, path)
	c.mu.Unlock()
	err := c.Delete(ctx, path, zk.DeleteOptions{})
	if isNoNode(err) {
		return nil
	}
	return err
}

func (c *Client) ensureEphemeral(ctx context.Context, path string, data []byte) error {
	full := c.full(path)
	if parent := zk.Parent(path); parent != "/" {
		if err := c.EnsurePath(ctx, parent); err != nil {
			return err
		}
	}
	for attempt := 0; attempt < 3; attempt++ {
		err := c.call(ctx, func() error {
			_, err := c.conn.Create(full, wireData(data), gozk.FlagEphemeral, c.opts.ACL)
			return err
		})
		if err == nil {
			return nil
		}
		if !errors.Is(err, gozk.ErrNodeExists) {
			return mapErr("register_ephemeral", path, err, true)
		}
		st, err := callV(ctx, c, func() (*gozk.Stat, error) {
			_, st, err := c.conn.Exists(full)
			return st, err
		})
		if err != nil {
			return mapErr("register_ephemeral", path, err, false)
		}
		if st == nil || st.Czxid == 0 {
			continue // gone meanwhile: create again
		}
		if st.EphemeralOwner == c.conn.SessionID() {
			_, err := write(ctx, c, "register_ephemeral", path, func() (*gozk.Stat, error) {
				return c.conn.Set(full, wireData(data), -1)
			})
			return err
		}
		// Someone else's node (or a persistent one): replace it so it dies with our session.
		err = c.call(ctx, func() error { return c.conn.Delete(full, st.Version) })
		if err != nil && !errors.Is(err, gozk.ErrNoNode) && !errors.Is(err, gozk.ErrBadVersion) {
			return mapErr("register_ephemeral", path, err, true)
		}
	}
	return &zk.PathError{Op: "register_ephemeral", Path: path, Err: fmt.Errorf("%w: node keeps being re-created by another session", zk.ErrNodeExists)}
}

// restoreOwned re-creates every registered node on a new session, in registration order (called
// by the dispatcher before it announces CONNECTED).
func (c *Client) restoreOwned() {
	type node struct {
		path string
		ownedNode
	}
	c.mu.Lock()
	owned := make([]node, 0, len(c.owned))
	for p, n := range c.owned {
		owned = append(owned, node{p, *n})
	}
	c.mu.Unlock()
	slices.SortFunc(owned, func(a, b node) int { return cmp.Compare(a.seq, b.seq) })
	if len(owned) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), restoreTimeout)
	defer cancel()
	go func() {
		select {
		case <-c.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	for _, n := range owned {
		if err := c.ensureEphemeral(ctx, n.path, n.data); err != nil {
			c.log.Error("re-creating an owned ephemeral node on the new session failed", "path", n.path, "err", err)
		}
	}
}
