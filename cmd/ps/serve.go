package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/prototext"

	pspb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/ps"
	cputrainingspec "github.com/monolith-go/monolith/gen/spec/native_training/cpu_training"
	"github.com/monolith-go/monolith/internal/cli"
	"github.com/monolith-go/monolith/internal/jobdiscovery"
	agentstatus "github.com/monolith-go/monolith/pkg/agent/status"
	"github.com/monolith-go/monolith/pkg/discovery"
	"github.com/monolith-go/monolith/pkg/embedding/initializer"
	"github.com/monolith-go/monolith/pkg/ps"
	"github.com/monolith-go/monolith/pkg/runconfig"
	"github.com/monolith-go/monolith/pkg/tlsconfig"
	"github.com/monolith-go/monolith/pkg/trainenv"
)

// serverType is the name a parameter server registers under (the reference's "ps").
const serverType = "ps"

// Bounds of the shutdown's network calls, which run after ctx is cancelled.
const (
	deregisterTimeout = 10 * time.Second
	statusStopTimeout = 5 * time.Second
)

// queryPoll is how often the registration's visibility is checked.
const queryPoll = 50 * time.Millisecond

// serve runs the command: config, tables, discovery, then serving until ctx ends.
func serve(ctx context.Context, c cmdFlags, given func(string) bool, stdout io.Writer, log *slog.Logger, d deps) error {
	f := c.PSFlags
	if err := checkFlags(f); err != nil {
		return cli.Usage(err)
	}
	rc, err := runConfig(&c.RunnerFlags, given, d)
	if err != nil {
		return cli.Usage(err)
	}
	tables, err := readTables(f.TableConfig)
	if err != nil {
		return cli.Usage(err)
	}
	dopts, err := jobdiscovery.Options(rc, d.env, log)
	if err != nil {
		return cli.Usage(err)
	}
	return discovery.WithDiscovery(ctx, dopts, func(ctx context.Context, disc discovery.ServiceDiscovery, task *discovery.Task) error {
		index, err := roleOf(disc, task, rc.Index, dopts.Type)
		if err != nil {
			return err
		}
		numPS := max(rc.NumPS, 1)
		if index >= numPS {
			return cli.Usage(fmt.Errorf("--index %d: this job has %d parameter servers (--num_ps)", index, numPS))
		}
		metrics := ps.NewMetrics()
		srv, err := ps.NewServer(ps.Config{
			Index: index, NumPS: numPS, Tables: tables,
			MaxIDsPerRequest: f.MaxIdsPerRequest, MaxMessageBytes: f.MaxMessageBytes, MemLimit: int64(f.MemLimit),
			EvictEvery: f.EvictEvery, Metrics: metrics, Logger: log,
			TrackTouched: f.SyncModelName != "",
			// A generator per table: the tables' initial values do not depend on how the
			// workers' concurrent updates of several tables interleave, so a run repeats.
			InitGenerator: initializer.PerTable,
		})
		if err != nil {
			return cli.Usage(fmt.Errorf("--table_config %s: %w", f.TableConfig, err))
		}
		fixed, _, err := jobdiscovery.FixedAddr(disc)
		if err != nil {
			srv.Close()
			return err
		}
		listen, err := listenAddr(f, given, fixed)
		if err != nil {
			srv.Close()
			return cli.Usage(err)
		}
		tlsFiles := tlsconfig.Files{Cert: f.TlsCert, Key: f.TlsKey, CA: f.TlsCa}
		serverOpts, err := tlsFiles.ServerOption()
		if err != nil {
			srv.Close()
			return cli.Usage(err)
		}
		lis, err := net.Listen("tcp", listen)
		if err != nil {
			srv.Close()
			return fmt.Errorf("listen on %s: %w", listen, err)
		}
		// Parameter sync stops after the server (deferred before it): its last push takes the
		// updates of the calls the grace period let finish.
		var stopSync func()
		defer func() {
			if stopSync != nil {
				stopSync()
			}
		}()
		running := srv.Serve(lis, serverOpts...)
		defer stopServer(running, f.GracePeriod, log)
		addr := fixed
		if addr == "" {
			if addr, err = advertised(ctx, f.Host, running.Addr(), d.env); err != nil {
				return err
			}
		}
		fmt.Fprintf(stdout, "ps %d of %d serving on %s (tables: %s)\n", index, numPS, addr, tableNames(tables))
		log.Info("parameter server serving", "index", index, "num_ps", numPS, "addr", addr, "listen", running.Addr(), "tables", len(tables))
		if f.StatusAddr != "" {
			st, err := agentstatus.Listen(f.StatusAddr, ps.StatusHandler(metrics), log)
			if err != nil {
				return err
			}
			st.Start()
			defer func() {
				sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), statusStopTimeout)
				defer cancel()
				st.Stop(sctx)
			}()
			fmt.Fprintf(stdout, "status %s (/metrics, /healthz, /debug/pprof/)\n", st.URL())
		}
		if disc != nil {
			if err := register(ctx, disc, index, numPS, addr, f.DiscoveryTimeout, stdout, log); err != nil {
				return err
			}
			defer deregister(ctx, disc, index, addr, log)
		}
		if f.SyncModelName != "" {
			if stopSync, err = startSync(ctx, f, srv, index, metrics, stdout, log); err != nil {
				return err
			}
		}
		if d.ready != nil {
			d.ready(addr)
		}
		<-ctx.Done()
		log.Info("parameter server stopping", "index", index, "cause", context.Cause(ctx))
		return nil
	})
}

