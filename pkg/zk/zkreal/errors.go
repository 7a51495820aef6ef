package zkreal

import (
	"errors"
	"fmt"

	gozk "github.com/go-zookeeper/zk"

	"github.com/monolith-go/monolith/pkg/zk"
)

// isConnLoss reports library errors that mean the request may not have reached the server or its
// answer was lost.
func isConnLoss(err error) bool {
	return errors.Is(err, gozk.ErrConnectionClosed) || errors.Is(err, gozk.ErrNoServer) ||
		errors.Is(err, gozk.ErrSessionMoved)
}

// mapErr turns a library error into one of zk's typed errors, wrapped in a *zk.PathError naming
// the operation and the (un-chrooted) path.
func mapErr(op, path string, err error, write bool) error {
	if err == nil {
		return nil
	}
	var sentinel error
	switch {
	case errors.Is(err, gozk.ErrNoNode):
		sentinel = zk.ErrNoNode
	case errors.Is(err, gozk.ErrNodeExists):
		sentinel = zk.ErrNodeExists
	case errors.Is(err, gozk.ErrNotEmpty):
		sentinel = zk.ErrNotEmpty
	case errors.Is(err, gozk.ErrBadVersion):
		sentinel = zk.ErrBadVersion
	case errors.Is(err, gozk.ErrNoChildrenForEphemerals):
		sentinel = zk.ErrNoChildrenForEphemerals
	case errors.Is(err, gozk.ErrSessionExpired):
		sentinel = zk.ErrSessionExpired
	case errors.Is(err, gozk.ErrClosing):
		sentinel = zk.ErrClosed
	case errors.Is(err, gozk.ErrInvalidPath), errors.Is(err, gozk.ErrBadArguments):
		sentinel = zk.ErrInvalidPath
	case isConnLoss(err):
		if write {
			return &zk.PathError{Op: op, Path: path, Err: fmt.Errorf("%w (outcome unknown: the write may or may not have been applied): %v", zk.ErrConnectionLoss, err)}
		}
		sentinel = zk.ErrConnectionLoss
	default:
		return &zk.PathError{Op: op, Path: path, Err: err}
	}
	return &zk.PathError{Op: op, Path: path, Err: fmt.Errorf("%w: %v", sentinel, err)}
}
