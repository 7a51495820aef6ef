package zk

import "context"

// AnyVersion matches every version in Set (and in Delete when CheckVersion is set).
const AnyVersion int32 = -1

// CreateOptions says how Create makes a node.
type CreateOptions struct {
	// Ephemeral ties the node to the client's session: it goes when the session ends.
	// Ephemeral nodes cannot have children (ErrNoChildrenForEphemerals).
	Ephemeral bool
	// Sequence appends a 10-digit, zero-padded counter kept by the parent to the name; the path
	// returned by Create has it. For a sequence node the path may end with "/" (the name is then
	// the counter alone).
	Sequence bool
	// MakePath creates missing ancestors (persistent, empty) instead of failing with ErrNoNode.
	MakePath bool
}

// DeleteOptions says how Delete removes a node. The zero value deletes one childless node
// whatever its version, as kazoo's delete does by default.
type DeleteOptions struct {
	// Recursive deletes the node's descendants first; without it a node with children gives
	// ErrNotEmpty.
	Recursive bool
	// CheckVersion makes Delete fail with ErrBadVersion unless the node's version is Version
	// (AnyVersion matches all). It is off by default so that a forgotten Version does not turn
	// into a version-0 check.
	CheckVersion bool
	// Version is the expected version when CheckVersion is set. With Recursive it is checked on
	// the node itself, not on its descendants.
	Version int32
}

// DataWatchFunc receives a node's data. It is called once when the watch is set, with the current
// state and a nil event, then after every change of the node, with the event that caused the
// call. stat is nil when the node does not exist (data is then nil, except on EventDeleted where
// the fake passes the last value: see the Client doc). Returning false stops the watch.
type DataWatchFunc func(data []byte, stat *Stat, ev *WatchEvent) bool

// ChildrenWatchFunc receives a node's children, sorted. It is called once when the watch is set,
// with a nil event, then after every change: EventChild when a child is added or removed,
// EventCreated (children is empty, not nil) and EventDeleted (children is nil). children is nil
// while the node does not exist. Returning false stops the watch. (kazoo's ChildrenWatch gives up
// on a missing node; this one keeps watching, as the reference fake does, so a real client
// watches the node's existence while it is absent.)
type ChildrenWatchFunc func(children []string, ev *WatchEvent) bool

// Watch is a running DataWatch or ChildrenWatch.
type Watch interface {
	// Stop ends the watch: its function is not started again (a call already running
	// finishes). It may be called from inside the watch function and more than once.
	Stop()
	// Done is closed once the watch has stopped (by Stop, by its function returning false, or
	// by Close of the client).
	Done() <-chan struct{}
}

// Election is kazoo's Election recipe: contenders queue under a path, the first runs.
type Election interface {
	// Run blocks until this contender is elected, then runs fn and gives up leadership when fn
	// returns. fn's context ends when ctx ends, when Cancel is called, and when leadership is
	// lost (the contender's node vanished: session expiry); fn must return then.
	//
	// Run returns nil once fn has returned after a normal end (fn returned, ctx ended or Cancel
	// was called while leader), and nil when Cancel was called before the election (kazoo
	// swallows CancelledError). It returns an error wrapping ErrSessionExpired when leadership
	// or the place in the queue was lost, ErrClosed when the client was closed, ctx's cause
	// when ctx ended before the election, or the ZooKeeper error that stopped it. A Run that
	// has returned leaves no node behind; the Election may be run again.
	Run(ctx context.Context, fn func(ctx context.Context)) error
	// Cancel ends the Run in progress, if any (waiting or running fn).
	Cancel()
}

// Client is a ZooKeeper session. All methods are safe for concurrent use. Operations honour
// ctx: a done ctx fails the call with ctx's error.
//
// Watch callbacks: the fake calls them synchronously, in the goroutine that made the change,
// after the change is applied; a real client calls them from its event goroutine. In both, the
// calls of one watch never overlap and come in the order of the changes. On EventDeleted the
// fake passes the node's last data (as the reference's fake does) and a nil stat; the real
// client passes nil data and a nil stat (kazoo's DataWatch reads the node again and finds none).
// A real client may also coalesce changes that happen while a callback runs (ZooKeeper watches
// are one-shot, so the recipe reads the current state again): callers must treat each call as
// "the state is now this", not as a complete change log.
type Client interface {
	// Create makes a node holding data and returns its path (with the sequence suffix for a
	// sequence node). ErrNodeExists if it exists, ErrNoNode if the parent is missing and
	// MakePath is not set. Nil data is written as empty data (length 0, kazoo's b""), as are the
	// parents MakePath and EnsurePath create; Set does the same.
	Create(ctx context.Context, path string, data []byte, opts CreateOptions) (string, error)
	// Get returns the node's data and stat; ErrNoNode if it does not exist.
	Get(ctx context.Context, path string) ([]byte, Stat, error)
	// Set replaces the node's data if its version is version (AnyVersion: any) and returns the
	// new stat; ErrNoNode, ErrBadVersion.
	Set(ctx context.Context, path string, data []byte, version int32) (Stat, error)
	// Delete removes the node; ErrNoNode, ErrNotEmpty, ErrBadVersion.
	Delete(ctx context.Context, path string, opts DeleteOptions) error
	// Exists returns the node's stat, or nil and no error when it does not exist.
	Exists(ctx context.Context, path string) (*Stat, error)
	// Children returns the names of the node's children, sorted; ErrNoNode.
	Children(ctx context.Context, path string) ([]string, error)
	// EnsurePath creates the node and its missing ancestors (persistent, empty); existing
	// nodes are left as they are.
	EnsurePath(ctx context.Context, path string) error
	// DataWatch watches a node's data, existing or not (see DataWatchFunc). fn is first called
	// before DataWatch returns.
	DataWatch(path string, fn DataWatchFunc) (Watch, error)
	// ChildrenWatch watches a node's children, existing or not (see ChildrenWatchFunc). fn is
	// first called before ChildrenWatch returns.
	ChildrenWatch(path string, fn ChildrenWatchFunc) (Watch, error)
	// Election returns a contender named identifier (stored as its node's data) for the
	// election under path.
	Election(path, identifier string) Election
	// AddListener calls fn on every change of the connection state, in order; remove stops it.
	// No listener is called once Close has begun.
	AddListener(fn func(State)) (remove func())
	// State is the current connection state (kazoo's client.state); StateLost after Close.
	State() State
	// Close ends the session: its ephemeral nodes go, its watches stop and its elections end.
	// Every later call fails with ErrClosed; Close itself may be called again (it returns nil).
	Close() error
}
