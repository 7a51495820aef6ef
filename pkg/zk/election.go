package zk

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// lockNodeMarkers are kazoo's Lock node name markers: a contender's node is named
// "<random hex>__lock__<sequence>", so Go and Python contenders can share one election path.
var lockNodeMarkers = []string{"__lock__", "__rlock__"}

// leaveTimeout bounds the delete of the contender's node after Run, which runs even when the
// caller's context has ended.
const leaveTimeout = 10 * time.Second

// errCanceled is the cause given to a Run's context by Cancel.
var errCanceled = errors.New("zk: election canceled")

// NewElection returns kazoo's Election recipe over any Client: each Run creates an ephemeral
// sequence node under path holding identifier, and waits until no node with a smaller sequence
// is left. It uses only Client calls, so zkfake and zkreal can share it. The Client must make
// Run's context end when it closes (wrap Run) for a waiting Run to notice a Close.
func NewElection(c Client, path, identifier string) Election {
	return &lockElection{c: c, path: path, id: identifier}
}

type lockElection struct {
	c    Client
	path string
	id   string

	mu     sync.Mutex
	cancel context.CancelCauseFunc // of the Run in progress, nil when none
}

func (e *lockElection) Cancel() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cancel != nil {
		e.cancel(errCanceled)
	}
}

func (e *lockElection) Run(ctx context.Context, fn func(ctx context.Context)) error {
	if fn == nil {
		return errkind.New(errkind.Value, "zk: election %s: nil leader function", e.path)
	}
	if err := ValidatePath(e.path); err != nil {
		return err
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if err := e.begin(cancel); err != nil {
		return err
	}
	defer e.end()

	node, err := e.enter(runCtx)
	if err != nil {
		return e.failure(runCtx, err)
	}
	defer e.leave(ctx, node)
	// Losing our node (session expiry, someone deleting it) ends the wait or the leadership.
	own, err := e.c.DataWatch(node, func(_ []byte, stat *Stat, _ *WatchEvent) bool {
		if stat == nil {
			cancel(&PathError{Op: "election", Path: node, Err: ErrSessionExpired})
			return false
		}
		return true
	})
	if err != nil {
		return e.failure(runCtx, err)
	}
	defer own.Stop()
	if err := e.waitTurn(runCtx, node); err != nil {
		return e.failure(runCtx, err)
	}
	fn(runCtx)
	if cause := context.Cause(runCtx); errors.Is(cause, ErrSessionExpired) || errors.Is(cause, ErrClosed) {
		return cause
	}
	return nil
}

func (e *lockElection) begin(cancel context.CancelCauseFunc) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cancel != nil {
		return errkind.New(errkind.Runtime, "zk: election %s: Run already in progress", e.path)
	}
	e.cancel = cancel
	return nil
}

func (e *lockElection) end() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cancel = nil
}

// failure turns the error that ended a Run before the election into Run's result: once the
// context has ended its cause is what matters (the call failed because of it).
func (e *lockElection) failure(runCtx context.Context, err error) error {
	if runCtx.Err() == nil {
		return err
	}
	cause := context.Cause(runCtx)
	if errors.Is(cause, errCanceled) {
		return nil
	}
	if errors.Is(cause, ErrSessionExpired) || errors.Is(cause, ErrClosed) {
		return cause
	}
	return &PathError{Op: "election", Path: e.path, Err: cause}
}

// enter queues this contender: an ephemeral sequence node named like kazoo's.
func (e *lockElection) enter(ctx context.Context) (string, error) {
	var nonce [16]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return "", err
	}
	prefix := Join(e.path, hex.EncodeToString(nonce[:])+lockNodeMarkers[0])
	return e.c.Create(ctx, prefix, []byte(e.id), CreateOptions{Ephemeral: true, Sequence: true, MakePath: true})
}

// waitTurn returns once node is the first contender, watching only its predecessor (no herd
// effect when the leader leaves).
func (e *lockElection) waitTurn(ctx context.Context, node string) error {
	for {
		children, err := e.c.Children(ctx, e.path)
		if err != nil {
			return err
		}
		sortContenders(children)
		i := slices.Index(children, Base(node))
		switch {
		case i < 0:
			return &PathError{Op: "election", Path: node, Err: ErrSessionExpired}
		case i == 0:
			return nil
		}
		gone := make(chan struct{})
		var once sync.Once
		w, err := e.c.DataWatch(Join(e.path, children[i-1]), func(_ []byte, stat *Stat, _ *WatchEvent) bool {
			if stat == nil {
				once.Do(func() { close(gone) })
				return false
			}
			return true
		})
		if err != nil {
			return err
		}
		select {
		case <-gone:
		case <-ctx.Done():
		}
		w.Stop()
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
	}
}

// leave deletes the contender's node, even when ctx has ended, so the next contender runs.
func (e *lockElection) leave(ctx context.Context, node string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaveTimeout)
	defer cancel()
	err := e.c.Delete(ctx, node, DeleteOptions{})
	if err != nil && !errors.Is(err, ErrNoNode) && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrSessionExpired) {
		slog.Warn("zk election: cannot delete contender node", "path", node, "err", err)
	}
}

// sortContenders orders lock nodes by sequence, as kazoo's Lock does; other names go last.
func sortContenders(children []string) {
	seq := func(name string) string {
		for _, m := range lockNodeMarkers {
			if i := strings.Index(name, m); i >= 0 {
				return name[i+len(m):]
			}
		}
		return "~" // sorts after the digits
	}
	slices.SortStableFunc(children, func(a, b string) int { return strings.Compare(seq(a), seq(b)) })
}