// stopServer stops serving, letting the calls in flight finish for the grace period.
func stopServer(r *ps.Running, grace time.Duration, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := r.Stop(ctx); err != nil {
		log.Warn("parameter server stopped with an error", "err", err)
		return
	}
	log.Info("parameter server stopped")
}

// checkFlags checks the command's own flags.
func checkFlags(f cputrainingspec.PSFlags) error {
	switch {
	case f.Port < 0 || f.Port > 65535:
		return fmt.Errorf("--port %d: want 0..65535", f.Port)
	case f.MaxIdsPerRequest <= 0:
		return fmt.Errorf("--max_ids_per_request %d is not positive", f.MaxIdsPerRequest)
	case f.MaxMessageBytes <= 0:
		return fmt.Errorf("--max_message_bytes %d is not positive", f.MaxMessageBytes)
	case f.MaxMessageBytes > ps.MaxMessageBytes:
		return fmt.Errorf("--max_message_bytes %d: at most %d (a gRPC message's length is 32 bits)", f.MaxMessageBytes, ps.MaxMessageBytes)
	case f.MemLimit < 0:
		return fmt.Errorf("--mem_limit %d is negative", f.MemLimit)
	case f.EvictEvery < 0:
		return fmt.Errorf("--evict_every %v is negative", f.EvictEvery)
	case f.DiscoveryTimeout <= 0:
		return fmt.Errorf("--discovery_timeout %v is not positive", f.DiscoveryTimeout)
	case f.GracePeriod < 0:
		return fmt.Errorf("--grace_period %v is negative", f.GracePeriod)
	case f.SyncModelName == "" && (f.SyncTargets != "" || f.SyncAgentAddr != ""):
		return fmt.Errorf("--sync_targets or --sync_agent_addr without --sync_model_name: parameter sync needs the served model's name")
	case f.SyncModelName != "" && f.SyncTargets == "" && f.SyncAgentAddr == "":
		return fmt.Errorf("--sync_model_name %s without --sync_targets or --sync_agent_addr: parameter sync needs the serving replicas", f.SyncModelName)
	case f.SyncTargets != "" && f.SyncAgentAddr != "":
		return fmt.Errorf("--sync_targets and --sync_agent_addr: give one source of the serving replicas")
	case f.SyncModelName != "" && (f.SyncInterval <= 0 || f.SyncTimeout <= 0):
		return fmt.Errorf("--sync_interval %v and --sync_timeout %v must be positive", f.SyncInterval, f.SyncTimeout)
	}
	if _, err := syncTargets(f.SyncTargets); err != nil {
		return err
	}
	return nil
}

// runConfig builds the RunnerConfig from the flags (runconfig's merge rule) over the command's
// own values: server type ps, and a local run unless --discovery_type was given.
func runConfig(flags *runconfig.RunnerFlags, given func(string) bool, d deps) (*runconfig.RunnerConfig, error) {
	values := map[string]any{"server_type": serverType}
	if !given("discovery_type") {
		values["is_local"] = true
	}
	if given("server_type") && flags.ServerType != serverType {
		return nil, fmt.Errorf("--server_type %s: cmd/ps runs a parameter server (ps)", flags.ServerType)
	}
	rc, err := runconfig.New(runconfig.Sources{Values: values, Flags: runconfig.FlagValues(flags), Env: d.env.Lookup})
	if err != nil {
		return nil, err
	}
	switch {
	case rc.NumPS < 0:
		return nil, fmt.Errorf("--num_ps %d is negative", rc.NumPS)
	case rc.Index < 0:
		return nil, fmt.Errorf("--index %d is negative", rc.Index)
	}
	return rc, nil
}

