// Command model_server serves exported models (pkg/export: <export_base>/{entry,ps_i}/<version>/)
// over TF Serving's gRPC API (pkg/modelserver): ModelService (GetModelStatus,
// HandleReloadConfigRequest) and PredictionService (Predict, GetModelMetadata). It takes the
// command line the agent gives tensorflow_model_server (pkg/tfs Wrapper, pkg/agentconf
// CmdAndPort), so the agent runs it in TF Serving's place (--tfs_binary or $MONOLITH_TFS_BINARY):
//
//	model_server --model_config_file=models.config --port=8500 --rest_api_port=8501 \
//	    --model_config_file_poll_wait_seconds=60 --archon_port=... --platform_config_file=...
//
// It serves --model_config_file's models (re-read every --model_config_file_poll_wait_seconds), or
// --model_name from --model_base_path, loading each version in the background
// (START/LOADING/AVAILABLE/UNLOADING/END) as the base paths' numeric subdirectories come and go
// (listed every --file_system_poll_wait_seconds). Under the latest policy it serves the newest
// versions that load: a version that fails to load (a corrupt or truncated export) is reported in
// GetModelStatus (END, with the error naming the file), logged, counted in /metrics and skipped,
// at start as while it serves, until its model's config changes; TF Serving keeps the failed
// version aspired and, started with a corrupt newest version, serves nothing. ps_<i> models answer embedding lookups
// (pkg/modelserver/psshard); entry models score ExampleBatches, Instances or Examples
// (pkg/modelserver/entry), looking the ids up on the PS replicas the agent lists in its HeartBeat
// (--agent_addr, else localhost:$PORT2 as Monolith's entry), each lookup bounded by
// --archon_entry_to_ps_rpc_timeout and retried --archon_entry_to_ps_rpc_retry times on the next
// replica.
//
// The status endpoint (--status_addr) serves /metrics (requests by model, signature, method and
// code, their latency, loads, versions by state, the entry's PS calls), /healthz and
// /debug/pprof/. The TF Serving flags it has no use for are accepted and ignored; any other flag is
// a usage error. Exit status: 0 after SIGTERM or SIGINT (requests in flight get --shutdown_grace),
// 2 for a bad command line or model config file, 1 when serving fails (the port taken).
package main

import (
	"context"
	"errors"
	"fmt"
	"google.golang.org/grpc"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"

	modelserverspec "github.com/monolith-go/monolith/gen/spec/go/model_server"
	"github.com/monolith-go/monolith/internal/cli"
	agentstatus "github.com/monolith-go/monolith/pkg/agent/status"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/modelserver"
	"github.com/monolith-go/monolith/pkg/modelserver/entry"
	"github.com/monolith-go/monolith/pkg/modelserver/psshard"
	"github.com/monolith-go/monolith/pkg/tlsconfig"
)

const name = "model_server"

// description names PredictionServiceGrpc so that the binary holds the string: the agent (as the
// reference, `strings | grep`) takes a binary holding it for a gRPC remote-op build and then
// advertises its gRPC port to the entries, which reach the PS sub-graphs over gRPC.
const description = "Serve exported entry and ps_i sub-graphs over TF Serving's gRPC API (ModelService, PredictionService; " +
	"entries reach PS replicas through PredictionServiceGrpc), taking tensorflow_model_server's command line."

// agentPortEnv is where Monolith's entry finds the agent's port (agent_heartbeat.cc: PORT2).
const agentPortEnv = "PORT2"

// flags is the command line: TF Serving's flags, Monolith's, the model server's own
// (specs/go/model_server.yaml) and --log_format. --version is TF Serving's: alone it prints the
// build, with a value it is ignored.
type flags struct {
	cli.LogFlags
	modelserverspec.ModelServerFlags
}

// statusStopTimeout bounds the status endpoint's stop.
const statusStopTimeout = 5 * time.Second

func main() {
	cli.Main(cli.KillOnSecondSignal, func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
		return run(ctx, args, stdout, stderr, os.LookupEnv, nil)
	})
}

// ready, when set, is told the gRPC and status addresses once the server listens.
type readyFunc func(addr, status string)

// run runs the server until ctx is done or serving fails and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) (string, bool), ready readyFunc) int {
	var c flags
	if code, done := cli.Parse(name, description, &c, args, stdout, stderr, 2); done {
		return code
	}
	if c.Version == modelserverspec.PrintVersion {
		fmt.Fprintln(stdout, cli.VersionLine(name))
		return 0
	}
	log, err := c.DefaultLogger(stderr, c.LogLevel)
	if err != nil {
		return cli.Exit(name, err, stderr)
	}
	return cli.Exit(name, serve(ctx, c.ModelServerFlags, stdout, log, env, ready), stderr)
}

// checkFlags checks what kong cannot.
func checkFlags(f modelserverspec.ModelServerFlags) error {
	for _, n := range []struct {
		flag string
		v    int
	}{
		{"model_config_file_poll_wait_seconds", f.ModelConfigFilePollWaitSeconds},
		{"file_system_poll_wait_seconds", f.FileSystemPollWaitSeconds},
		{"num_load_threads", f.NumLoadThreads},
		{"max_num_load_retries", f.MaxNumLoadRetries},
		{"load_retry_interval_micros", f.LoadRetryIntervalMicros},
		{"archon_entry_to_ps_rpc_retry", f.EntryToPSRPCRetry},
	} {
		if n.v < 0 {
			return fmt.Errorf("--%s %d is negative", n.flag, n.v)
		}
	}
	switch {
	case f.Port < 0 || f.Port > 65535:
		return fmt.Errorf("--port %d: want 0..65535", f.Port)
	case f.EntryToPSRPCTimeout <= 0:
		return fmt.Errorf("--archon_entry_to_ps_rpc_timeout %d ms is not positive", f.EntryToPSRPCTimeout)
	case f.AgentHeartbeatInterval <= 0:
		return fmt.Errorf("--agent_heartbeat_interval %v is not positive", f.AgentHeartbeatInterval)
	case f.ModelConfigFile != "" && f.ModelBasePath != "":
		return errors.New("--model_config_file and --model_base_path are mutually exclusive")
	}
	return nil
}

