// Command ps runs a parameter server of the training side (pkg/ps): the ParameterServer gRPC
// service holding embedding tables, index --index of --num_ps, until SIGTERM or SIGINT.
//
// It takes RunnerConfig's flags (runner_utils, as cmd/train does, so that a job's processes share
// one command line) and its own (cpu_training.yaml PSFlags). Tables come from --table_config (a
// monolith.ps.PSConfig in protobuf text format) and from the workers' CreateTables calls. It
// listens on --host:--port (port 0: a free one) and prints the address; with --discovery_type
// given it registers itself as ps.<index> with that service discovery (zk, primus, mlp, consul:
// runner_utils' get_discovery), waits until the discovery answers with it, and deregisters when it
// stops. The status endpoint (--status_addr) serves /metrics, /healthz and /debug/pprof/.
//
// With --sync_model_name it runs real-time parameter sync (pkg/paramsync): every --sync_interval
// it pushes the embeddings its tables updated since the last push to the serving replicas of
// <sync_model_name>:ps_<index>, from --sync_targets or the HeartBeat of the agent at
// --sync_agent_addr, and once more when it stops.
//
// Exit status: 0 after a stop by SIGTERM or SIGINT (the short calls in flight get --grace_period to
// finish; a Save, Restore or Barrier/AllReduce wait in flight is cut short at once, UNAVAILABLE, a
// Save leaving no files, so that the process stops within a second even then), 2 for a bad command
// line or table config (every size in it has a bound: pkg/ps's package doc lists them), 1 for a
// failure at run time (the port taken, the discovery unreachable).
package main

import (
	"context"
	"io"
	"log/slog"

	cputrainingspec "github.com/monolith-go/monolith/gen/spec/native_training/cpu_training"
	"github.com/monolith-go/monolith/internal/cli"
	"github.com/monolith-go/monolith/pkg/runconfig"
	"github.com/monolith-go/monolith/pkg/trainenv"
)

const name = "ps"

const description = "Run a parameter server: embedding tables served over gRPC (Lookup, ApplyGradients, Save, Restore, " +
	"Stats, Barrier, Health), registered with the job's service discovery, pushing its updates to the serving replicas " +
	"of its shard with --sync_model_name, until SIGTERM."

// cmdFlags is the command line: the RunnerConfig's flags and the command's own, both from specs.
type cmdFlags struct {
	cli.Common
	runconfig.RunnerFlags
	cputrainingspec.PSFlags
}

// deps is what run takes from its process; tests replace it.
type deps struct {
	// env is the environment the service discovery reads (nil: the process's).
	env trainenv.Env
	// ready, when set, is told the server's address once it serves (and is registered).
	ready func(addr string)
}

func main() {
	cli.Main(cli.KillOnSecondSignal, func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
		return run(ctx, args, stdout, stderr, deps{})
	})
}

// run runs the command until ctx ends and returns its exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, d deps) int {
	var c cmdFlags
	return cli.Run(name, description, &c, &c.LogLevel, args, stdout, stderr, func(log *slog.Logger) error {
		if d.env == nil {
			d.env = trainenv.FromOS()
		}
		return cli.OneLine(serve(ctx, c, func(flag string) bool { return cli.FlagGiven(args, flag) }, stdout, log, d))
	})
}
