package zkfake

import (
	"context"

	"github.com/monolith-go/monolith/pkg/zk"
)

// election runs the shared recipe (zk.NewElection) with a context that Close ends, so a Run
// waiting for its turn returns ErrClosed when its client closes.
type election struct {
	c     *Fake
	path  string
	inner zk.Election
}

func (e *election) Run(ctx context.Context, fn func(ctx context.Context)) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	closedErr := &zk.PathError{Op: "election", Path: e.path, Err: zk.ErrClosed}
	id, ok := e.c.trackElection(func() { cancel(closedErr) })
	if !ok {
		return closedErr
	}
	defer e.c.untrackElection(id)
	return e.inner.Run(ctx, fn)
}

func (e *election) Cancel() { e.inner.Cancel() }

// trackElection registers the cancel func of a Run; false once the client is closed.
func (c *Fake) trackElection(cancel func()) (int, bool) {
	c.server.mu.Lock()
	closed := c.closed
	c.server.mu.Unlock()
	c.emu.Lock()
	defer c.emu.Unlock()
	if closed || c.elections == nil {
		return 0, false
	}
	c.nextRun++
	c.elections[c.nextRun] = cancel
	return c.nextRun, true
}

func (c *Fake) untrackElection(id int) {
	c.emu.Lock()
	defer c.emu.Unlock()
	delete(c.elections, id)
}

// cancelElections ends every Run in progress and refuses new ones (elections becomes nil).
func (c *Fake) cancelElections() {
	c.emu.Lock()
	cancels := c.elections
	c.elections = nil
	c.emu.Unlock()
	for _, cancel := range cancels {
		cancel()
	}
}
