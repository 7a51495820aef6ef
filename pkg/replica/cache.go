package replica

import (
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/pyint"
)

// replicaEntry is one cached replica node.
type replicaEntry struct {
	meta  datadef.ReplicaMeta
	czxid int64 // creation zxid of the node: replicas are listed oldest first
}

// taskEntry is a task path ({prefix}[/{idc}:{cluster}]/{server_type}:{index}) and its replicas,
// keyed as the reference keys them: str(int(node name)).
type taskEntry struct {
	path     string
	zkPath   agentconf.ZKPath // parsed once: every query filters on it
	order    int64            // smallest czxid among the replicas added since the entry was created
	replicas map[string]*replicaEntry
}

// cache is the watcher's view: task path -> replicas. It is not safe for concurrent use; the
// Watcher guards it.
//
// Order: the reference's dicts list tasks and replicas in insertion order, which on its fake is
// creation order (children come in creation order and each watch fires at once). ZooKeeper lists
// children in no particular order, so the cache orders by creation zxid instead: replicas by their
// node's czxid, tasks by the smallest czxid of their replicas. A task that loses its last replica
// is dropped and, as in the reference, comes back at its new position.
type cache struct {
	tasks map[string]*taskEntry
	// version counts the changes, for Watcher.DataVersion: written under the Watcher's lock,
	// read without it (atomically) on every AgentService call.
	version uint64
}

func newCache() cache { return cache{tasks: map[string]*taskEntry{}} }

// replicaKey turns a replica node name into the cache key: str(int(name)) in the reference.
// Names that are not integers are not replicas (the reference's int() raised in the callback).
func replicaKey(name string) (string, bool) {
	n, err := pyint.Parse(name)
	if err != nil {
		return "", false
	}
	return strconv.FormatInt(n, 10), true
}

// splitReplicaPath splits a replica node path into its task path and cache key.
func splitReplicaPath(path string) (task, key string, ok bool) {
	i := strings.LastIndexByte(path, '/')
	if i <= 0 {
		return "", "", false
	}
	key, ok = replicaKey(path[i+1:])
	return path[:i], key, ok
}

func (c *cache) put(task, key string, meta datadef.ReplicaMeta, czxid int64) {
	atomic.AddUint64(&c.version, 1)
	t := c.tasks[task]
	if t == nil {
		t = &taskEntry{path: task, zkPath: agentconf.ParseZKPath(task), order: czxid, replicas: map[string]*replicaEntry{}}
		c.tasks[task] = t
	}
	if czxid < t.order {
		t.order = czxid
	}
	if r := t.replicas[key]; r != nil {
		if czxid < r.czxid {
			// An older node naming the same replica (1 beside 00000000001): the newer one stays,
			// whatever order the reads come in, as the reference's watches (set in creation
			// order) left it.
			return
		}
		// A node re-created without its deletion being seen moves to its new place, as a
		// DELETED then CREATED pair would move it in the reference.
		r.meta, r.czxid = meta, czxid
		return
	}
	t.replicas[key] = &replicaEntry{meta: meta, czxid: czxid}
}

// markUnknown sets a cached replica's stat to UNKNOWN (an empty payload); an uncached one is
// ignored, as in the reference.
func (c *cache) markUnknown(task, key string) {
	atomic.AddUint64(&c.version, 1)
	if t := c.tasks[task]; t != nil {
		if r := t.replicas[key]; r != nil {
			r.meta.Stat = datadef.StateUnknown
		}
	}
}

func (c *cache) remove(task, key string) {
	atomic.AddUint64(&c.version, 1)
	t := c.tasks[task]
	if t == nil {
		return
	}
	delete(t.replicas, key)
	if len(t.replicas) == 0 {
		delete(c.tasks, task)
	}
}

func (c *cache) get(task, key string) (*replicaEntry, bool) {
	if t := c.tasks[task]; t != nil {
		r, ok := t.replicas[key]
		return r, ok
	}
	return nil, false
}

func (c *cache) clear() {
	c.tasks = map[string]*taskEntry{}
	atomic.AddUint64(&c.version, 1)
}

// ordered returns the task entries in listing order.
func (c *cache) ordered() []*taskEntry {
	out := make([]*taskEntry, 0, len(c.tasks))
	for _, t := range c.tasks {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].order != out[j].order {
			return out[i].order < out[j].order
		}
		return out[i].path < out[j].path
	})
	return out
}

// keyedReplica is a replica with its key, for ordered iteration.
type keyedReplica struct {
	key string
	*replicaEntry
}

// ordered returns the task's replicas oldest first.
func (t *taskEntry) ordered() []keyedReplica {
	out := make([]keyedReplica, 0, len(t.replicas))
	for k, r := range t.replicas {
		out = append(out, keyedReplica{k, r})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].czxid != out[j].czxid {
			return out[i].czxid < out[j].czxid
		}
		return out[i].key < out[j].key
	})
	return out
}
