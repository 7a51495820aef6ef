// Package psservers gets a dnn worker its job's parameter servers: started in this process (the
// demo's cluster, each on a loopback gRPC listener) or found through the service discovery
// (cmd/ps processes registered as "ps"), and checked: every server answers as the index it is at,
// its machine healthy (ps_check_hooks), and, for a job without a checkpoint, its tables empty.
package psservers

import (
	"context"
	"errors"
	"fmt"
	"google.golang.org/grpc"
	"log/slog"
	"net"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	pspb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/ps"
	opspb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/ops"
	"github.com/monolith-go/monolith/pkg/discovery"
	"github.com/monolith-go/monolith/pkg/embedding/initializer"
	"github.com/monolith-go/monolith/pkg/hooks/pscheck"
	"github.com/monolith-go/monolith/pkg/ps"
)

// ServerType is the name parameter servers register under (cmd/ps).
const ServerType = "ps"

// stopTimeout bounds the stop of each parameter server started in this process.
const stopTimeout = 5 * time.Second

// findPoll spaces Find's tries; healthTimeout bounds one health check while the servers are
// looked for.
const (
	findPoll      = 200 * time.Millisecond
	healthTimeout = 5 * time.Second
)

// Local are parameter servers running in this process.
type Local struct {
	servers []*ps.Running
}

// StartLocal starts n parameter servers with tables, each on a loopback listener. On an error it
// stops those it started.
func StartLocal(n int, tables []*pspb.TableConfig, init func(table string) *initializer.Generator, log *slog.Logger) (_ *Local, err error) {
	l := &Local{}
	defer func() {
		if err != nil {
			l.Stop()
		}
	}()
	for i := 0; i < n; i++ {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("parameter server %d: %w", i, err)
		}
		// Each table draws its initial values from a generator of its own (init's), so that the
		// tables of these servers, updated concurrently, start the same in every run: the run
		// repeats.
		r, err := ps.Start(lis, ps.Config{Index: i, NumPS: n, Tables: tables, Logger: log.With("ps", i),
			InitGenerator: init})
		if err != nil {
			lis.Close()
			return nil, fmt.Errorf("parameter server %d: %w", i, err)
		}
		l.servers = append(l.servers, r)
	}
	return l, nil
}

// Addrs are the servers' gRPC addresses, by index.
func (l *Local) Addrs() []string {
	addrs := make([]string, len(l.servers))
	for i, s := range l.servers {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Stop stops the servers, each within a bound.
func (l *Local) Stop() error {
	var errs []error
	for _, s := range l.servers {
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		errs = append(errs, s.Stop(ctx))
		cancel()
	}
	l.servers = nil
	return errors.Join(errs...)
}

// Find waits, at most wait, until the service discovery lists the job's numPS parameter servers
// and each of them answers its health check as the index it is registered under, healthy (a
// registration a crashed server left behind is replaced by its successor's meanwhile). It returns
// a router over them whose calls are bounded by callTimeout.
func Find(ctx context.Context, disc discovery.ServiceDiscovery, numPS int, callTimeout, wait time.Duration, log *slog.Logger, dial ...grpc.DialOption) (*ps.Router, error) {
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var last error
	for {
		got, err := disc.Query(wctx, ServerType)
		switch {
		case err != nil:
			last = fmt.Errorf("query %s: %w", ServerType, err)
		case !complete(got, numPS):
			last = fmt.Errorf("%d of %d parameter servers registered (%v)", len(got), numPS, got)
		default:
			addrs := make([]string, numPS)
			for i := range addrs {
				addrs[i] = got[i]
			}
			router, err := ps.NewRouter(ps.RouterConfig{Addrs: addrs, CallTimeout: callTimeout, DialOptions: dial})
			if err != nil {
				return nil, err
			}
			if err = CheckHealth(wctx, router, min(callTimeout, healthTimeout)); err == nil {
				log.Info("parameter servers found", "addrs", addrs)
				return router, nil
			}
			router.Close()
			var unhealthy *UnhealthyError
			if errors.As(err, &unhealthy) {
				return nil, err
			}
			last = err
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("discovery: the job's %d parameter servers (server type %q) are not all up after --discovery_timeout %v: %w (start cmd/ps --num_ps=%d --index=<i> with the same discovery flags)",
				numPS, ServerType, wait, last, numPS)
		case <-time.After(findPoll):
		}
	}
}

// complete reports whether got has indices 0..n-1.
func complete(got map[int]string, n int) bool {
	for i := 0; i < n; i++ {
		if got[i] == "" {
			return false
		}
	}
	return true
}

// UnhealthyError is a parameter server whose machine is not healthy (ps_check_hooks): a job does
// not wait for it to recover.
type UnhealthyError struct {
	// Report is pscheck.FormatReport's, one line per server.
	Report string
}

func (e *UnhealthyError) Error() string { return strings.ReplaceAll(e.Report, "\n", "; ") }

// CheckHealth checks that every server answers as the index the router has it at, of as many
// servers, and that their machines are healthy (ps_check_hooks' check, through
// pscheck.RemoteProbe), each call bounded by timeout.
func CheckHealth(ctx context.Context, router *ps.Router, timeout time.Duration) error {
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := router.Health(hctx); err != nil {
		return fmt.Errorf("parameter server health: %w", err)
	}
	clients := Clients(router)
	probe := pscheck.RemoteProbe(clients, timeout)
	unhealthy := map[int]*opspb.MachineHealthResult{}
	for i := range clients {
		health, err := probe(ctx, i)
		if err != nil {
			return err
		}
		if len(health) > 0 {
			res := &opspb.MachineHealthResult{}
			if err := proto.Unmarshal(health, res); err != nil {
				return fmt.Errorf("PS %d health result: %w", i, err)
			}
			unhealthy[i] = res
		}
	}
	if len(unhealthy) > 0 {
		return &UnhealthyError{Report: pscheck.FormatReport(unhealthy)}
	}
	return nil
}

// Clients are the router's gRPC clients, by server index (pscheck's probes take them).
func Clients(router *ps.Router) []pspb.ParameterServerClient {
	clients := make([]pspb.ParameterServerClient, router.NumPS())
	for i := range clients {
		clients[i] = router.Client(i).RPC()
	}
	return clients
}

// CheckFresh fails when a job without a checkpoint starts on parameter servers whose tables hold
// entries already (an earlier job's: a job owns its servers; restoring a checkpoint replaces what
// they hold). The stats call is bounded by timeout.
func CheckFresh(ctx context.Context, router *ps.Router, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stats, err := router.Stats(ctx)
	if err != nil {
		return fmt.Errorf("parameter server stats: %w", err)
	}
	for i, st := range stats {
		for _, t := range st.GetTables() {
			if t.GetEntries() > 0 {
				return fmt.Errorf("ps %d (%s): table %q holds %d entries, and --model_dir has no checkpoint: the servers hold an earlier job's tables (start new parameter servers for a new job)",
					i, router.Client(i).Addr(), t.GetName(), t.GetEntries())
			}
		}
	}
	return nil
}