func serve(ctx context.Context, f modelserverspec.ModelServerFlags, stdout io.Writer, log *slog.Logger, env func(string) (string, bool), ready readyFunc) error {
	if err := checkFlags(f); err != nil {
		return cli.Usage(err)
	}
	if f.RestAPIPort != 0 {
		log.Info("no REST API is served; --rest_api_port ignored", "rest_api_port", f.RestAPIPort)
	}
	tlsFiles := tlsconfig.Files{Cert: f.TLSCert, Key: f.TLSKey, CA: f.TLSCA}
	serverOpts, err := tlsFiles.ServerOption()
	if err != nil {
		return cli.Usage(err)
	}
	// The same certificate is the server's client identity at the PS replicas and the agent.
	creds, err := tlsFiles.ClientCredentials()
	if err != nil {
		return cli.Usage(err)
	}
	agentAddr := f.AgentAddr
	if p, ok := env(agentPortEnv); agentAddr == "" && ok && p != "" {
		agentAddr = net.JoinHostPort("localhost", p)
	}
	// Entries ask the agent when the first one needs it: a model server of PS shards alone never
	// does.
	replicas := &entry.LazyReplicas{
		New: func() (*entry.AgentReplicas, error) {
			return entry.NewAgentReplicas(entry.AgentOptions{Addr: agentAddr, Interval: f.AgentHeartbeatInterval, Logger: log,
				DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(creds)}})
		},
		Stopped: errors.New("model server stopped"),
	}
	defer replicas.Close()
	var entryReplicas entry.Replicas = replicas
	if agentAddr == "" {
		entryReplicas = nil // entries fail to load, saying why
		log.Warn("no agent address (--agent_addr, $" + agentPortEnv + "): entry models cannot find their PS replicas and will not load")
	}
	metrics := modelserver.NewMetrics()
	retries := f.EntryToPSRPCRetry
	if retries == 0 {
		retries = -1 // the flag's 0 is none; entry.Config's 0 is its default
	}
	loader := entry.NewLoader(entry.Config{
		Replicas:    entryReplicas,
		Timeout:     time.Duration(f.EntryToPSRPCTimeout) * time.Millisecond,
		Retries:     retries,
		Metrics:     entry.NewMetrics(metrics.Registry()),
		Logger:      log,
		Credentials: creds,
	})
	defer loader.Close()

	opts := modelserver.Options{
		Addr: net.JoinHostPort(f.Host, strconv.Itoa(f.Port)),
		Manager: modelserver.ManagerOptions{
			Loaders:           modelserver.Loaders{modelserver.KindPS: psshard.NewLoader(metrics.Fresh), modelserver.KindEntry: loader.Load},
			LoadThreads:       f.NumLoadThreads,
			MaxLoadRetries:    f.MaxNumLoadRetries,
			LoadRetryInterval: time.Duration(f.LoadRetryIntervalMicros) * time.Microsecond,
		},
		ConfigFile:             f.ModelConfigFile,
		ConfigPollInterval:     time.Duration(f.ModelConfigFilePollWaitSeconds) * time.Second,
		FileSystemPollInterval: time.Duration(f.FileSystemPollWaitSeconds) * time.Second,
		Metrics:                metrics,
		Logger:                 log,
		ServerOptions:          serverOpts,
	}
	var cfg = modelserver.SingleModelConfig(f.ModelName, f.ModelBasePath)
	switch {
	case f.ModelConfigFile != "":
		cfg = nil // New reads the file
	case f.ModelBasePath == "":
		cfg = nil
		log.Warn("no --model_config_file nor --model_base_path: serving no model until a HandleReloadConfigRequest")
	}
	srv, err := modelserver.New(cfg, opts)
	if err != nil {
		if k := errkind.Of(err); k == errkind.Value || k == errkind.NotFound {
			return cli.Usage(err)
		}
		return err
	}
	statusURL := ""
	if f.StatusAddr != "" {
		st, err := agentstatus.Listen(f.StatusAddr, modelserver.StatusHandler(metrics), log)
		if err != nil {
			srv.Stop(context.Background())
			return err
		}
		st.Start()
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), statusStopTimeout)
			defer cancel()
			st.Stop(sctx)
		}()
		statusURL = st.URL()
	}
	if err := srv.Start(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "model_server serving on %s\n", srv.Addr())
	if statusURL != "" {
		fmt.Fprintf(stdout, "status %s (/metrics, /healthz, /debug/pprof/)\n", statusURL)
	}
	log.Info("model server started", "addr", srv.Addr(), "status", statusURL, "agent", agentAddr, "config_file", f.ModelConfigFile)
	if ready != nil {
		ready(srv.Addr(), statusURL)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Wait() }()
	var serveErr error
	select {
	case <-ctx.Done():
		log.Info("stopping", "grace", f.ShutdownGrace)
	case serveErr = <-served:
		log.Error("serving failed", "err", serveErr)
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), f.ShutdownGrace)
	defer cancel()
	if err := srv.Stop(stopCtx); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	if serveErr != nil {
		return serveErr
	}
	log.Info("stopped")
	return nil
}
