// Command fake_tfs is a stand-in for tensorflow_model_server: a real gRPC server with ModelService
// (GetModelStatus, HandleReloadConfigRequest) and PredictionService (GetModelMetadata, Predict)
// over the reference fake's model state machine (pkg/tfs/faketfs). It takes the command line the
// agent builds for TF Serving (pkg/agentconf CmdAndPort), so the agent drives it exactly as it
// drives the real server:
//
//	fake_tfs --model_config_file=models.config --port=8500 --rest_api_port=8501 \
//	    --archon_rpc_psm=... --enable_batching=true ...
//
// It loads --model_config_file at start (or serves --model_name from --model_base_path, as TF
// Serving does), re-reads it every --model_config_file_poll_wait_seconds when that is positive,
// and moves every version one state per --fake_step_interval (UNKNOWN -> START -> LOADING ->
// AVAILABLE). Versions are simulated, never discovered: base_path is not read (see
// pkg/tfs/faketfs). The TF Serving and archon flags it has no use for are accepted and ignored;
// any other flag is a usage error (exit status 2) and starts nothing. --version prints the build
// and exits, as TF Serving's does. SIGTERM or SIGINT stops it gracefully within
// --fake_shutdown_grace.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/alecthomas/kong"

	servingconfig "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/config"
	"github.com/monolith-go/monolith/internal/cli"
	"github.com/monolith-go/monolith/pkg/tfs/faketfs"
)

// tfsVersion is --version: alone it asks for the build (printVersion); --version=value is
// Monolith's TF Serving flag, accepted and ignored.
type tfsVersion string

// printVersion is the value of a --version given without a value.
const printVersion tfsVersion = "\x00print"

func (v *tfsVersion) Decode(ctx *kong.DecodeContext) error {
	if ctx.Scan.Peek().Type == kong.FlagValueToken {
		*v = tfsVersion(fmt.Sprint(ctx.Scan.Pop().Value))
		return nil
	}
	*v = printVersion
	return nil
}

func (tfsVersion) IsBool() bool { return true }

// ignored is a flag accepted for compatibility and ignored: --name and --name=anything.
type ignored string

func (i *ignored) Decode(ctx *kong.DecodeContext) error {
	if ctx.Scan.Peek().Type == kong.FlagValueToken {
		*i = ignored(fmt.Sprint(ctx.Scan.Pop().Value))
	}
	return nil
}

func (ignored) IsBool() bool { return true }

