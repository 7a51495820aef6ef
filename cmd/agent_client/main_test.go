package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/internal/refcases"
	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkfake"
	"github.com/monolith-go/monolith/pkg/zk/zkreal"
	"github.com/monolith-go/monolith/pkg/zk/zktest"
)

// world is a ZooKeeper the reference's command lines run against.
type world struct {
	zkServers string    // what agent.conf's zk_servers says
	admin     zk.Client // the test's own session: setup, dumps, the agent's mirror
	dial      dialFunc  // how the command connects
}

// fakeWorld is an in-memory ZooKeeper; every command gets a session of its own.
func fakeWorld(t *testing.T) world {
	srv := zkfake.NewServer()
	admin := srv.Client()
	t.Cleanup(func() { admin.Close() })
	return world{
		zkServers: "127.0.0.1:2181",
		admin:     admin,
		dial:      func(context.Context, string, *slog.Logger) (zk.Client, error) { return srv.Client(), nil },
	}
}

// replay runs every command line of testdata/cases.json and compares the exit status, the
// output and (where recorded) the ZooKeeper tree with what the reference did.
func replay(t *testing.T, w world) {
	f := loadFixture(t)
	export := writeExport(t, f)
	confs := map[string]string{
		"":          writeConf(t, w.zkServers),
		"base_name": writeConf(t, w.zkServers, "base_name iptv_ex\n"),
	}
	confs["plain"] = confs[""]
	for _, c := range loadCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			resetTree(t, w.admin, f, c.Delete)
			conf, ok := confs[c.Conf]
			if !ok {
				t.Fatalf("unknown conf %q", c.Conf)
			}
			args := []string{"--conf=" + conf}
			for _, a := range c.Args {
				if strings.Contains(a, "{port}") {
					a = strings.ReplaceAll(a, "{port}", strconv.Itoa(startAgent(t, w.admin, f.Bzid)))
				}
				args = append(args, strings.ReplaceAll(a, "{export}", export))
			}
			var stdout, stderr bytes.Buffer
			code := run(tctx(t), args, &stdout, &stderr, testEnv(), w.dial)
			got := strings.ReplaceAll(stdout.String(), export, "{export}")
			if code != c.Exit {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, c.Exit, stderr.String())
			}
			if got != c.Stdout {
				t.Errorf("output differs from the reference's\ngot:\n%s\nwant:\n%s", got, c.Stdout)
			}
			if c.Tree {
				if d := refcases.DiffTrees(refcases.DumpTrees(tctx(t), t, w.admin, "/"+f.Bzid), c.TreeAfter); d != "" {
					t.Errorf("ZooKeeper tree differs from the reference's:\n%s", d)
				}
			}
		})
	}
}

// TestReference replays the reference's recorded command lines on an in-memory ZooKeeper and an
// in-process AgentService over gRPC.
func TestReference(t *testing.T) {
	leakcheck.Check(t)
	replay(t, fakeWorld(t))
}

