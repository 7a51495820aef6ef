package main

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

// queryPoll is how often registerHook queries while it waits to see its registration.
const queryPoll = 50 * time.Millisecond

// registerHook registers this worker with the service discovery once the session (and with it the
// controller server, whose address it registers) exists, waits until the discovery's answers show
// it together with the job's other workers, and deregisters it when training ends (the reference's
// distributed_train: discovery.register, then cluster_manager.get_training_cluster's queries).
type registerHook struct {
	runhook.Base
	d          discovery.ServiceDiscovery
	serverType string
	index      int
	// want is the number of workers the job has.
	want int
	// addr is the address this process serves (unless the discovery fixes it).
	addr    func() string
	timeout time.Duration
	out     io.Writer
	log     *slog.Logger

	registered string
}

func (h *registerHook) AfterCreateSession(ctx context.Context, _ *runhook.Session) error {
	addr, fixed, err := jobdiscovery.FixedAddr(h.d)
	if err != nil {
		return err
	}
	if !fixed {
		addr = h.addr()
	}
	if err := h.d.Register(ctx, h.serverType, h.index, addr); err != nil {
		return fmt.Errorf("discovery: register %s.%d at %s: %w", h.serverType, h.index, addr, err)
	}
	h.registered = addr
	wctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	for {
		got, err := h.d.Query(wctx, h.serverType)
		if err != nil {
			return fmt.Errorf("discovery: query %s: %w", h.serverType, err)
		}
		if got[h.index] == addr && len(got) >= h.want {
			h.log.Info("registered with the service discovery", "server_type", h.serverType, "index", h.index, "addr", addr, "cluster", got)
			_, err := fmt.Fprintf(h.out, "  registered   %s.%d at %s (%d of %d workers visible)\n", h.serverType, h.index, addr, len(got), h.want)
			return err
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("discovery: %s.%d at %s not among the %d %s replicas the discovery answers (%v) after %v",
				h.serverType, h.index, addr, h.want, h.serverType, got, h.timeout)
		case <-time.After(queryPoll):
		}
	}
}

// End deregisters, also after a failed or cancelled run; a failure is logged, since closing the
// discovery removes what it registered anyway.
func (h *registerHook) End(ctx context.Context, _ *runhook.Session, _ error) error {
	if h.registered == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deregisterTimeout)
	defer cancel()
	if err := h.d.Deregister(ctx, h.serverType, h.index, h.registered); err != nil {
		h.log.Warn("deregistration failed", "server_type", h.serverType, "index", h.index, "addr", h.registered, "err", err)
		return nil
	}
	h.log.Info("deregistered from the service discovery", "server_type", h.serverType, "index", h.index)
	h.registered = ""
	return nil
}
