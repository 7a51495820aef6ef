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
	"time"

	agentrun "github.com/monolith-go/monolith/pkg/agent/run"
	agentstatus "github.com/monolith-go/monolith/pkg/agent/status"
	agentv3 "github.com/monolith-go/monolith/pkg/agent/v3"
	"github.com/monolith-go/monolith/pkg/agent/v3/inproc"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/tfs"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkfake"
)

//go:embed example.conf
var exampleConf []byte

// The demo's deployment: the model, its sub graphs and where this container sits.
const (
	demoModel    = "demo_model"
	demoShardID  = "0"
	demoNumShard = "2"
	demoPod      = "demo-0"
	// demoStep is how often the fake TF Serving moves each model version one state on
	// (UNKNOWN -> START -> LOADING -> AVAILABLE), so /status shows the progress for a moment.
	demoStep = 300 * time.Millisecond
	// demoSync is how often the demo agent advertises what TF Serving has AVAILABLE (30 s in
	// production).
	demoSync = time.Second
	// demoZKServers is the ZooKeeper the demo's status names: example.conf's zk_servers is a
	// server nothing listens on, the demo's ZooKeeper is zkfake in this process.
	demoZKServers = "in-process"
)

var demoSubGraphs = []string{"entry", "ps_0", "ps_1", "ps_2", "ps_3"}

// runDemo runs agent v3 on the built-in example.conf against an in-process ZooKeeper holding a
// demo model and an in-process fake TF Serving, through the same entry point as --conf.
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
	// The demo's environment, not the host's: this container is shard 0 of 2 (so the filters keep
	// the entry and the even PS shards); every port is a free one.
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
	if err := seedDemo(ctx, operator, *conf.Bzid, layout, filepath.Join(dir, "exported_models")); err != nil {
		return fmt.Errorf("demo: %w", err)
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
		return agentv3.New(&conf, agentv3.Options{
			ConfPath: p.ConfPath, TFSLog: p.TFSLog, ZK: agentZK, Host: "127.0.0.1", ModelConfigDir: dir,
			TFS: func(file string) (tfs.Process, error) {
				return inproc.New(file, inproc.Options{Port: port, StepInterval: demoStep, Logger: p.Logger}), nil
			},
			Reloader: reloader, SyncInterval: demoSync, Metrics: p.Metrics, Logger: p.Logger,
		})
	})
	return agentrun.Main(ctx, agentrun.Options{
		ConfFile: confFile, TFSLog: filepath.Join(dir, "tfs.log"), StatusAddr: c.StatusAddr, Env: env,
		Registry: reg, Logger: log, RecentErrors: ring,
		OnReady: func(r agentrun.Ready) {
			printDemo(stdout, r, confFile, layout)
			ready(r)
		},
	})
}

// seedDemo declares the demo model's saved models and publishes all of them into the layout, as an
// operator does with agentctl decl / pub.
func seedDemo(ctx context.Context, c zk.Client, bzid, layout, exportDir string) error {
	for _, sub := range demoSubGraphs {
		cfg := fmt.Sprintf(`{"model_base_path": %q, "version_policy": "latest"}`, filepath.Join(exportDir, demoModel, sub))
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
func printDemo(w io.Writer, r agentrun.Ready, confFile, layout string) {
	a, ok := r.Agent.(*agentv3.Agent)
	if !ok {
		return
	}
	tfsAddr := ""
	if p, ok := a.TFS().(*inproc.TFS); ok {
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
	fmt.Fprintf(w, `Monolith agent demo: agent v3 with an in-process ZooKeeper and TF Serving (nothing to install).

  agent.conf       %s (the built-in cmd/agent/example.conf)
  ZooKeeper        in-process fake; layout %s lists %s
  layout filters   %s (this container is shard %s of %s)
  TF Serving       in-process fake, gRPC %s; model config %s
  AgentService     %s (gRPC; HeartBeat answers the bound replicas' addresses)
`, confFile, layout, strings.Join(subs, ", "), strings.Join(filters, " | "), demoShardID, demoNumShard,
		tfsAddr, a.ModelConfigFile(), svc)
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
	fmt.Fprintln(w, "\nPress Ctrl-C to stop.")
}

// localAddr turns "[::]:port" (the AgentService listens on every address) into 127.0.0.1:port.
func localAddr(addr string) string {
	if i := strings.LastIndexByte(addr, ':'); i >= 0 {
		return "127.0.0.1" + addr[i:]
	}
	return addr
}
