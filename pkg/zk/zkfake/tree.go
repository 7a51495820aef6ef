package zkfake

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/monolith-go/monolith/pkg/zk"
)

// The *Locked methods change the tree; they run with s.mu held and queue watch calls in b.

// createLocked makes the node p (a validated path; for a sequence node the prefix) owned by
// session owner (0: persistent) and returns its path.
func (s *Server) createLocked(b *batch, p string, data []byte, opts zk.CreateOptions, owner int64) (string, error) {
	parentPath, prefix := splitCreatePath(p)
	if !opts.Sequence && p == "/" {
		return "", zk.ErrNodeExists
	}
	parent := s.lookupLocked(parentPath)
	if parent == nil {
		if !opts.MakePath {
			return "", zk.ErrNoNode
		}
		var err error
		if parent, err = s.ensureLocked(b, parentPath); err != nil {
			return "", err
		}
	}
	if parent.ephemeral() {
		return "", zk.ErrNoChildrenForEphemerals
	}
	name := prefix
	if opts.Sequence {
		// A real server numbers with the parent's cversion: child creations and deletions both
		// advance it, and a new parent starts at 0.
		name += fmt.Sprintf("%010d", parent.stat.CVersion)
	}
	if _, ok := parent.children[name]; ok {
		return "", zk.ErrNodeExists
	}
	return s.addChildLocked(b, parent, name, data, owner).path, nil
}

// splitCreatePath splits p into its parent and the new node's name (for a sequence prefix ending
// with "/", the name before the counter is empty).
func splitCreatePath(p string) (parent, name string) {
	i := strings.LastIndexByte(p, '/')
	if i == 0 {
		return "/", p[1:]
	}
	return p[:i], p[i+1:]
}

// ensureLocked returns the node p, creating it and its missing ancestors (persistent, empty).
func (s *Server) ensureLocked(b *batch, p string) (*node, error) {
	n := s.root
	for _, seg := range splitPath(p) {
		child := n.children[seg]
		if child == nil {
			if n.ephemeral() {
				return nil, zk.ErrNoChildrenForEphemerals
			}
			child = s.addChildLocked(b, n, seg, nil, 0)
		}
		n = child
	}
	return n, nil
}

func (s *Server) addChildLocked(b *batch, parent *node, name string, data []byte, owner int64) *node {
	zxid := s.nextZxidLocked()
	n := newNode(childPath(parent.path, name), data, zxid, owner, time.Now().UnixMilli())
	parent.children[name] = n
	parent.stat.CVersion++
	parent.stat.NumChildren++
	parent.stat.Pzxid = zxid
	// Same order as the reference fake: the node's own watches, then its parent's.
	s.notifyDataLocked(b, n.path, n, nil, zk.EventCreated)
	s.notifyChildrenLocked(b, n.path, n, zk.EventCreated)
	s.notifyChildrenLocked(b, parent.path, parent, zk.EventChild)
	return n
}

func (s *Server) setLocked(b *batch, p string, data []byte, version int32) (zk.Stat, error) {
	n := s.lookupLocked(p)
	if n == nil {
		return zk.Stat{}, zk.ErrNoNode
	}
	if version != zk.AnyVersion && version != n.stat.Version {
		return zk.Stat{}, zk.ErrBadVersion
	}
	n.data = clone(data)
	n.stat.Version++
	n.stat.Mzxid = s.nextZxidLocked()
	n.stat.Mtime = time.Now().UnixMilli()
	n.stat.DataLength = int32(len(n.data))
	s.notifyDataLocked(b, p, n, nil, zk.EventChanged)
	return n.stat, nil
}

func (s *Server) deleteLocked(b *batch, p string, opts zk.DeleteOptions) error {
	if p == "/" {
		return fmt.Errorf("%w: the root cannot be deleted", zk.ErrInvalidPath)
	}
	n := s.lookupLocked(p)
	if n == nil {
		return zk.ErrNoNode
	}
	if opts.CheckVersion && opts.Version != zk.AnyVersion && opts.Version != n.stat.Version {
		return zk.ErrBadVersion
	}
	if len(n.children) > 0 && !opts.Recursive {
		return zk.ErrNotEmpty
	}
	parentPath, _ := splitCreatePath(p)
	s.removeLocked(b, s.lookupLocked(parentPath), n, true)
	return nil
}

// removeLocked deletes n and its subtree, deepest nodes first as a real recursive delete does.
// Each deleted node's watches get EventDeleted; only the surviving parent's children watches
// get EventChild (once, with the final list), when notifyParent is set.
func (s *Server) removeLocked(b *batch, parent, n *node, notifyParent bool) {
	for _, name := range n.childNames() {
		s.removeLocked(b, n, n.children[name], false)
	}
	zxid := s.nextZxidLocked()
	delete(parent.children, n.path[strings.LastIndexByte(n.path, '/')+1:])
	parent.stat.CVersion++
	parent.stat.NumChildren--
	parent.stat.Pzxid = zxid
	s.notifyDataLocked(b, n.path, nil, n.data, zk.EventDeleted)
	s.notifyChildrenLocked(b, n.path, nil, zk.EventDeleted)
	if notifyParent {
		s.notifyChildrenLocked(b, parent.path, parent, zk.EventChild)
	}
}

// removeEphemeralsLocked deletes the nodes of session owner, oldest first, as the server does
// when a session ends.
func (s *Server) removeEphemeralsLocked(b *batch, owner int64) {
	var found []*node
	var walk func(*node)
	walk = func(n *node) {
		for _, c := range n.children {
			if c.stat.EphemeralOwner == owner {
				found = append(found, c)
			}
			walk(c)
		}
	}
	walk(s.root)
	slices.SortFunc(found, func(a, c *node) int { return cmp.Compare(a.stat.Czxid, c.stat.Czxid) })
	for _, n := range found {
		parentPath, _ := splitCreatePath(n.path)
		s.removeLocked(b, s.lookupLocked(parentPath), n, true)
	}
}
