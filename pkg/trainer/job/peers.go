package job

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"
	"time"

	"github.com/monolith-go/monolith/internal/jobdiscovery"
	"github.com/monolith-go/monolith/pkg/discovery"
	"github.com/monolith-go/monolith/pkg/hooks/controller"
	"github.com/monolith-go/monolith/pkg/hooks/runhook"
)

// The peers' watch: how often each of the job's other processes is probed, how long a probe may
// take, and how many failed probes in a row make it gone.
const (
	probeEvery    = 200 * time.Millisecond
	probeTimeout  = time.Second
	probeFailures = 2
)

// peers watches, while a job of several workers trains, the processes this worker waits for: the
// parameter servers and the other workers (the chief at its controller server's address, the
// others at their status endpoints, as the service discovery has them; with a discovery that
// fixes the addresses, Primus' or MLP's, the chief's from <model_dir>/controller_server_addr.txt
// only). A process whose address refuses connections (or does not answer within probeTimeout)
// probeFailures times in a row is gone: it was killed, or it failed and stopped its servers (the
// chief's saver on a full disk). A wait for the others (the step gate, the job's barrier, the
// dense allreduce) then fails at once naming it, rather than after --ps_timeout: a gone process
// never arrives. The start rendezvous is not watched (the chief restores meanwhile, before its
// controller server exists): --discovery_timeout bounds it.
type peers struct {
	mu    sync.Mutex
	gone  *goneError
	waits map[int]context.CancelCauseFunc
	next  int
}

// peer is a process of the job, named as the errors name it ("ps 1", "worker 0").
type peer struct {
	name, note, addr string
}

// goneError says a process of the job is gone.
type goneError struct {
	p   peer
	err error
}

func (e *goneError) Error() string {
	what := e.p.addr
	if e.p.note != "" {
		what = e.p.note + ", " + what
	}
	return fmt.Sprintf("%s (%s) is gone (%d connections in a row failed: %v): see its log for why",
		e.p.name, what, probeFailures, e.err)
}

func newPeers() *peers { return &peers{waits: map[int]context.CancelCauseFunc{}} }

// wait runs f, a wait for the others, under the watch: it fails at once when a process was found
// gone, before or while it waits, with that process's error.
func (p *peers) wait(ctx context.Context, f func(context.Context) error) error {
	if p == nil {
		return f(ctx)
	}
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	p.mu.Lock()
	if p.gone != nil {
		p.mu.Unlock()
		return p.gone
	}
	id := p.next
	p.next++
	p.waits[id] = cancel
	p.mu.Unlock()
	err := f(wctx)
	p.mu.Lock()
	delete(p.waits, id)
	p.mu.Unlock()
	var g *goneError
	if err != nil && ctx.Err() == nil && errors.As(context.Cause(wctx), &g) {
		return g
	}
	return err
}

// found records a process gone and ends the waits in progress.
func (p *peers) found(g *goneError) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gone != nil {
		return
	}
	p.gone = g
	for _, cancel := range p.waits {
		cancel(g)
	}
}

// watch probes the peers until ctx is done or one is gone.
func (p *peers) watch(ctx context.Context, targets []peer) {
	fails := make([]int, len(targets))
	d := net.Dialer{Timeout: probeTimeout}
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	for {
		for i, tg := range targets {
			conn, err := d.DialContext(ctx, "tcp", tg.addr)
			if ctx.Err() != nil {
				return
			}
			if err == nil {
				conn.Close()
				fails[i] = 0
				continue
			}
			if fails[i]++; fails[i] >= probeFailures {
				p.found(&goneError{p: tg, err: err})
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// waitHook runs a hook whose BeforeRun waits for the others (the step gate, the job's barrier)
// under the watch.
type waitHook struct {
	runhook.Hook
	p *peers
}

func (h waitHook) BeforeRun(ctx context.Context, rc *runhook.RunContext) error {
	return h.p.wait(ctx, func(ctx context.Context) error { return h.Hook.BeforeRun(ctx, rc) })
}

// watchHook starts the watch once the session exists: after the start rendezvous and the
// registration, when the job's workers are visible in the discovery and the chief's controller
// server has written its address. The watch stops with the loop.
type watchHook struct {
	runhook.Base
	p       *peers
	targets func(ctx context.Context) ([]peer, error)
}

func (h *watchHook) AfterCreateSession(ctx context.Context, s *runhook.Session) error {
	targets, err := h.targets(ctx)
	if err != nil {
		return err
	}
	s.Coord.Go(func(ctx context.Context) error {
		h.p.watch(ctx, targets)
		return nil
	})
	return nil
}

// peerTargets are the processes worker r watches: the parameter servers at psAddrs and the other
// workers (see peers).
func peerTargets(ctx context.Context, disc discovery.ServiceDiscovery, r role, modelDir string, psAddrs []string) ([]peer, error) {
	var out []peer
	for i, a := range psAddrs {
		out = append(out, peer{name: fmt.Sprintf("ps %d", i), addr: a})
	}
	_, fixed, err := jobdiscovery.FixedAddr(disc)
	if err != nil {
		return nil, err
	}
	if fixed {
		if !r.chief() {
			addr, err := controller.ReadAddr(modelDir)
			if err != nil {
				return nil, fmt.Errorf("the chief's controller address: %w", err)
			}
			out = append(out, peer{name: "worker 0", note: "the chief", addr: addr})
		}
		return out, nil
	}
	got, err := disc.Query(ctx, "worker")
	if err != nil {
		return nil, fmt.Errorf("discovery: query worker: %w", err)
	}
	var idx []int
	for i := range got {
		if i != r.index {
			idx = append(idx, i)
		}
	}
	sort.Ints(idx)
	for _, i := range idx {
		p := peer{name: fmt.Sprintf("worker %d", i), addr: got[i]}
		if i == 0 {
			p.note = "the chief"
		}
		out = append(out, p)
	}
	return out, nil
}
