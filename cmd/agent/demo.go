package main

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	agentrun "github.com/monolith-go/monolith/pkg/agent/run"
	agentstatus "github.com/monolith-go/monolith/pkg/agent/status"
	agentv3 "github.com/monolith-go/monolith/pkg/agent/v3"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/tfs"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkfake"
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
	// demoSync is how often the demo agent advertises what the model server has AVAILABLE (30 s in
	// production), and how often the entry asks the agent's HeartBeat for its PS replicas.
	demoSync = time.Second
	// demoZKServers is the ZooKeeper the demo's status names: example.conf's zk_servers is a
	// server nothing listens on, the demo's ZooKeeper is zkfake in this process.
	demoZKServers = "in-process"
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
// demo model and an in-process model server (pkg/modelserver, as cmd/model_server) serving it,
// through the same entry point as --conf. The model is trained here for a few seconds and exported
// into the user's cache directory, where the next run finds it.
func runDemo(ctx context.Context, c cmdFlags, stdout io.Writer, log *slog.Logger, ring *agentstatus.ErrorRing, ready func(agentrun.Ready)) error {
	dir, err := os.MkdirTemp("", "monolith-agent-demo")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	confFile := filepath.Join(dir, "agent.conf")
	if err := os.WriteFile(confFile, exampleConf, 0o644); err != nil {
		return err
	}
	// The demo's environment, not the host's: this container is shard 0 of 1 (so the filters keep
	// the entry and every PS shard); every port is a free one.
	env := agentconf.MapEnv(map[string]string{"MY_POD_NAME": demoPod, "SHARD_ID": demoShardID,
		"MONOLITH_HOST_SHARD_N": demoNumShard, "TCE_PSM": "monolith.demo"})

	srv := zkfake.NewServer()
	agentZK, operator := srv.Client(), srv.Client()
	defer agentZK.Close()
	defer operator.Close()
	conf, err := agentrun.LoadConfig(agentrun.Options{ConfFile: confFile, Env: env, Logger: log})
	if err != nil {
		return err
	}
	layout, err := conf.LayoutPath()
	if err != nil {
		return &agentrun.ConfigError{Err: err}
	}
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
	if err := seedDemo(ctx, operator, *conf.Bzid, layout, model.Base); err != nil {
		return fmt.Errorf("demo: %w", err)
	}

	// The entries ask the agent for their PS replicas, once it listens.
	var agent atomic.Pointer[agentv3.Agent]
	agentAddr := func() string {
		if a := agent.Load(); a != nil && a.AgentServiceAddr() != "" {
			return localAddr(a.AgentServiceAddr())
		}
		return ""
	}
	reg := agentrun.NewRegistry()
	reg.Register(3, func(p agentrun.Params) (agentrun.Agent, error) {
		port := *p.Config.TFSPortGRPC
		reloader, err := agentv3.DialReloader(fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			return nil, err
		}
		// The agent's copy of the config names the in-process ZooKeeper it gets as Options.ZK,
		// which is all it reports of zk_servers.
		conf, servers := *p.Config, demoZKServers
		conf.ZKServers = &servers
		a, err := agentv3.New(&conf, agentv3.Options{
			ConfPath: p.ConfPath, TFSLog: p.TFSLog, ZK: agentZK, Host: "127.0.0.1", ModelConfigDir: dir,
			TFS: func(file string) (tfs.Process, error) {
				return newModelServerTFS(file, port, agentAddr, p.Logger), nil
			},
			Reloader: reloader, SyncInterval: demoSync, Metrics: p.Metrics, Logger: p.Logger,
		})
		if err == nil {
			agent.Store(a)
		}
		return a, err
	})
	return agentrun.Main(ctx, agentrun.Options{
		ConfFile: confFile, TFSLog: filepath.Join(dir, "tfs.log"), StatusAddr: c.StatusAddr, Env: env,
		Registry: reg, Logger: log, RecentErrors: ring,
		OnReady: func(r agentrun.Ready) {
			printDemo(stdout, r, confFile, layout, model)
			ready(r)
		},
	})
}

// seedDemo declares the demo model's saved models (the sub-graphs of the export at base) and
// publishes all of them into the layout, as an operator does with agentctl decl / pub.
func seedDemo(ctx context.Context, c zk.Client, bzid, layout, base string) error {
	for _, sub := range demoSubGraphs {
		cfg := fmt.Sprintf(`{"model_base_path": %q, "version_policy": "latest"}`, filepath.Join(base, sub))
		if _, err := c.Create(ctx, fmt.Sprintf("/%s/saved_models/%s/%s", bzid, demoModel, sub), []byte(cfg), zk.CreateOptions{MakePath: true}); err != nil {
			return err
		}
		if err := c.EnsurePath(ctx, layout+"/"+demoModel+":"+sub); err != nil {
			return err
		}
	}
	return nil
}

// printDemo says what the demo started and what to try.
func printDemo(w io.Writer, r agentrun.Ready, confFile, layout string, model *demoExport) {
	a, ok := r.Agent.(*agentv3.Agent)
	if !ok {
		return
	}
	tfsAddr := ""
	if p, ok := a.TFS().(*modelServerTFS); ok {
		tfsAddr = p.Addr()
	}
	subs := make([]string, len(demoSubGraphs))
	for i, s := range demoSubGraphs {
		subs[i] = demoModel + ":" + s
	}
	var filters []string
	if st := a.Status(context.Background()).Layout; st != nil {
		filters = st.Filters
	}
	svc := localAddr(a.AgentServiceAddr())
	fmt.Fprintf(w, `Monolith agent demo: agent v3 with an in-process ZooKeeper and model server (nothing to install).

  agent.conf       %s (the built-in cmd/agent/example.conf)
  model            %s: a dnn on synthetic click logs, global step %d, exported as %s
  ZooKeeper        in-process fake; layout %s lists %s
  layout filters   %s (this container is shard %s of %s)
  TF Serving       in-process model_server, gRPC %s; model config %s
  AgentService     %s (gRPC; HeartBeat answers the bound replicas' addresses; the entry finds its PS through it)
`, confFile, demoModel, model.GlobalStep, model.Base, layout, strings.Join(subs, ", "), strings.Join(filters, " | "),
		demoShardID, demoNumShard, tfsAddr, a.ModelConfigFile(), svc)
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
	fmt.Fprintf(w, "  bazel run //cmd/agent_client -- --conf=%s --target=%s --cmd_type=hb\n", confFile, svc)
	fmt.Fprintf(w, "  bazel run //cmd/tfs_client -- --conf=%s --target=%s --cmd_type=status --model_name=%s:entry\n", confFile, tfsAddr, demoModel)
	fmt.Fprintf(w, "  %s   # scores of %d random examples\n", predictCommand(tfsAddr, model.EntryDir), demoPredictBatch)
	fmt.Fprintln(w, "\nPress Ctrl-C to stop.")
}

// predictCommand is the tfs_client command whose Predict scores random examples of the model's
// features with the served entry.
func predictCommand(target, entryDir string) string {
	return fmt.Sprintf("bazel run //cmd/tfs_client -- --target=%s --model_name=%s:entry --input_type=example_batch --model_spec=%s --batch_size=%d --print_outputs",
		target, demoModel, entryDir, demoPredictBatch)
}

// localAddr turns "[::]:port" (the AgentService listens on every address) into 127.0.0.1:port.
func localAddr(addr string) string {
	if i := strings.LastIndexByte(addr, ':'); i >= 0 {
		return "127.0.0.1" + addr[i:]
	}
	return addr
}
