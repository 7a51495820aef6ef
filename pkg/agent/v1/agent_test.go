package agentv1

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	pb "github.com/monolith-go/monolith/gen/pb/monolith/serving/agent_service"
	utilsspec "github.com/monolith-go/monolith/gen/spec/agent_service/utils"
	"github.com/monolith-go/monolith/internal/faketfsbin"
	"github.com/monolith-go/monolith/internal/leakcheck"
	agentbase "github.com/monolith-go/monolith/pkg/agent/base"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/agentsvc"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pytext"
	"github.com/monolith-go/monolith/pkg/replica"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkfake"
	"github.com/monolith-go/monolith/pkg/zk/zkreal"
	"github.com/monolith-go/monolith/pkg/zk/zktest"
)

type wantNode struct {
	t    ProcessType
	main bool
}

// TestNewGraph: the process graph of each deploy type, with the reference's command lines, ports,
// environment and logs.
func TestNewGraph(t *testing.T) {
	for _, c := range []struct {
		deploy     string
		denseAlone bool
		want       []wantNode
	}{
		{"mixed", false, []wantNode{{PS, false}, {Entry, true}}},
		{"mixed", true, []wantNode{{PS, false}, {Dense, false}, {Entry, true}}},
		{"entry", false, []wantNode{{Entry, true}}},
		{"entry", true, []wantNode{{Entry, true}}},
		{"ps", false, []wantNode{{PS, true}}},
		{"dense", true, []wantNode{{Dense, true}}},
	} {
		t.Run(fmt.Sprintf("%s dense_alone=%v", c.deploy, c.denseAlone), func(t *testing.T) {
			conf := newConf(t, nil, func(f *utilsspec.AgentConfig) { f.DeployType, f.DenseAlone = ptr(c.deploy), c.denseAlone })
			logDir := t.TempDir()
			a, err := New(conf, Options{TFSBinary: "/opt/tfs", TFSLog: filepath.Join(logDir, "tfs.std.log"),
				Env: []string{"PATH=/bin", "PORT2=1"}, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			nodes := a.ProcessMgr().SubProcs()
			if len(nodes) != len(c.want) {
				t.Fatalf("%d nodes, want %d", len(nodes), len(c.want))
			}
			for i, w := range c.want {
				n := nodes[i]
				if n.Type() != w.t || n.IsTCEMain() != w.main || len(n.SubProcs()) != 0 {
					t.Errorf("node %d: %v main=%v, want %v main=%v", i, n.Type(), n.IsTCEMain(), w.t, w.main)
				}
				st := n.Type().serverType()
				cfgFile := filepath.Join(a.dir, st+"_model_config.pbtxt")
				cmd, port, err := agentbase.CmdAndPort(conf, agentbase.CmdOptions{ServerType: st, ConfigFile: cfgFile, TFSBinary: "/opt/tfs"})
				if err != nil {
					t.Fatal(err)
				}
				if n.Cmd() != cmd || n.Port() != port {
					t.Errorf("%v: command %q port %d, want %q %d", w.t, n.Cmd(), n.Port(), cmd, port)
				}
				msc, err := conf.ModelServerConfig(st)
				if err != nil {
					t.Fatal(err)
				}
				if b, err := os.ReadFile(cfgFile); err != nil || string(b) != pytext.Format(msc) {
					t.Errorf("%v: model config %q (%v), want %q", w.t, b, err, pytext.Format(msc))
				}
				wantEnv := "PATH=/bin PORT2=1"
				if w.t == Entry {
					wantEnv = fmt.Sprintf("PATH=/bin PORT2=%d", *conf.AgentPort)
				}
				if got := strings.Join(n.Env(), " "); got != wantEnv {
					t.Errorf("%v: env %q, want %q", w.t, got, wantEnv)
				}
				if got, want := n.Log().Path(), filepath.Join(logDir, n.Type().LogPrefix()+"_tfs.std.log"); got != want {
					t.Errorf("%v: log %s, want %s", w.t, got, want)
				}
			}
			if want := map[string]int{"ps": *conf.TFSPSPort, "entry": *conf.TFSEntryPort}; c.deploy == "mixed" {
				for i, n := range []*ProcessNode{nodes[0], nodes[len(nodes)-1]} {
					if n.Port() != want[n.Type().serverType()] {
						t.Errorf("node %d: port %d, want %v", i, n.Port(), want)
					}
				}
			}
			a.Stop()
			if _, err := os.Stat(a.dir); !os.IsNotExist(err) {
				t.Fatalf("model config directory left after Stop: %v", err)
			}
		})
	}
}

func TestNewNodeFromConfig(t *testing.T) {
	conf := newConf(t, nil, func(f *utilsspec.AgentConfig) { f.DeployType = ptr("mixed") })
	confDir := t.TempDir()
	for _, c := range []struct {
		name    string
		t       ProcessType
		opts    NodeOptions
		wantCmd string
		wantLog bool
		kind    errkind.Kind // of the error; Unknown for none
	}{
		{"proxy without proxy.conf", Proxy, NodeOptions{ConfPath: confDir, ProxyBinary: "/p", TFSLog: "/l/t.log"},
			fmt.Sprintf("/p --port=%d --grpc_target=localhost:%d &", *conf.ProxyPort, *conf.TFSEntryPort), true, errkind.Unknown},
		{"output to stdout under MLP_POD_NAME", PS, NodeOptions{TFSLog: "/l/t.log", Env: []string{"MLP_POD_NAME=x"}, ConfigFile: "/c"},
			"", false, errkind.Unknown},
		{"output to stdout without a log", PS, NodeOptions{ConfigFile: "/c"}, "", false, errkind.Unknown},
		{"unknown type", Unkonwn, NodeOptions{}, "", false, errkind.Precondition},
		{"proxy without conf path", Proxy, NodeOptions{}, "", false, errkind.Type},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.opts.Logger = quiet
			n, err := NewNodeFromConfig(conf, c.t, c.opts)
			if c.kind != errkind.Unknown {
				if err == nil || errkind.Of(err) != c.kind {
					t.Fatalf("got %v, want kind %v", err, c.kind)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.wantCmd != "" && n.Cmd() != c.wantCmd {
				t.Errorf("command %q, want %q", n.Cmd(), c.wantCmd)
			}
			if (n.Log() != nil) != c.wantLog {
				t.Errorf("log %v, want a log: %v", n.Log(), c.wantLog)
			}
			if c.opts.Env == nil && len(n.Env()) != len(os.Environ()) {
				t.Errorf("env: %d entries, want the agent's %d", len(n.Env()), len(os.Environ()))
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := New(nil, Options{}); errkind.Of(err) != errkind.Value {
		t.Fatalf("New(nil): %v", err)
	}
	// The reference's else branch makes unified a dense deploy, which has no dense port there.
	conf := newConf(t, nil, func(f *utilsspec.AgentConfig) { f.DeployType = ptr("unified") })
	if _, err := New(conf, Options{Logger: quiet}); err == nil {
		t.Fatal("New under unified succeeded")
	}
}

// agentOptions runs fake_tfs with fast timings.
func agentOptions(t *testing.T, client zk.Client) Options {
	dir := t.TempDir()
	return Options{
		TFSBinary: faketfsbin.Path(t), TFSLog: filepath.Join(dir, "tfs.std.log"), Dir: dir, ZK: client,
		Env: []string{"PATH=" + os.Getenv("PATH")}, ZKSessionTimeout: 4 * time.Second,
		Replica: replica.ManagerOptions{Updater: replica.UpdaterOptions{UpdateInterval: 20 * time.Millisecond}},
		Timing:  fastTiming(), Logger: quiet,
	}
}

func startAgent(t *testing.T, conf *agentconf.AgentConfig, opts Options) *Agent {
	t.Helper()
	a, err := New(conf, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	if err := a.Start(tctx(t, 60*time.Second)); err != nil {
		t.Fatal(err)
	}
	return a
}

func nodePids(a *Agent) map[ProcessType]int {
	out := map[ProcessType]int{}
	for _, n := range Flatten(a.ProcessMgr().SubProcs()...) {
		out[n.Type()] = n.Pid()
	}
	return out
}

// heartBeat asks the agent's service for the PS address table.
func heartBeat(t *testing.T, a *Agent, st pb.ServerType) map[string][]string {
	t.Helper()
	c, err := agentsvc.Dial(fmt.Sprintf("127.0.0.1:%d", a.AgentServicePort()), agentsvc.ClientOptions{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	resp, err := c.HeartBeat(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for k, v := range resp.GetAddresses() {
		out[k] = v.GetAddress()
	}
	return out
}

// checkServing: every process runs and serves its port, the sets the entry waited for are up, and
// the agent service answers the PS addresses.
func checkServing(t *testing.T, a *Agent, conf *agentconf.AgentConfig) {
	t.Helper()
	for _, n := range Flatten(a.ProcessMgr().SubProcs()...) {
		if _, exited := n.Poll(); exited || n.Pid() == 0 || !agentconf.CheckPortOpen(context.Background(), n.Port()) {
			t.Fatalf("%v not serving (pid %d, port %d)", n.Type(), n.Pid(), n.Port())
		}
	}
	rm := a.ReplicaManager()
	if conf.Deploy == agentconf.DeployMixed {
		if !rm.IsPSSetStarted() || (conf.DenseAlone && !rm.IsDenseSetStarted()) {
			t.Fatal("the entry runs but the PS or dense set is not up")
		}
		psAddr := fmt.Sprintf("127.0.0.1:%d", *conf.TFSPSPort)
		want := fmt.Sprint(map[string][]string{"ps:0": {psAddr}, "ps:1": {psAddr}})
		if got := fmt.Sprint(heartBeat(t, a, pb.ServerType_PS)); got != want {
			t.Fatalf("HeartBeat(PS) = %s, want %s", got, want)
		}
	}
}

// checkLogs: each process wrote its serving log.
func checkLogs(t *testing.T, opts Options, types ...ProcessType) {
	t.Helper()
	for _, tp := range types {
		p := agentbase.ServingLog{Prefix: tp.LogPrefix(), TFSLog: opts.TFSLog}.Path()
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			t.Errorf("serving log %s: %v (empty: %v)", p, err, err == nil && st.Size() == 0)
		}
	}
}

// TestAgentOnFakeZK runs the real process graph (fake_tfs) over zkfake: the entry comes up after
// the PS and dense sets, a killed child takes the graph down, and nothing survives.
func TestAgentOnFakeZK(t *testing.T) {
	for _, c := range []struct {
		name       string
		deploy     string
		denseAlone bool
		victim     ProcessType
	}{
		{"mixed, PS dies", "mixed", false, PS},
		{"mixed with dense, dense dies", "mixed", true, Dense},
		{"mixed with dense, entry dies", "mixed", true, Entry},
		{"ps", "ps", false, PS},
		{"dense", "dense", true, Dense},
	} {
		t.Run(c.name, func(t *testing.T) {
			leakcheck.Check(t)
			noChildren(t)
			client := zkfake.New()
			t.Cleanup(func() { client.Close() })
			conf := newConf(t, nil, func(f *utilsspec.AgentConfig) { f.DeployType, f.DenseAlone = ptr(c.deploy), c.denseAlone })
			opts := agentOptions(t, client)
			a := startAgent(t, conf, opts)
			checkServing(t, a, conf)
			pids := nodePids(a)
			if err := syscall.Kill(pids[c.victim], syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			err := a.WaitForTermination(tctx(t, 30*time.Second))
			if !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), c.victim.String()+" (pid") {
				t.Fatalf("WaitForTermination: %v, want the exit of %v", err, c.victim)
			}
			for tp, p := range pids {
				if !gone(p) {
					t.Errorf("%v (pid %d) survived", tp, p)
				}
			}
			var types []ProcessType
			for tp := range pids {
				types = append(types, tp)
			}
			checkLogs(t, opts, types...)
		})
	}
}

// TestAgentStopsOnContext: the command's signal ends ctx; the children stop gracefully (fake_tfs
// exits 0 on SIGTERM) and WaitForTermination returns nil.
func TestAgentStopsOnContext(t *testing.T) {
	leakcheck.Check(t)
	noChildren(t)
	client := zkfake.New()
	t.Cleanup(func() { client.Close() })
	conf := newConf(t, nil, func(f *utilsspec.AgentConfig) { f.DeployType = ptr("mixed") })
	a := startAgent(t, conf, agentOptions(t, client))
	checkServing(t, a, conf)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(10*time.Millisecond, cancel)
	if err := a.WaitForTermination(ctx); err != nil {
		t.Fatalf("WaitForTermination: %v", err)
	}
	for _, n := range Flatten(a.ProcessMgr().SubProcs()...) {
		if code, exited := n.Poll(); !exited || code != 0 || !gone(n.Pid()) {
			t.Errorf("%v: exited %v, returncode %d, reaped %v", n.Type(), exited, code, gone(n.Pid()))
		}
	}
	if a.ReplicaManager() == nil {
		t.Fatal("replica manager dropped")
	}
	if err := a.Start(tctx(t, 10*time.Second)); err == nil {
		t.Fatal("Start after Stop succeeded")
	}
	a.Stop()
}

// TestAgentStartFailure: a TF Serving binary that cannot run fails Start and leaves nothing.
func TestAgentStartFailure(t *testing.T) {
	leakcheck.Check(t)
	noChildren(t)
	client := zkfake.New()
	t.Cleanup(func() { client.Close() })
	conf := newConf(t, nil, func(f *utilsspec.AgentConfig) { f.DeployType = ptr("mixed") })
	opts := agentOptions(t, client)
	opts.TFSBinary = filepath.Join(t.TempDir(), "no_such_tfs")
	a, err := New(conf, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(tctx(t, 30*time.Second)); err == nil || !strings.Contains(err.Error(), "no_such_tfs") {
		t.Fatalf("Start: %v", err)
	}
	if err := a.WaitForTermination(tctx(t, 10*time.Second)); err != nil {
		t.Fatalf("WaitForTermination after a failed Start: %v", err)
	}
	if _, err := os.Stat(a.dir); !os.IsNotExist(err) {
		t.Fatal("model config directory left")
	}
}

// TestAgentStopDuringStart: Stop while the entry waits for a PS set that never comes ends Start.
func TestAgentStopDuringStart(t *testing.T) {
	leakcheck.Check(t)
	noChildren(t)
	client := zkfake.New()
	t.Cleanup(func() { client.Close() })
	conf := newConf(t, nil, func(f *utilsspec.AgentConfig) { f.DeployType = ptr("entry") })
	a, err := New(conf, agentOptions(t, client))
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(100*time.Millisecond, a.Stop)
	errc := make(chan error, 1)
	go func() { errc <- a.Start(tctx(t, 30*time.Second)) }()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Start: %v, want context.Canceled", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Start did not return after Stop")
	}
	if pid := nodePids(a)[Entry]; pid != 0 {
		t.Fatalf("the entry started (pid %d) without a PS set", pid)
	}
}

// TestAgentRealZooKeeper runs the process graph over a real ZooKeeper server, the agent holding its
// own session (zk_servers with a chroot per subtest).
func TestAgentRealZooKeeper(t *testing.T) {
	srv := zktest.Start(t, zktest.WithTickTime(200*time.Millisecond))
	observe := func(t *testing.T, chroot string) zk.Client {
		c, err := zkreal.Connect(tctx(t, 20*time.Second), zkreal.Options{Servers: []string{srv.Addr()}, Chroot: chroot,
			SessionTimeout: 4 * time.Second, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	ownNodes := func(t *testing.T, c zk.Client, a *Agent) map[string]bool {
		out := map[string]bool{}
		for _, p := range a.ReplicaManager().Updater().Paths() {
			st, err := c.Exists(tctx(t, 10*time.Second), p)
			if err != nil {
				t.Fatal(err)
			}
			out[p] = st != nil
		}
		return out
	}
	for _, c := range []struct {
		name, chroot string
		victim       ProcessType // 0: stopped through ctx
	}{
		{"stop", "/stop", 0},
		{"entry dies", "/entry_dies", Entry},
		{"PS dies", "/ps_dies", PS},
	} {
		t.Run(c.name, func(t *testing.T) {
			leakcheck.Check(t)
			noChildren(t)
			conf := newConf(t, nil, func(f *utilsspec.AgentConfig) {
				f.DeployType, f.DenseAlone, f.ZKServers = ptr("mixed"), true, ptr(srv.Addr()+c.chroot)
			})
			a := startAgent(t, conf, agentOptions(t, nil))
			checkServing(t, a, conf)
			observer := observe(t, c.chroot)
			registered := ownNodes(t, observer, a)
			if len(registered) != 4 { // ps:0, ps:1, dense:0, entry:0
				t.Fatalf("registered %v, want 4 nodes", registered)
			}
			for p, ok := range registered {
				if !ok {
					t.Fatalf("%s not in ZooKeeper", p)
				}
			}
			pids := nodePids(a)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if c.victim == 0 {
				cancel()
			} else if err := syscall.Kill(pids[c.victim], syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			err := a.WaitForTermination(ctx)
			switch {
			case c.victim == 0 && err != nil:
				t.Fatalf("WaitForTermination: %v", err)
			case c.victim != 0 && (!errors.Is(err, ErrExited) || !strings.Contains(err.Error(), c.victim.String())):
				t.Fatalf("WaitForTermination: %v, want the exit of %v", err, c.victim)
			}
			for tp, p := range pids {
				if !gone(p) {
					t.Errorf("%v (pid %d) survived", tp, p)
				}
			}
			// The agent's session is closed: its ephemeral nodes are gone.
			for p, ok := range ownNodes(t, observer, a) {
				if ok {
					t.Errorf("%s still in ZooKeeper after Stop", p)
				}
			}
		})
	}
}

// Without zk_servers an agent that must connect itself fails with a Value error.
func TestStartWithoutZKServers(t *testing.T) {
	conf := newConf(t, nil, func(f *utilsspec.AgentConfig) { f.DeployType = ptr("ps") })
	a, err := New(conf, Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(tctx(t, 10*time.Second)); errkind.Of(err) != errkind.Value {
		t.Fatalf("Start without zk_servers: %v, want a Value error", err)
	}
}
