// Command train trains a model without TensorFlow: the training runtime of Monolith's
// native_training (runner_utils' RunnerConfig, service discovery, the estimator loop with its
// checkpoints and the controller hook server) driving, over TFRecord files of Monolith Examples,
// either the sparse + dense recommendation model of pkg/trainer/dnn (--model=dnn, the default:
// embedding tables on parameter servers over gRPC, pooled per slot by the fused layout kernel, an
// MLP with the dot interaction) or a logistic regression (--model=logreg, pkg/trainer/logreg).
//
// With no --train_data it runs a self-contained demo: a deterministic synthetic click log
// (pkg/trainer/synth; for dnn its ids have latent factors, so that only embeddings do well, and
// the best achievable AUC is known) is written as TFRecords into a temporary directory, the model
// trains on it and is evaluated on a held-out stream. With --num_ps 0 (the default) the dnn's
// parameter servers run in this process (--local_ps of them, each on a loopback gRPC listener):
// `train` with no flags is a cluster of 2 parameter servers and 1 worker. It prints progress
// (step, examples/s, loss, train AUC, PS lookup latency) every --log_step_count_steps, the
// throughput with the time split between the step's phases, and ends with the line
// "eval auc=<x> best auc=<b> loss=<y> steps=<global step>" ("eval auc=<x> loss=<y> steps=<n>" on
// files). Checkpoints go to --model_dir (a new temporary directory when not given, printed) every
// --save_checkpoints_steps (100 unless a save interval is given), the last
// --checkpoints_max_to_keep kept; for dnn a checkpoint holds the dense parameters and, beside
// them, the tables' dump of the same step (<model_dir>/model.ckpt-<step>.embeddings/). A run with
// the same --model_dir resumes from its last checkpoint: the global step continues and (dnn) the
// input goes on at the batch the step had reached.
//
// A cluster of processes: cmd/ps processes and cmd/train workers (--num_ps, --num_workers,
// --index or --role) find each other through the service discovery (--discovery_type zk with
// --zk_server, primus with --tf_config, mlp, consul). The chief (worker 0) creates the tables,
// restores and saves the checkpoints and evaluates; the dense parameters stay synchronous across
// workers by an allreduce of their gradients on PS 0 (pkg/ps AllReduce).
//
// The run is local unless --discovery_type is given: then it registers itself as worker.<index>
// with that service discovery while it trains, and deregisters at the end. While training runs
// the chief's controller hook server (the reference's ServerHook) serves StopTraining,
// ResumeTraining, SaveCheckpoint and GetTrainingStatus; its address is in
// <model_dir>/controller_server_addr.txt. The status endpoint (--status_addr) serves Prometheus
// metrics.
//
// Exit status: 0 after training and evaluation, 2 for a bad command line or bad input (missing or
// corrupt data files, a bad pattern, an unwritable --model_dir, a bad --restore_dir), 1 for a
// failure at run time (a parameter server gone, a corrupt checkpoint, a discovery that cannot be
// reached).
package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"

	cputrainingspec "github.com/monolith-go/monolith/gen/spec/native_training/cpu_training"
	exporthooksspec "github.com/monolith-go/monolith/gen/spec/native_training/model_export/export_hooks"
	"github.com/monolith-go/monolith/internal/cli"
	"github.com/monolith-go/monolith/pkg/hooks/runhook"
	"github.com/monolith-go/monolith/pkg/runconfig"
	"github.com/monolith-go/monolith/pkg/trainenv"
)

const name = "train"

const description = "Train a recommendation model (embedding tables on parameter servers and an MLP, or a logistic " +
	"regression) on TFRecord files of Monolith Examples with the training runtime (run config, service discovery, " +
	"checkpoints, controller). Without --train_data it trains on a generated click log in an in-process cluster " +
	"(nothing to install) and prints the generator's best AUC and the model's eval AUC."

// cmdFlags is the command line: the RunnerConfig's flags and the command's own, both from specs.
type cmdFlags struct {
	cli.Common
	runconfig.RunnerFlags
	cputrainingspec.TrainFlags
	exporthooksspec.ExportHookFlags
}

// deps is what run takes from its process; tests replace it.
type deps struct {
	// env is the environment the run config and the service discovery read (nil: the process's).
	env trainenv.Env
	// setenv receives the run config's environment exports (nil: os.Setenv).
	setenv func(name, value string) error
	// hooks run in the training loop after the command's own (tests watch the run through them).
	hooks []runhook.Hook
}

func main() {
	cli.Main(cli.KillOnSecondSignal, func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
		return run(ctx, args, stdout, stderr, deps{})
	})
}

// run runs the command and returns its exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, d deps) int {
	var c cmdFlags
	return cli.Run(name, description, &c, &c.LogLevel, args, stdout, stderr, func(log *slog.Logger) error {
		if d.env == nil {
			d.env = trainenv.FromOS()
		}
		if d.setenv == nil {
			d.setenv = os.Setenv
		}
		return cli.OneLine(classify(train(ctx, c, cli.FlagGiven(args, "discovery_type"), stdout, log, d)))
	})
}

// classify makes an error of the input data a usage error, named by itself rather than by the
// layers of the loop it went through.
func classify(err error) error {
	var ie *inputError
	if errors.As(err, &ie) && !errors.As(err, new(cli.UsageError)) {
		return cli.Usage(ie)
	}
	return err
}