// flags is the command line: the TF Serving flags the fake uses, those it accepts and ignores,
// its own (prefixed fake_), and the project's common ones (--version, --log_format).
type flags struct {
	cli.LogFlags
	Version                        tfsVersion `name:"version" group:"TF Serving" help:"Alone: print the build and exit. With a value (--version=v1.2, Monolith's TF Serving flag the agent passes): ignored."`
	Port                           int        `name:"port" default:"8500" group:"TF Serving" help:"gRPC port (0: a free port)."`
	RestAPIPort                    int        `name:"rest_api_port" default:"0" group:"TF Serving" help:"REST API port; accepted, the fake serves no REST API."`
	ModelConfigFile                string     `name:"model_config_file" group:"TF Serving" help:"ModelServerConfig in text format to load at start."`
	ModelConfigFilePollWaitSeconds int        `name:"model_config_file_poll_wait_seconds" default:"0" group:"TF Serving" help:"Seconds between re-reads of --model_config_file; 0 reads it once."`
	ModelName                      string     `name:"model_name" default:"default" group:"TF Serving" help:"Model to serve when there is no --model_config_file."`
	ModelBasePath                  string     `name:"model_base_path" group:"TF Serving" help:"Base path of --model_name (never read: versions are simulated); serves version 1."`

	GRPCSocketPath                         ignored `name:"grpc_socket_path" group:"TF Serving, ignored" help:"Ignored."`
	RestAPINumThreads                      ignored `name:"rest_api_num_threads" group:"TF Serving, ignored" help:"Ignored."`
	RestAPITimeoutInMs                     ignored `name:"rest_api_timeout_in_ms" group:"TF Serving, ignored" help:"Ignored."`
	EnableBatching                         ignored `name:"enable_batching" group:"TF Serving, ignored" help:"Ignored."`
	AllowVersionLabelsForUnavailableModels ignored `name:"allow_version_labels_for_unavailable_models" group:"TF Serving, ignored" help:"Ignored."`
	BatchingParametersFile                 ignored `name:"batching_parameters_file" group:"TF Serving, ignored" help:"Ignored."`
	NumLoadThreads                         ignored `name:"num_load_threads" group:"TF Serving, ignored" help:"Ignored."`
	NumUnloadThreads                       ignored `name:"num_unload_threads" group:"TF Serving, ignored" help:"Ignored."`
	MaxNumLoadRetries                      ignored `name:"max_num_load_retries" group:"TF Serving, ignored" help:"Ignored."`
	LoadRetryIntervalMicros                ignored `name:"load_retry_interval_micros" group:"TF Serving, ignored" help:"Ignored."`
	FileSystemPollWaitSeconds              ignored `name:"file_system_poll_wait_seconds" group:"TF Serving, ignored" help:"Ignored: base paths are never read."`
	FlushFilesystemCaches                  ignored `name:"flush_filesystem_caches" group:"TF Serving, ignored" help:"Ignored."`
	TensorflowSessionParallelism           ignored `name:"tensorflow_session_parallelism" group:"TF Serving, ignored" help:"Ignored."`
	TensorflowIntraOpParallelism           ignored `name:"tensorflow_intra_op_parallelism" group:"TF Serving, ignored" help:"Ignored."`
	TensorflowInterOpParallelism           ignored `name:"tensorflow_inter_op_parallelism" group:"TF Serving, ignored" help:"Ignored."`
	SSLConfigFile                          ignored `name:"ssl_config_file" group:"TF Serving, ignored" help:"Ignored: the fake serves plaintext only."`
	PlatformConfigFile                     ignored `name:"platform_config_file" group:"TF Serving, ignored" help:"Ignored."`
	PerProcessGPUMemoryFraction            ignored `name:"per_process_gpu_memory_fraction" group:"TF Serving, ignored" help:"Ignored."`
	AllowGrowth                            ignored `name:"allow_growth" group:"TF Serving, ignored" help:"Ignored."`
	SavedModelTags                         ignored `name:"saved_model_tags" group:"TF Serving, ignored" help:"Ignored."`
	GRPCChannelArguments                   ignored `name:"grpc_channel_arguments" group:"TF Serving, ignored" help:"Ignored."`
	GRPCMaxThreads                         ignored `name:"grpc_max_threads" group:"TF Serving, ignored" help:"Ignored."`
	EnableModelWarmup                      ignored `name:"enable_model_warmup" group:"TF Serving, ignored" help:"Ignored."`
	MonitoringConfigFile                   ignored `name:"monitoring_config_file" group:"TF Serving, ignored" help:"Ignored."`
	RemoveUnusedFieldsFromBundleMetagraph  ignored `name:"remove_unused_fields_from_bundle_metagraph" group:"TF Serving, ignored" help:"Ignored."`
	EnableSignatureMethodNameCheck         ignored `name:"enable_signature_method_name_check" group:"TF Serving, ignored" help:"Ignored."`
	XLACPUCompilationEnabled               ignored `name:"xla_cpu_compilation_enabled" group:"TF Serving, ignored" help:"Ignored."`
	EnableProfiler                         ignored `name:"enable_profiler" group:"TF Serving, ignored" help:"Ignored."`

	ArchonRPCPSM                  ignored `name:"archon_rpc_psm" group:"Monolith TF Serving, ignored" help:"Ignored."`
	ArchonRPCCluster              ignored `name:"archon_rpc_cluster" group:"Monolith TF Serving, ignored" help:"Ignored."`
	ArchonPort                    ignored `name:"archon_port" group:"Monolith TF Serving, ignored" help:"Ignored."`
	ArchonEntryToPSRPCTimeout     ignored `name:"archon_entry_to_ps_rpc_timeout" group:"Monolith TF Serving, ignored" help:"Ignored."`
	ArchonEntryToPSLongConnNum    ignored `name:"archon_entry_to_ps_long_conn_num" group:"Monolith TF Serving, ignored" help:"Ignored."`
	ArchonEntryToPSRPCRetry       ignored `name:"archon_entry_to_ps_rpc_retry" group:"Monolith TF Serving, ignored" help:"Ignored."`
	ArchonAsyncDispatcherThreads  ignored `name:"archon_async_dispatcher_threads" group:"Monolith TF Serving, ignored" help:"Ignored."`
	ArchonEntryToPSLongConnEnable ignored `name:"archon_entry_to_ps_long_conn_enable" group:"Monolith TF Serving, ignored" help:"Ignored."`
	MetricsNamespacePrefix        ignored `name:"metrics_namespace_prefix" group:"Monolith TF Serving, ignored" help:"Ignored."`
	LogConf                       ignored `name:"log_conf" group:"Monolith TF Serving, ignored" help:"Ignored."`
	ConfFile                      ignored `name:"conf_file" group:"Monolith TF Serving, ignored" help:"Ignored."`

	Host               string        `name:"fake_host" default:"" group:"Fake" help:"Address to listen on; empty: every interface (IPv4 and IPv6), as TF Serving."`
	StepInterval       time.Duration `name:"fake_step_interval" default:"10ms" group:"Fake" help:"Each version moves one state (UNKNOWN -> START -> LOADING -> AVAILABLE, UNLOADING -> END) per interval."`
	NewVersionInterval time.Duration `name:"fake_new_version_interval" default:"30s" group:"Fake" help:"Adds version last+1 to a random model (not specific) this often, as the reference fake does; 0 never."`
	Seed               uint64        `name:"fake_seed" default:"0" group:"Fake" help:"Seed of the random choice of the model that gets a new version."`
	ShutdownGrace      time.Duration `name:"fake_shutdown_grace" default:"5s" group:"Fake" help:"On SIGTERM/SIGINT, how long in-flight RPCs may take before connections are closed."`
	LogLevel           string        `name:"fake_log_level" default:"info" enum:"debug,info,warn,error" group:"Fake" help:"Log level (${enum})."`
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, nil)
	stop()
	os.Exit(code)
}

