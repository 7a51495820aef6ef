// Package grpcrun runs a gRPC server once, as the model server and the fake TF Serving do: it
// serves on its listener in the background, with the periodic loops that go with it, and stops
// both, gracefully until a deadline.
package grpcrun

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/grpcstop"
)

// Every runs fn every d (when d is positive; else never) in a goroutine of its own until the
// runner stops; runs of fn do not overlap.
type Every func(d time.Duration, fn func())

// Runner serves one gRPC server on one listener, once.
type Runner struct {
	name string // prefixes errors and log lines: "model server"
	log  *slog.Logger
	lis  net.Listener
	srv  *grpc.Server

	ctx    context.Context // the loops', cancelled by Stop
	cancel context.CancelFunc
	wg     sync.WaitGroup // the loops

	mu       sync.Mutex
	started  bool
	stopped  bool
	served   chan struct{} // closed when Serve returned, or by Stop when it never started
	serveErr error
}

// Listen listens on addr (host:port; empty means "127.0.0.1:0") for srv, which serves once Start
// is called. name prefixes the runner's errors and log lines; log nil discards them.
func Listen(name, addr string, srv *grpc.Server, log *slog.Logger) (*Runner, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: listen: %w", name, err)
	}
	r := &Runner{name: name, log: log, lis: lis, srv: srv, served: make(chan struct{})}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	return r, nil
}

// Addr returns the address the server listens on (host:port).
func (r *Runner) Addr() string { return r.lis.Addr().String() }

// Start runs setUp (nil: nothing), then serves in the background and logs "<name> serving" with
// the address; it returns at once. setUp
// starts the loops with every (and only there: Stop cannot run meanwhile), after whatever can fail:
// when it fails, Start returns its error and the runner is as it was (Stop releases the listener).
// A runner starts once: starting it again, or after Stop, is an error of kind Runtime.
func (r *Runner) Start(setUp func(every Every) error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started || r.stopped {
		return errkind.New(errkind.Runtime, "%s: already started or stopped", r.name)
	}
	r.started = true
	if setUp != nil {
		if err := setUp(r.every); err != nil {
			r.started = false
			return err
		}
	}
	go func() {
		err := r.srv.Serve(r.lis)
		if errors.Is(err, grpc.ErrServerStopped) {
			err = nil
		}
		r.mu.Lock()
		r.serveErr = err
		r.mu.Unlock()
		close(r.served)
	}()
	r.log.Info(r.name+" serving", "addr", r.Addr())
	return nil
}

func (r *Runner) every(d time.Duration, fn func()) {
	if d <= 0 {
		return
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-r.ctx.Done():
				return
			case <-t.C:
				fn()
			}
		}
	}()
}

// Wait blocks until the server stops serving and returns why (nil after Stop).
func (r *Runner) Wait() error {
	<-r.served
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.serveErr
}

// Stop stops the loops and the server: gracefully (RPCs in flight finish) until ctx ends, then
// forcibly. Once the loops have returned it runs release (nil: nothing; the owner's clean-up, such
// as unloading models) with ctx. It returns Serve's error joined with release's: release's alone
// when the server never served, Serve's as it is without release. Stopping again only waits for
// Serve and returns its error.
func (r *Runner) Stop(ctx context.Context, release func(context.Context) error) error {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		if r.started {
			return r.Wait()
		}
		return nil
	}
	r.stopped = true
	started := r.started
	r.mu.Unlock()

	r.cancel()
	if grpcstop.Graceful(ctx, r.srv) {
		r.log.Warn(r.name + ": graceful stop timed out; closed the connections")
	}
	r.wg.Wait()
	var releaseErr error
	if release != nil {
		releaseErr = release(ctx)
	}
	if !started {
		_ = r.lis.Close() // Serve never took it over
		close(r.served)
		return releaseErr
	}
	if release == nil {
		return r.Wait()
	}
	return errors.Join(r.Wait(), releaseErr)
}
