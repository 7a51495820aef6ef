// Package register registers a training worker with the service discovery while it trains (the
// reference's distributed_train: discovery.register, then cluster_manager.get_training_cluster's
// queries until the job's workers are visible), and deregisters it when training ends.
package register

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/monolith-go/monolith/internal/jobdiscovery"
	"github.com/monolith-go/monolith/pkg/discovery"
	"github.com/monolith-go/monolith/pkg/hooks/runhook"
)

// deregisterTimeout bounds the deregistration at the end of training, which runs even when the
// run's context is cancelled.
const deregisterTimeout = 10 * time.Second

// queryPoll is how often the hook queries while it waits to see its registration.
const queryPoll = 50 * time.Millisecond

// Config is what a worker registers and how long it waits to see it.
type Config struct {
	Discovery discovery.ServiceDiscovery
	// ServerType and Index are the name it registers under (worker.<index>).
	ServerType string
	Index      int
	// Want is the number of workers the job has: the registration is complete once the
	// discovery's answers show as many.
	Want int
	// Addr is the address this process serves (unless the discovery fixes it, as Primus and MLP
	// do), asked once the session exists (the controller server's, which starts with it).
	Addr func() string
	// Timeout bounds the wait for the registration to show.
	Timeout time.Duration
	// Out receives the line saying where it registered.
	Out io.Writer
	Log *slog.Logger
}

// Hook registers once the session (and with it the server whose address it registers) exists,
// waits until the discovery's answers show it together with the job's other workers, and
// deregisters it when training ends.
type Hook struct {
	runhook.Base
	cfg Config

	registered string
}

// NewHook is the training loop's registration hook.
func NewHook(cfg Config) *Hook { return &Hook{cfg: cfg} }

func (h *Hook) AfterCreateSession(ctx context.Context, _ *runhook.Session) error {
	c := h.cfg
	addr, fixed, err := jobdiscovery.FixedAddr(c.Discovery)
	if err != nil {
		return err
	}
	if !fixed {
		addr = c.Addr()
	}
	if err := c.Discovery.Register(ctx, c.ServerType, c.Index, addr); err != nil {
		return fmt.Errorf("discovery: register %s.%d at %s: %w", c.ServerType, c.Index, addr, err)
	}
	h.registered = addr
	wctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	for {
		got, err := c.Discovery.Query(wctx, c.ServerType)
		if err != nil {
			return fmt.Errorf("discovery: query %s: %w", c.ServerType, err)
		}
		if got[c.Index] == addr && len(got) >= c.Want {
			c.Log.Info("registered with the service discovery", "server_type", c.ServerType, "index", c.Index, "addr", addr, "cluster", got)
			_, err := fmt.Fprintf(c.Out, "  registered   %s.%d at %s (%d of %d workers visible)\n", c.ServerType, c.Index, addr, len(got), c.Want)
			return err
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("discovery: %s.%d at %s not among the %d %s replicas the discovery answers (%v) after %v",
				c.ServerType, c.Index, addr, c.Want, c.ServerType, got, c.Timeout)
		case <-time.After(queryPoll):
		}
	}
}

// End deregisters, also after a failed or cancelled run; a failure is logged, since closing the
// discovery removes what it registered anyway.
func (h *Hook) End(ctx context.Context, _ *runhook.Session, _ error) error {
	c := h.cfg
	if h.registered == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deregisterTimeout)
	defer cancel()
	if err := c.Discovery.Deregister(ctx, c.ServerType, c.Index, h.registered); err != nil {
		c.Log.Warn("deregistration failed", "server_type", c.ServerType, "index", c.Index, "addr", h.registered, "err", err)
		return nil
	}
	c.Log.Info("deregistered from the service discovery", "server_type", c.ServerType, "index", c.Index)
	h.registered = ""
	return nil
}
