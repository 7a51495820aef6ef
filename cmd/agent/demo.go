package main

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/monolith-go/monolith/pkg/agent/inprocserving"
	agentrun "github.com/monolith-go/monolith/pkg/agent/run"
	agentstatus "github.com/monolith-go/monolith/pkg/agent/status"
	"github.com/monolith-go/monolith/pkg/agentconf"
)

//go:embed example.conf
var exampleConf []byte

// The demo's deployment: the model, its sub graphs and where this container sits.
const (
	demoModel   = "demo_model"
	demoShardID = "0"
	// demoNumShard: this container is the only one, so the layout filters keep every PS shard and
	// the entry finds all its PS replicas here.
	demoNumShard = "1"
	demoPod      = "demo-0"
	// demoPredictBatch is the batch of the suggested tfs_client Predict.
	demoPredictBatch = 4
)

// demoSubGraphs are the export's sub-graphs (demoNumPS PS shards).
var demoSubGraphs = func() []string {
	subs := []string{"entry"}
	for i := range demoNumPS {
		subs = append(subs, fmt.Sprintf("ps_%d", i))
	}
	return subs
}()

// runDemo runs agent v3 on the built-in example.conf against an in-process ZooKeeper holding a
// demo model and an in-process model server (pkg/modelserver, as cmd/model_server) serving it
// (pkg/agent/inprocserving), through the same entry point as --conf. The model is trained here
// for a few seconds and exported into the user's cache directory, where the next run finds it.
func runDemo(ctx context.Context, c cmdFlags, stdout io.Writer, log *slog.Logger, ring *agentstatus.ErrorRing, ready func(agentrun.Ready)) error {
	// The demo's environment, not the host's: this container is shard 0 of 1 (so the filters keep
	// the entry and every PS shard); every port is a free one.
	env := agentconf.MapEnv(map[string]string{"MY_POD_NAME": demoPod, "SHARD_ID": demoShardID,
		"MONOLITH_HOST_SHARD_N": demoNumShard, "TCE_PSM": "monolith.demo"})
	cacheDir := demoCacheDir()
	fmt.Fprintf(stdout, "Preparing the demo model (cache %s) ...\n", cacheDir)
	model, err := demoModelExport(ctx, cacheDir, log)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped (Ctrl-C, --exit_after) while training
		}
		return err
	}
	if model.Cached {
		fmt.Fprintf(stdout, "Demo model: the export of an earlier run, global step %d (%s)\n\n", model.GlobalStep, model.Base)
	} else {
		fmt.Fprintf(stdout, "Demo model: trained %d steps and exported (%s)\n\n", model.GlobalStep, model.Base)
	}
	// The banner waits until the Predict it prints works.
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	return inprocserving.Run(ctx, inprocserving.Options{
		Conf: exampleConf, Env: env, StatusAddr: c.StatusAddr, RecentErrors: ring, Logger: log,
		Models: []inprocserving.Model{{Name: demoModel, Base: model.Base, SubGraphs: demoSubGraphs}},
		OnReady: func(r inprocserving.Ready) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := awaitPredict(ctx, r.TFSAddr, model.EntryDir); err != nil {
					if ctx.Err() != nil {
						return
					}
					log.Warn("demo: printing the banner, though its Predict does not work yet", "err", err)
				}
				printDemo(stdout, r, model)
				ready(r.Ready)
			}()
		},
	})
}

// printDemo says what the demo started and what to try.
func printDemo(w io.Writer, r inprocserving.Ready, model *demoExport) {
	subs := make([]string, len(demoSubGraphs))
	for i, s := range demoSubGraphs {
		subs[i] = demoModel + ":" + s
	}
	svc := r.AgentServiceAddr
	fmt.Fprintf(w, `Monolith agent demo: agent v3 with an in-process ZooKeeper and model server (nothing to install).

  agent.conf       %s (the built-in cmd/agent/example.conf)
  model            %s: a dnn on synthetic click logs, global step %d, exported as %s
  ZooKeeper        in-process fake; layout %s lists %s
  layout filters   %s (this container is shard %s of %s)
  TF Serving       in-process model_server, gRPC %s; model config %s
  AgentService     %s (gRPC; HeartBeat answers the bound replicas' addresses; the entry finds its PS through it)
`, r.ConfFile, demoModel, model.GlobalStep, model.Base, r.Layout, strings.Join(subs, ", "), strings.Join(r.Filters, " | "),
		demoShardID, demoNumShard, r.TFSAddr, r.ModelConfigFile, svc)
	if r.StatusURL != "" {
		fmt.Fprintf(w, "  status endpoint  %s (status page; /status, /readyz, /healthz, /metrics, /debug/pprof/, /debug/vars)\n", r.StatusURL)
	}
	fmt.Fprintln(w, "\nTry:")
	if u := r.StatusURL; u != "" {
		fmt.Fprintf(w, "  open %s/ in a browser   # the status page, refreshing itself\n", u)
		fmt.Fprintf(w, "  curl %s/status     # layout, models and their TF Serving states, bindings\n", u)
		fmt.Fprintf(w, "  curl %s/readyz     # 200 once ZooKeeper, the layout and TF Serving are ready\n", u)
		fmt.Fprintf(w, "  curl %s/metrics    # Prometheus metrics (RPCs, reloads, ZooKeeper)\n", u)
		fmt.Fprintf(w, "  curl %s/healthz\n", u)
	}
	fmt.Fprintf(w, "  bazel run //cmd/agent_client -- --conf=%s --target=%s --cmd_type=hb\n", r.ConfFile, svc)
	fmt.Fprintf(w, "  bazel run //cmd/tfs_client -- --conf=%s --target=%s --cmd_type=status --model_name=%s:entry\n", r.ConfFile, r.TFSAddr, demoModel)
	fmt.Fprintf(w, "  %s   # scores of %d random examples\n", predictCommand(r.TFSAddr, model.EntryDir), demoPredictBatch)
	fmt.Fprintln(w, "\nPress Ctrl-C to stop.")
}

// predictCommand is the tfs_client command whose Predict scores random examples of the model's
// features with the served entry.
func predictCommand(target, entryDir string) string {
	return fmt.Sprintf("bazel run //cmd/tfs_client -- --target=%s --model_name=%s:entry --input_type=example_batch --model_spec=%s --batch_size=%d --print_outputs",
		target, demoModel, entryDir, demoPredictBatch)
}