// TestReferenceRealZooKeeper replays them end to end: a real ZooKeeper server, the command's own
// connection code (dialZK) and the AgentService over gRPC.
func TestReferenceRealZooKeeper(t *testing.T) {
	leakcheck.Check(t)
	srv := zktest.Start(t)
	admin, err := zkreal.Connect(tctx(t), zkreal.Options{Servers: []string{srv.Addr()}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	replay(t, world{zkServers: srv.Addr(), admin: admin, dial: dialZK})
}

// vanishing hides nodes from Get and Children, as if they were deleted while being listed.
type vanishing struct {
	zk.Client
	gone map[string]bool
}

func (v vanishing) Get(ctx context.Context, p string) ([]byte, zk.Stat, error) {
	if v.gone[p] {
		return nil, zk.Stat{}, &zk.PathError{Op: "get", Path: p, Err: zk.ErrNoNode}
	}
	return v.Client.Get(ctx, p)
}

func (v vanishing) Children(ctx context.Context, p string) ([]string, error) {
	if v.gone[p] {
		return nil, &zk.PathError{Op: "children", Path: p, Err: zk.ErrNoNode}
	}
	return v.Client.Children(ctx, p)
}

func strp(s string) *string { return &s }

// TestCommands covers what the reference's recorded runs do not: bad command lines and input
// (exit 2, before anything is contacted), failed calls (exit 1) and the intended differences.
func TestCommands(t *testing.T) {
	leakcheck.Check(t)
	f := loadFixture(t)
	var refHB string
	for _, c := range loadCases(t) {
		if c.Name == "hb_ps" {
			refHB = c.Stdout
		}
	}
	badReplica := "/gip/service/iptv_ex/ps:0/0"
	tests := []struct {
		name    string
		args    []string // --conf is added unless an argument names it; {port} is the agent's port
		conf    []string // extra agent.conf lines
		rawConf string   // the whole agent.conf instead
		// setup changes the fixture's tree (on the admin session) before the command.
		setup func(t *testing.T, c zk.Client)
		// wrap changes the command's ZooKeeper session.
		wrap       func(zk.Client) zk.Client
		dialErr    error
		wantExit   int
		wantStdout string
		wantStderr string
		wantTree   func(t *testing.T, tree map[string]string)
	}{
		{name: "help", args: []string{"--help"}, wantStdout: "Usage: agent_client"},
		{name: "cmd_type not supported", args: []string{"--cmd_type=meta"}, wantExit: 2, wantStderr: "--cmd_type"},
		{name: "no conf", args: []string{"--conf=", "--cmd_type=addr", "--model_name=iptv_ex"}, wantExit: 2, wantStderr: "--conf is needed"},
		{name: "conf missing", args: []string{"--conf=/nonexistent/agent.conf", "--cmd_type=addr"}, wantExit: 2, wantStderr: "agent.conf"},
		{name: "gr needs a model", args: []string{"--cmd_type=gr", "--port=1"}, wantExit: 2, wantStderr: "gr needs a model name"},
		{name: "load needs a model", args: []string{"--cmd_type=load"}, wantExit: 2, wantStderr: "load needs a model name"},
		{name: "unload needs a model", args: []string{"--cmd_type=unload"}, wantExit: 2, wantStderr: "unload needs a model name"},
		{name: "model name with slash", args: []string{"--cmd_type=load", "--model_name=a/b"}, wantExit: 2, wantStderr: `model name "a/b"`},
		{name: "clean lock", args: []string{"--cmd_type=clean", "--args=lock"}, wantExit: 2, wantStderr: "lock is not support!"},
		{name: "clean info", args: []string{"--cmd_type=clean", "--args=info"}, wantExit: 2, wantStderr: "info is not support!"},
		{name: "info needs model_dir", args: []string{"--cmd_type=get", "--args=info"}, wantExit: 2, wantStderr: "--model_dir"},
		{name: "info of a missing export", args: []string{"--cmd_type=get", "--args=info", "--model_dir=/nonexistent/export"}, wantExit: 2, wantStderr: "/nonexistent/export is not exists"},
		{name: "no zk_servers", rawConf: "bzid gip\ndeploy_type mixed\n", args: []string{"--cmd_type=get", "--args=res"}, wantExit: 2, wantStderr: "no zk_servers"},
		{name: "timeout not positive", args: []string{"--timeout=0s"}, wantExit: 2, wantStderr: "--timeout"},
		{name: "ZooKeeper unreachable", args: []string{"--cmd_type=get", "--args=res"}, dialErr: errors.New("connection refused"), wantExit: 1, wantStderr: "connect to ZooKeeper 127.0.0.1:2181: connection refused"},
		{name: "agent unreachable", args: []string{"--cmd_type=hb", "--target=127.0.0.1:1"}, wantExit: 1, wantStderr: "HeartBeat"},
		{name: "hb at the conf's agent_port", conf: []string{"agent_port {port}\n"}, args: []string{"--cmd_type=hb"}, wantStdout: refHB},
		{name: "hb at --target", args: []string{"--cmd_type=hb", "--port=1", "--target=127.0.0.1:{port}"}, wantStdout: refHB},
		{
			name: "unreadable replica", args: []string{"--cmd_type=addr", "--model_name=iptv_ex"},
			setup: func(t *testing.T, c zk.Client) {
				if _, err := c.Set(tctx(t), badReplica, []byte("{not json"), zk.AnyVersion); err != nil {
					t.Fatal(err)
				}
			},
			wantExit: 1, wantStderr: badReplica,
		},
		{
			name: "unknown replica state", args: []string{"--cmd_type=addr", "--model_name=m"},
			setup: func(t *testing.T, c zk.Client) {
				rm := datadef.NewReplicaMeta()
				rm.Address, rm.Stat = strp("10.9.9.9:1"), 7
				if _, err := c.Create(tctx(t), "/gip/service/m/ps:0/0", rm.Serialize(), zk.CreateOptions{MakePath: true}); err != nil {
					t.Fatal(err)
				}
			},
			wantStdout: "/gip/service/m/ps:0/0\tarchon_address: None\taddress: 10.9.9.9:1\tstate: 7\n",
		},
		{
			name: "replicas vanishing while listed", args: []string{"--cmd_type=addr", "--model_name=iptv_ex"},
			wrap: func(c zk.Client) zk.Client {
				return vanishing{c, map[string]bool{
					"/gip/service/iptv_ex/lq:default": true, "/gip/service/iptv_ex/ps:1": true, "/gip/service/iptv_ex/ps:0/1": true,
				}}
			},
			wantStdout: "/gip/service/iptv_ex/entry:0/0\tarchon_address: 10.0.0.4:9100\taddress: 10.0.0.4:9000\tstate: AVAILABLE\n" +
				"/gip/service/iptv_ex/entry:1/0\tarchon_address: None\taddress: 主机-7:9000\tstate: AVAILABLE\n" +
				"/gip/service/iptv_ex/ps:0/0\tarchon_address: 10.0.0.1:9101\taddress: 10.0.0.1:9001\tstate: AVAILABLE\n" +
				"/gip/service/iptv_ex/ps:10/0\tarchon_address: None\taddress: 10.0.0.6:9001\tstate: AVAILABLE\n",
		},
		{
			name: "resources vanishing while listed", args: []string{"--cmd_type=get", "--args=res"},
			wrap: func(c zk.Client) zk.Client {
				return vanishing{c, map[string]bool{"/gip/resource/0:0": true, "/gip/resource/1:0": true}}
			},
			wantStdout: "{}\n",
		},
		{
			name: "clean of a tree that does not exist", args: []string{"--cmd_type=clean", "--args=pub"},
			setup: func(t *testing.T, c zk.Client) {
				if err := c.Delete(tctx(t), "/gip/publish", zk.DeleteOptions{Recursive: true}); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "clean deletes what it can", args: []string{"--cmd_type=clean", "--args=portal"},
			setup: func(t *testing.T, c zk.Client) {
				if _, err := c.Create(tctx(t), "/gip/portal/iptv_ex/child", nil, zk.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			wantExit: 1, wantStderr: "/gip/portal/iptv_ex",
			wantTree: func(t *testing.T, tree map[string]string) {
				if _, ok := tree["/gip/portal/other"]; ok {
					t.Error("/gip/portal/other was not deleted")
				}
				if _, ok := tree["/gip/portal/iptv_ex"]; !ok {
					t.Error("/gip/portal/iptv_ex (with a child) was deleted")
				}
			},
		},
		{
			name: "unload of a node with children", args: []string{"--cmd_type=unload", "--model_name=iptv_ex"},
			setup: func(t *testing.T, c zk.Client) {
				if _, err := c.Create(tctx(t), "/gip/portal/iptv_ex/child", nil, zk.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			wantExit: 1, wantStderr: "unload iptv_ex",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := zkfake.NewServer()
			admin := srv.Client()
			defer admin.Close()
			resetTree(t, admin, f, nil)
			if tc.setup != nil {
				tc.setup(t, admin)
			}
			port := ""
			expand := func(s string) string {
				if strings.Contains(s, "{port}") && port == "" {
					port = strconv.Itoa(startAgent(t, admin, f.Bzid))
				}
				return strings.ReplaceAll(s, "{port}", port)
			}
			var extra []string
			for _, l := range tc.conf {
				extra = append(extra, expand(l))
			}
			args := []string{"--conf=" + writeConf(t, "127.0.0.1:2181", extra...)}
			if tc.rawConf != "" {
				p := filepath.Join(t.TempDir(), "raw.conf")
				if err := os.WriteFile(p, []byte(tc.rawConf), 0o644); err != nil {
					t.Fatal(err)
				}
				args[0] = "--conf=" + p
			}
			for _, a := range tc.args {
				if strings.HasPrefix(a, "--conf=") {
					args = args[1:]
				}
			}
			for _, a := range tc.args {
				args = append(args, expand(a))
			}
			dial := func(_ context.Context, servers string, _ *slog.Logger) (zk.Client, error) {
				if tc.dialErr != nil {
					return nil, tc.dialErr
				}
				c := zk.Client(srv.Client())
				if tc.wrap != nil {
					c = tc.wrap(c)
				}
				return c, nil
			}
			var stdout, stderr bytes.Buffer
			code := run(tctx(t), args, &stdout, &stderr, testEnv(), dial)
			if code != tc.wantExit {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tc.wantExit, stderr.String())
			}
			switch {
			case tc.name == "help":
				if !strings.Contains(stdout.String(), tc.wantStdout) {
					t.Errorf("help output %q lacks %q", stdout.String(), tc.wantStdout)
				}
			case stdout.String() != tc.wantStdout:
				t.Errorf("output:\n%s\nwant:\n%s", stdout.String(), tc.wantStdout)
			}
			if !strings.Contains(stderr.String(), tc.wantStderr) {
				t.Errorf("stderr %q lacks %q", stderr.String(), tc.wantStderr)
			}
			if tc.wantTree != nil {
				tc.wantTree(t, refcases.DumpTrees(tctx(t), t, admin, "/gip"))
			}
		})
	}
}

func TestMain(m *testing.M) {
	// The packages the commands use log through slog.Default; keep test output readable.
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	os.Exit(m.Run())
}