// readTables reads the PSConfig of --table_config (none when empty).
func readTables(file string) ([]*pspb.TableConfig, error) {
	if file == "" {
		return nil, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--table_config: %w", err)
	}
	var cfg pspb.PSConfig
	if err := prototext.Unmarshal(b, &cfg); err != nil {
		return nil, fmt.Errorf("--table_config %s: %w", file, err)
	}
	for _, t := range cfg.GetTables() {
		if err := ps.CheckTableConfig(t); err != nil {
			return nil, fmt.Errorf("--table_config %s: %w", file, err)
		}
	}
	return cfg.GetTables(), nil
}

func tableNames(tables []*pspb.TableConfig) string {
	if len(tables) == 0 {
		return "none yet"
	}
	names := make([]string, len(tables))
	for i, t := range tables {
		names[i] = t.GetName()
	}
	return strings.Join(names, ", ")
}

// roleOf is this server's index: the one a discovery that fixes roles gives (which must make it a
// ps), else --index.
func roleOf(disc discovery.ServiceDiscovery, task *discovery.Task, index int, t discovery.Type) (int, error) {
	fixed, err := jobdiscovery.FixedRole(disc, task, t)
	if err != nil {
		return 0, err
	}
	if fixed == nil {
		return index, nil
	}
	if fixed.ServerType != serverType {
		return 0, cli.Usage(fmt.Errorf("%v discovery makes this process %s %d, not a parameter server", t, fixed.ServerType, fixed.Index))
	}
	return fixed.Index, nil
}

// listenAddr is where to listen: --host:--port, with the port (and every interface) of the
// address the discovery fixes unless the flags are given.
func listenAddr(f cputrainingspec.PSFlags, given func(string) bool, fixed string) (string, error) {
	host, port := f.Host, strconv.Itoa(f.Port)
	if fixed != "" {
		_, fp, err := net.SplitHostPort(fixed)
		if err != nil {
			return "", fmt.Errorf("the discovery's address %q: %w", fixed, err)
		}
		if !given("port") {
			port = fp
		}
		if !given("host") {
			host = ""
		}
	}
	return net.JoinHostPort(host, port), nil
}

// advertised is the address to register: --host (the machine's address when empty) and the port
// listened on.
func advertised(ctx context.Context, host, listening string, env trainenv.Env) (string, error) {
	_, port, err := net.SplitHostPort(listening)
	if err != nil {
		return "", err
	}
	if host == "" {
		if host, err = trainenv.LocalHost(ctx, env, nil); err != nil {
			return "", fmt.Errorf("this machine's address: %w", err)
		}
	}
	return net.JoinHostPort(host, port), nil
}

// register registers this server and waits until the discovery's answers show it.
func register(ctx context.Context, disc discovery.ServiceDiscovery, index, numPS int, addr string, timeout time.Duration, stdout io.Writer, log *slog.Logger) error {
	if err := disc.Register(ctx, serverType, index, addr); err != nil {
		return fmt.Errorf("discovery: register %s.%d at %s: %w", serverType, index, addr, err)
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		got, err := disc.Query(wctx, serverType)
		if err != nil {
			return fmt.Errorf("discovery: query %s: %w", serverType, err)
		}
		if got[index] == addr {
			log.Info("registered with the service discovery", "server_type", serverType, "index", index, "addr", addr, "cluster", got)
			_, err := fmt.Fprintf(stdout, "registered %s.%d at %s (%d of %d parameter servers visible)\n", serverType, index, addr, len(got), numPS)
			return err
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("discovery: %s.%d at %s not in the discovery's answers (%v) after %v", serverType, index, addr, got, timeout)
		case <-time.After(queryPoll):
		}
	}
}

// deregister withdraws the registration, also after ctx ended; a failure is logged, since closing
// the discovery removes what it registered anyway.
func deregister(ctx context.Context, disc discovery.ServiceDiscovery, index int, addr string, log *slog.Logger) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deregisterTimeout)
	defer cancel()
	if err := disc.Deregister(dctx, serverType, index, addr); err != nil {
		log.Warn("deregistration failed", "server_type", serverType, "index", index, "addr", addr, "err", err)
		return
	}
	log.Info("deregistered from the service discovery", "server_type", serverType, "index", index)
}
