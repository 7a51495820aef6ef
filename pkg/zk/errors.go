package zk

import "github.com/monolith-go/monolith/pkg/errkind"

// Sentinel errors; implementations wrap them (in a *PathError), so test with errors.Is. Each
// carries its errkind: the kazoo exception classes map to the parity harness's kinds this way.
var (
	// ErrNoNode: the node (or, for Create, its parent) does not exist (kazoo NoNodeError).
	ErrNoNode = errkind.New(errkind.NotFound, "node does not exist")
	// ErrNodeExists: Create found the node already there (kazoo NodeExistsError).
	ErrNodeExists = errkind.New(errkind.Runtime, "node already exists")
	// ErrNotEmpty: a non-recursive Delete of a node that has children (kazoo NotEmptyError).
	ErrNotEmpty = errkind.New(errkind.Precondition, "node has children")
	// ErrBadVersion: the expected version did not match (kazoo BadVersionError).
	ErrBadVersion = errkind.New(errkind.Precondition, "version does not match")
	// ErrNoChildrenForEphemerals: Create under an ephemeral node.
	ErrNoChildrenForEphemerals = errkind.New(errkind.Precondition, "ephemeral nodes may not have children")
	// ErrSessionExpired: the session ended; its ephemeral nodes are gone (kazoo SessionExpiredError).
	ErrSessionExpired = errkind.New(errkind.Runtime, "session expired")
	// ErrConnectionLoss: the connection dropped during the call; the call may or may not have
	// been applied (kazoo ConnectionLoss). Retry retries these.
	ErrConnectionLoss = errkind.New(errkind.Runtime, "connection lost")
	// ErrClosed: the client was closed (kazoo ConnectionClosedError).
	ErrClosed = errkind.New(errkind.Runtime, "client is closed")
	// ErrInvalidPath: the path is not a valid ZooKeeper path (see ValidatePath).
	ErrInvalidPath = errkind.New(errkind.Value, "invalid path")
)

// PathError records the operation and path of a failed call. Its kind (errkind.Of) and identity
// (errors.Is) are those of Err.
type PathError struct {
	// Op is the call: "create", "get", "set", "delete", "exists", "children", "ensure_path",
	// "data_watch", "children_watch", "election", "session" or "validate".
	Op   string
	Path string
	Err  error
}

func (e *PathError) Error() string {
	return "zk: " + e.Op + " " + e.Path + ": " + e.Err.Error()
}

// Unwrap returns the cause, so errors.Is(err, ErrNoNode) and errkind.Of(err) see it.
func (e *PathError) Unwrap() error { return e.Err }
