package zk

import "fmt"

// EventType says what changed for a watch (kazoo's EventType).
type EventType int

const (
	// EventNone is a session event rather than a node change; the fake never sends it, a real
	// client may (kazoo's EventType.NONE).
	EventNone EventType = iota
	// EventCreated: the node was created.
	EventCreated
	// EventDeleted: the node was deleted.
	EventDeleted
	// EventChanged: the node's data was set.
	EventChanged
	// EventChild: a child of the node was created or deleted.
	EventChild
)

var eventNames = map[EventType]string{
	EventNone:    "NONE",
	EventCreated: "CREATED",
	EventDeleted: "DELETED",
	EventChanged: "CHANGED",
	EventChild:   "CHILD",
}

// String returns kazoo's name of the event type.
func (t EventType) String() string {
	if n, ok := eventNames[t]; ok {
		return n
	}
	return fmt.Sprintf("EventType(%d)", int(t))
}

// WatchEvent is the change that triggered a watch call (kazoo's WatchedEvent).
type WatchEvent struct {
	Type EventType
	Path string // the watched node's path
}

// State is the connection state of a client (kazoo's KazooState).
type State int

const (
	// StateConnected: the session is usable.
	StateConnected State = iota + 1
	// StateSuspended: the connection dropped; the session may still be alive, calls fail with
	// ErrConnectionLoss until it comes back.
	StateSuspended
	// StateLost: the session has expired; its ephemeral nodes are gone.
	StateLost
)

var stateNames = map[State]string{
	StateConnected: "CONNECTED",
	StateSuspended: "SUSPENDED",
	StateLost:      "LOST",
}

// String returns kazoo's name of the state.
func (s State) String() string {
	if n, ok := stateNames[s]; ok {
		return n
	}
	return fmt.Sprintf("State(%d)", int(s))
}
