// Command online shows Monolith's online training on one machine, with nothing to install
// (pkg/online): an in-process Kafka broker; a producer of a drifting synthetic click stream (each
// event stamped with its event time); the trainer, a dnn on --num_ps parameter servers over
// loopback gRPC, reading the stream with the Kafka client; parameter sync pushing its embedding
// updates every --sync_interval into a model server behind agent v3; and a scorer sending the
// newest events to Predict on the served model and on a copy exported at --warmup and never pushed
// to (frozen before the drift at --drift_after).
//
//	bazel run //cmd:online
//	bazel run //cmd:online -- --rate=20000 --duration=2m --drift_after=40s
//
// It prints a row every --report_every: events produced and trained, lag (events produced, not yet
// trained), the served and frozen AUC on the newest --window events (scored before they are
// served), and the freshness p50/p99 of the events served since the last row (event produced ->
// the first moment every PS sub-graph of the served model includes it). It ends with one line:
//
//	online: events=<n> freshness p50=<a>s p99=<b>s served auc=<x> frozen auc=<y>
//
// Exit status: 0 when the run completes (or SIGINT/SIGTERM stops it early: no summary then), 2
// for a bad command line, 1 for a failure at run time.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	onlinespec "github.com/monolith-go/monolith/gen/spec/go/online"
	"github.com/monolith-go/monolith/internal/cli"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/online"
)

const name = "online"

const description = "Online training on one machine, measured: an in-process Kafka broker, a drifting synthetic stream, the trainer on parameter servers, parameter sync into a model server behind agent v3, and the served model's AUC and freshness against a copy frozen before the drift."

type cmdFlags struct {
	cli.Common
	onlinespec.OnlineFlags
}

func main() { cli.Main(cli.IgnoreSecondSignal, run) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var c cmdFlags
	return cli.Run(name, description, &c, &c.LogLevel, args, stdout, stderr, func(log *slog.Logger) error {
		cfg := online.DefaultConfig()
		f := c.OnlineFlags
		cfg.Rate, cfg.Duration, cfg.Warmup, cfg.DriftAfter = f.Rate, f.Duration, f.Warmup, f.DriftAfter
		cfg.SyncInterval, cfg.ReportEvery, cfg.Window = f.SyncInterval, f.ReportEvery, f.Window
		cfg.BatchSize, cfg.NumPS, cfg.Dim = f.BatchSize, f.NumPS, f.EmbeddingDim
		cfg.WorkDir, cfg.StatusAddr, cfg.Logger = f.WorkDir, f.StatusAddr, log
		_, err := online.Run(ctx, cfg, stdout)
		switch {
		case errkind.Of(err) == errkind.Value:
			return cli.Usage(err)
		case err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled):
			fmt.Fprintln(stdout, "online: stopped by a signal")
			return nil
		}
		return cli.OneLine(err)
	})
}
