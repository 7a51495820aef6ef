// Command agent is the Monolith serving agent (monolith/agent_service/agent.py).
//
// With --conf it runs the agent the agent.conf describes (agent_version 1 or 3) against the real
// ZooKeeper (zk_servers) and TF Serving (MONOLITH_TFS_BINARY) until SIGINT or SIGTERM, with an
// HTTP status endpoint (--status_addr: /healthz, /readyz, /status, /metrics). Agent v3 restarts
// TF Serving when its process exits (--tfs_restart, on by default: with backoff, the restarts
// counted on /status and /metrics).
//
// With no --conf it runs a self-contained demo that needs nothing installed: a small model trained
// for a few seconds and exported into the user's cache directory (or the export an earlier run left
// there), an in-process ZooKeeper (zkfake) holding its saved models and layout, the model server
// (pkg/modelserver) in this process on a local port as TF Serving, and agent v3 configured by the
// built-in example.conf, serving the layout's saved models that pass its filters, with its
// AgentService and status endpoint on local ports. It prints what it started and what to try (a
// tfs_client Predict among them), and stops on Ctrl-C (or after --exit_after).
//
// Exit status: 0 after a clean stop, 1 when the agent could not start or stopped serving (TF
// Serving exited under --tfs_restart=false or with agent v1, the model manager failed), 2 for a
// bad command line or configuration.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	agentspec "github.com/monolith-go/monolith/gen/spec/agent_service/agent"
	utilsspec "github.com/monolith-go/monolith/gen/spec/agent_service/utils"
	"github.com/monolith-go/monolith/internal/cli"
	agentrun "github.com/monolith-go/monolith/pkg/agent/run"
	agentstatus "github.com/monolith-go/monolith/pkg/agent/status"
	agentv3 "github.com/monolith-go/monolith/pkg/agent/v3"
	"github.com/monolith-go/monolith/pkg/tlsconfig"
)

// cmdFlags is the agent's command line: the flags the specs declare.
type cmdFlags struct {
	cli.Common
	utilsspec.ConfFlags
	agentspec.AgentFlags
	agentspec.RunFlags
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second Ctrl-C kills at once
	}()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, nil)
	stop()
	os.Exit(code)
}

// run runs the command and returns its exit status. ready, when set, also gets the agent once it
// runs (tests).
func run(ctx context.Context, args []string, stdout, stderr io.Writer, ready func(agentrun.Ready)) int {
	var c cmdFlags
	if code, done := cli.Parse("agent", "Monolith serving agent: runs next to TensorFlow Serving, driven by ZooKeeper. "+
		"Without --conf it runs a self-contained demo (in-process ZooKeeper and TF Serving).", &c, args, stdout, stderr, 2); done {
		return code
	}
	if c.ExitAfter < 0 {
		fmt.Fprintln(stderr, "agent: --exit_after must not be negative")
		return 2
	}
	name := c.LogLevel
	if name == "auto" {
		name = "info"
		if c.Conf == "" {
			name = "warn"
		}
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(name)); err != nil {
		fmt.Fprintln(stderr, "agent:", err)
		return 2
	}
	// The status page shows the recent warnings and errors: the log tees them into ring.
	ring := agentstatus.NewErrorRing(agentstatus.DefaultRecentErrors)
	log := slog.New(ring.Handler(c.Logger(stderr, level).Handler()))
	// Packages that log through slog's default logger log in the same format.
	slog.SetDefault(log)
	if c.ExitAfter > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, c.ExitAfter, fmt.Errorf("--exit_after %v elapsed", c.ExitAfter))
		defer cancel()
	}
	onReady := func(r agentrun.Ready) {
		if ready != nil {
			ready(r)
		}
	}
	var err error
	svcOpts, tlsErr := tlsconfig.Files{Cert: c.TlsCert, Key: c.TlsKey, CA: c.TlsCa}.ServerOption()
	switch {
	case tlsErr != nil:
		return cli.Exit("agent", cli.Usage(tlsErr), stderr)
	case c.Conf == "":
		err = runDemo(ctx, c, stdout, log, ring, onReady)
	default:
		err = agentrun.Main(ctx, agentrun.Options{
			ConfFile: c.Conf, TFSLog: c.TFSLog, StatusAddr: c.StatusAddr, Logger: log, RecentErrors: ring,
			TFSBinary: c.TFSBinary, TFSBinaryFrom: "--tfs_binary", TFSDir: c.TFSDir,
			ZKSessionTimeout: c.ZKSessionTimeout, ZKConnectTimeout: zkConnectTimeout(c.ZKConnectTimeout),
			AdvertiseHost: c.AdvertiseHost, TFSRestart: c.TFSRestart, ServiceHost: c.ServiceHost, ServiceOptions: svcOpts,
			OnReady: func(r agentrun.Ready) { printRunning(stdout, r); onReady(r) },
		})
	}
	if err == nil {
		fmt.Fprintf(stdout, "agent stopped (%v)\n", context.Cause(ctx))
	}
	return exitCode(err, stderr)
}

// zkConnectTimeout maps --zk_connect_timeout to zkreal's: 0 on the command line waits forever,
// which zkreal spells as a negative timeout (its 0 is the default).
func zkConnectTimeout(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// exitCode prints err as one line and maps it to the exit status: a configuration error is a
// usage error (2).
func exitCode(err error, stderr io.Writer) int {
	if errors.As(err, new(*agentrun.ConfigError)) {
		err = cli.Usage(err)
	}
	return cli.Exit("agent", err, stderr)
}

// printRunning says where a configured agent can be reached.
func printRunning(w io.Writer, r agentrun.Ready) {
	prefix := "agent"
	if r.MPSIndex >= 0 {
		prefix = fmt.Sprintf("agent (dense service %d)", r.MPSIndex)
	}
	fmt.Fprintf(w, "%s v%d running (deploy_type %s, tfs log %s)\n", prefix, r.Config.AgentVersion, r.Config.Deploy, r.TFSLog)
	if r.StatusURL != "" {
		fmt.Fprintf(w, "  status endpoint  %s  (/healthz, /status, /metrics)\n", r.StatusURL)
	}
	if a, ok := r.Agent.(*agentv3.Agent); ok {
		fmt.Fprintf(w, "  AgentService     %s\n  model config     %s\n", a.AgentServiceAddr(), a.ModelConfigFile())
	}
}
