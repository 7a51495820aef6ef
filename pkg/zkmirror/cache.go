package zkmirror

import "strings"

// cache is the mirror of the watched nodes (the reference's _data: path -> bytes). It keeps
// insertion order, as a Python dict does: the reference's results (which publish wins a tie in
// ExpectedLoading, the order of replicas in a list) follow it. Replacing a value keeps the
// entry's place; deleting and adding again moves it to the end. Not safe for concurrent use: the
// Mirror's lock guards it.
type cache struct {
	entries    map[string]*entry
	head, tail *entry
	// version counts the changes, for Mirror.DataVersion.
	version uint64
}

type entry struct {
	path string
	data []byte
	// memo is data decoded once when it was stored (a decoded value), so queries do not parse
	// JSON on every call; nil when the tree's values are not decoded.
	memo       any
	prev, next *entry
}

func newCache() *cache { return &cache{entries: map[string]*entry{}} }

func (c *cache) get(path string) ([]byte, bool) {
	if e, ok := c.entries[path]; ok {
		return e.data, true
	}
	return nil, false
}

func (c *cache) entry(path string) *entry { return c.entries[path] }

// set stores data (and its decoded form memo) under path and reports whether anything changed.
func (c *cache) set(path string, data []byte, memo any) bool {
	if e, ok := c.entries[path]; ok {
		if string(e.data) == string(data) {
			return false
		}
		e.data, e.memo = data, memo
		c.version++
		return true
	}
	e := &entry{path: path, data: data, memo: memo, prev: c.tail}
	if c.tail != nil {
		c.tail.next = e
	} else {
		c.head = e
	}
	c.tail = e
	c.entries[path] = e
	c.version++
	return true
}

// del removes path and reports whether it was there.
func (c *cache) del(path string) bool {
	e, ok := c.entries[path]
	if !ok {
		return false
	}
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		c.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		c.tail = e.prev
	}
	delete(c.entries, path)
	c.version++
	return true
}

func (c *cache) len() int { return len(c.entries) }

// under calls fn for every entry strictly below parent, in insertion order, with the path
// relative to parent ("a" for parent/a, "a/b" for parent/a/b).
func (c *cache) under(parent string, fn func(rel string, e *entry)) {
	prefix := parent + "/"
	for e := c.head; e != nil; e = e.next {
		if rel, ok := strings.CutPrefix(e.path, prefix); ok && rel != "" {
			fn(rel, e)
		}
	}
}

// children returns the names of parent's children that have a cached descendant (or are cached
// themselves), once each, in the order they were first cached. The reference's get_children
// listed a name once per cached descendant and matched the path as a bare string prefix
// (/a/b also matched /a/bc/d); both are fixed here.
func (c *cache) children(parent string) []string {
	var names []string
	seen := map[string]bool{}
	c.under(parent, func(rel string, _ *entry) {
		name, _, _ := strings.Cut(rel, "/")
		if !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	})
	return names
}

// paths returns the cached paths in insertion order.
func (c *cache) paths() []string {
	out := make([]string, 0, len(c.entries))
	for e := c.head; e != nil; e = e.next {
		out = append(out, e.path)
	}
	return out
}
