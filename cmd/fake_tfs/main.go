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
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	servingconfig "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/config"
	faketfsspec "github.com/monolith-go/monolith/gen/spec/go/fake_tfs"
	"github.com/monolith-go/monolith/internal/cli"
	"github.com/monolith-go/monolith/pkg/tfs/faketfs"
)

// flags is the command line: the TF Serving flags the fake uses, those it accepts and ignores,
// its own (prefixed fake_) (specs/go/fake_tfs.yaml), and --log_format. --version is TF Serving's:
// alone it prints the build, with a value it is ignored.
type flags struct {
	cli.LogFlags
	faketfsspec.FakeTFSFlags
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
	if c.Version == faketfsspec.PrintVersion {
		fmt.Fprintln(stdout, cli.VersionLine("fake_tfs"))
		return 0
	}
	log, err := c.DefaultLogger(stderr, c.LogLevel)
	if err != nil {
		return cli.Exit("fake_tfs", err, stderr)
	}
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
