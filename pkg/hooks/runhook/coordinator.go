package runhook

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// Coordinator runs a loop's background goroutines and stops them together: TensorFlow's
// tf.train.Coordinator. The first stop request wins: its error (nil for a clean stop) is the one
// Err reports, and later errors are logged and dropped, as TensorFlow does.
type Coordinator struct {
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	stopped bool
	err     error

	wg      sync.WaitGroup
	running atomic.Int64
}

// NewCoordinator returns a running Coordinator; it stops when RequestStop is called or parent is
// done.
func NewCoordinator(parent context.Context) *Coordinator {
	ctx, cancel := context.WithCancel(parent)
	return &Coordinator{ctx: ctx, cancel: cancel}
}

// Go runs f in a goroutine with a context that is cancelled when the Coordinator stops. If f
// returns an error (or panics) while the Coordinator runs, the Coordinator stops with that error;
// Join waits for f to return.
func (c *Coordinator) Go(f func(ctx context.Context) error) {
	c.wg.Add(1)
	c.running.Add(1)
	go func() {
		defer c.wg.Done()
		defer c.running.Add(-1)
		if err := c.call(f); err != nil {
			c.RequestStop(fmt.Errorf("runhook: coordinated goroutine: %w", err))
		}
	}()
}

func (c *Coordinator) call(f func(ctx context.Context) error) (err error) {
	// A panic in a background goroutine would kill the process; report it like an error instead,
	// as TensorFlow's coordinator does for exceptions.
	defer func() {
		if r := recover(); r != nil {
			err = errkind.New(errkind.Runtime, "panic: %v", r)
		}
	}()
	return f(c.ctx)
}

// RequestStop stops the Coordinator. The first call records err (nil: a clean stop); later calls,
// or calls after the parent context is done, only log a non-nil err.
func (c *Coordinator) RequestStop(err error) {
	c.mu.Lock()
	if !c.stopped && c.ctx.Err() == nil {
		c.stopped = true
		c.err = err
	} else if err != nil {
		slog.Warn("runhook: error after the coordinator stopped", "err", err)
	}
	// Cancel under the lock so that ShouldStop is true as soon as the stop is recorded.
	c.cancel()
	c.mu.Unlock()
}

// ShouldStop reports whether the Coordinator is stopped.
func (c *Coordinator) ShouldStop() bool { return c.ctx.Err() != nil }

// Done is closed when the Coordinator stops.
func (c *Coordinator) Done() <-chan struct{} { return c.ctx.Done() }

// WaitForStop waits up to timeout for the Coordinator to stop and reports whether it did.
func (c *Coordinator) WaitForStop(timeout time.Duration) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-c.ctx.Done():
		return true
	case <-t.C:
		return false
	}
}

// Err is the error the Coordinator stopped with: the first RequestStop's error, the parent
// context's error when that stopped it, nil while it runs or after a clean stop.
func (c *Coordinator) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return c.err
	}
	return c.ctx.Err()
}

// Join waits up to grace for the goroutines started with Go to return (call it after stopping the
// Coordinator). Goroutines still running after grace are reported as an error (kind Runtime); Go
// cannot kill them.
func (c *Coordinator) Join(grace time.Duration) error {
	done := make(chan struct{})
	go func() {
		c.wg.Wait()
		close(done)
	}()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
		return errkind.New(errkind.Runtime, "runhook: coordinator stopped with %d goroutines still running after %v", c.running.Load(), grace)
	}
}
