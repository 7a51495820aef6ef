package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"

	cputrainingspec "github.com/monolith-go/monolith/gen/spec/native_training/cpu_training"
	"github.com/monolith-go/monolith/internal/cli"
	"github.com/monolith-go/monolith/pkg/modelserver/entry"
	"github.com/monolith-go/monolith/pkg/paramsync"
	"github.com/monolith-go/monolith/pkg/ps"
	"github.com/monolith-go/monolith/pkg/tlsconfig"
)

// syncTargets parses --sync_targets, a comma list of host:port (none when empty).
func syncTargets(list string) (paramsync.StaticTargets, error) {
	var out paramsync.StaticTargets
	for _, a := range strings.Split(list, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return nil, fmt.Errorf("--sync_targets: %q is not host:port", a)
		}
		out = append(out, a)
	}
	return out, nil
}

// startSync starts real-time parameter sync: a pusher of the server's tables to the serving
// replicas of <sync_model_name>:ps_<index>, from --sync_targets or the agent's HeartBeat. The
// returned function stops it after a last push.
func startSync(ctx context.Context, f cputrainingspec.PSFlags, srv *ps.Server, index int, metrics *ps.Metrics, stdout io.Writer, log *slog.Logger) (stop func(), err error) {
	static, err := syncTargets(f.SyncTargets)
	if err != nil {
		return nil, err
	}
	var targets paramsync.Targets = static
	from := "targets " + strings.Join(static, ",")
	var agent *entry.AgentReplicas
	if f.SyncAgentAddr != "" {
		if agent, err = entry.NewAgentReplicas(entry.AgentOptions{Addr: f.SyncAgentAddr, Interval: f.SyncInterval, Timeout: f.SyncTimeout, Logger: log}); err != nil {
			return nil, fmt.Errorf("parameter sync: %w", err)
		}
		targets = agent
		from = "the replicas the agent at " + f.SyncAgentAddr + " lists"
	}
	closeAgent := func() {
		if agent != nil {
			agent.Close()
		}
	}
	m, err := paramsync.NewMetrics(metrics.Registry())
	if err != nil {
		closeAgent()
		return nil, fmt.Errorf("parameter sync metrics: %w", err)
	}
	// The targets are model servers: this server's certificate is its client identity there.
	creds, err := tlsconfig.Files{Cert: f.TlsCert, Key: f.TlsKey, CA: f.TlsCa}.ClientCredentials()
	if err != nil {
		closeAgent()
		return nil, cli.Usage(err)
	}
	p, err := paramsync.New(paramsync.Config{Source: srv, Targets: targets, Model: f.SyncModelName, Shard: index,
		Interval: f.SyncInterval, Timeout: f.SyncTimeout, Metrics: m, Logger: log, Credentials: creds})
	if err != nil {
		closeAgent()
		return nil, fmt.Errorf("parameter sync: %w", err)
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		p.Run(sctx)
	}()
	fmt.Fprintf(stdout, "parameter sync: pushing the updates of %s:ps_%d every %v to %s\n", f.SyncModelName, index, f.SyncInterval, from)
	log.Info("parameter sync started", "sub_graph", fmt.Sprintf("%s:ps_%d", f.SyncModelName, index), "interval", f.SyncInterval, "targets", from)
	return func() {
		cancel()
		wg.Wait()
		p.Close()
		closeAgent()
		log.Info("parameter sync stopped")
	}, nil
}