// run runs the fake until ctx is done (a signal) or serving fails, and returns the exit status:
// 0, 1 when serving fails, 2 on a bad command line or config. ready, when set, gets the address
// once the server listens.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, ready func(addr string)) int {
	var c flags
	if code, done := cli.Parse("fake_tfs", description, &c, args, stdout, stderr, 2); done {
		return code
	}
	if c.Version == printVersion {
		fmt.Fprintln(stdout, cli.VersionLine("fake_tfs"))
		return 0
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.LogLevel)); err != nil {
		fmt.Fprintln(stderr, "fake_tfs:", err)
		return 2
	}
	log := c.Logger(stderr, level)
	// Packages that log through slog's default logger log in the same format.
	slog.SetDefault(log)
	if c.RestAPIPort != 0 {
		log.Info("the fake serves no REST API; --rest_api_port ignored", "rest_api_port", c.RestAPIPort)
	}

	var cfg *servingconfig.ModelServerConfig
	switch {
	case c.ModelConfigFile != "" && c.ModelBasePath != "":
		fmt.Fprintln(stderr, "fake_tfs: --model_config_file and --model_base_path are mutually exclusive")
		return 2
	case c.ModelBasePath != "":
		cfg = faketfs.SingleModelConfig(c.ModelName, c.ModelBasePath, 1)
	case c.ModelConfigFile == "":
		log.Warn("no --model_config_file nor --model_base_path: serving no model until a HandleReloadConfigRequest")
	}
	srv, err := faketfs.New(cfg, faketfs.Options{
		Addr:               net.JoinHostPort(c.Host, strconv.Itoa(c.Port)),
		StepInterval:       c.StepInterval,
		NewVersionInterval: c.NewVersionInterval,
		ConfigFile:         c.ModelConfigFile,
		ConfigPollInterval: time.Duration(c.ModelConfigFilePollWaitSeconds) * time.Second,
		Seed:               c.Seed,
		Logger:             log,
	})
	if err != nil {
		fmt.Fprintln(stderr, "fake_tfs:", err)
		return 2
	}
	if err := srv.Start(); err != nil {
		fmt.Fprintln(stderr, "fake_tfs:", err)
		return 1
	}
	if ready != nil {
		ready(srv.Addr())
	}
	served := make(chan error, 1)
	go func() { served <- srv.Wait() }()
	select {
	case <-ctx.Done():
		log.Info("stopping", "grace", c.ShutdownGrace)
	case err := <-served:
		log.Error("serving failed", "err", err)
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), c.ShutdownGrace)
	defer cancel()
	if err := srv.Stop(stopCtx); err != nil {
		log.Error("stopped", "err", err)
		return 1
	}
	log.Info("stopped")
	return 0
}

const description = "A fake TensorFlow Serving (ModelService, PredictionService) for driving the agent without TF Serving."
