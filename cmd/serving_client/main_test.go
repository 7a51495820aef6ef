package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	clientspec "github.com/monolith-go/monolith/gen/spec/agent_service/client"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkfake"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// fakeDial opens sessions on one in-memory server and counts them.
type fakeDial struct {
	srv      *zkfake.Server
	calls    int
	wrap     func(zk.Client) zk.Client
	lastAddr string
}

func (d *fakeDial) dial(ctx context.Context, servers string, log *slog.Logger) (zk.Client, error) {
	d.calls++
	d.lastAddr = servers
	var c zk.Client = d.srv.Client()
	if d.wrap != nil {
		c = d.wrap(c)
	}
	return c, nil
}

// cli runs the command and returns its exit status, stdout and stderr.
func (d *fakeDial) cli(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut, d.dial)
	return code, out.String(), errOut.String()
}

func tctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func getData(t *testing.T, c zk.Client, path string) string {
	t.Helper()
	data, _, err := c.Get(tctx(t), path)
	if err != nil {
		t.Fatalf("get %s: %v", path, err)
	}
	return string(data)
}

func mustCreate(t *testing.T, c zk.Client, path string, data []byte) {
	t.Helper()
	if _, err := c.Create(tctx(t), path, data, zk.CreateOptions{MakePath: true}); err != nil {
		t.Fatal(err)
	}
}

func replica(stat datadef.ModelState) []byte {
	r := datadef.NewReplicaMeta()
	r.Stat = stat
	return r.Serialize()
}

// TestFlagErrors: the reference's checks, each a usage error (exit status 2; the reference's absl
// exits 1) before anything is contacted.
func TestFlagErrors(t *testing.T) {
	base := []string{"--zk_servers=127.0.0.1:2181", "--bzid=gip", "--model_name=m"}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--bzid=gip", "--model_name=m"}, "zk_servers is None"},
		{[]string{"--zk_servers=h:1", "--model_name=m"}, "bzid is None"},
		{[]string{"--zk_servers=h:1", "--bzid=gip"}, "--model_name is required"},
		{append(base, "--cmd_type=load"), "--model_dir is required for load"},
		{append(base, "--cmd_type=bogus"), "--cmd_type must be one of"},
		{append(base, "--unknown"), "unknown flag --unknown"},
		{append(base, "--num_shard=x"), "num_shard"},
		{append(base, "--timeout=0s"), "--timeout 0s is not positive"},
	}
	for _, c := range cases {
		d := &fakeDial{srv: zkfake.NewServer()}
		code, out, errOut := d.cli(c.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, c.want) || d.calls != 0 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q, %d dials; want exit 2 and %q, no dial", c.args, code, out, errOut, d.calls, c.want)
		}
	}
	d := &fakeDial{srv: zkfake.NewServer()}
	if code, out, _ := d.cli("--help"); code != 0 || !strings.Contains(out, "--zk_servers") || !strings.Contains(out, "--cmd_type") {
		t.Errorf("--help: exit %d, %q", code, out)
	}
}

// TestScenario: load, status as publishes and replicas appear, unload, on one in-memory tree,
// each step a separate run of the command.
func TestScenario(t *testing.T) {
	leakcheck.Check(t)
	srv := zkfake.NewServer()
	d := &fakeDial{srv: srv}
	admin := srv.Client()
	defer admin.Close()
	common := []string{"--zk_servers=10.0.0.1:2181,10.0.0.2:2181", "--bzid=gip", "--model_name=m1"}
	step := func(wantCode int, wantOut, wantErr string, args ...string) {
		t.Helper()
		code, out, errOut := d.cli(append(append([]string{}, common...), args...)...)
		if code != wantCode || out != wantOut || !strings.Contains(errOut, wantErr) {
			t.Fatalf("%q: exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr with %q", args, code, out, errOut, wantCode, wantOut, wantErr)
		}
	}

	// An unknown model: nothing anywhere (the reference failed with NoNodeError), and nothing is
	// created by asking.
	step(0, "LoadSate(portal=None, publish=None, service={})\n", "")
	if st, _ := admin.Exists(tctx(t), "/gip"); st != nil {
		t.Fatal("status created /gip")
	}
	if d.lastAddr != "10.0.0.1:2181,10.0.0.2:2181" {
		t.Errorf("dialled %q", d.lastAddr)
	}

	step(0, "", "", "--cmd_type=load", "--model_dir=/data/m1", "--num_shard=3")
	want := `{"model_name": "m1", "model_dir": "/data/m1", "ckpt": null, "num_shard": 3, "action": "NONE", "spec_replicas": []}`
	if got := getData(t, admin, "/gip/portal/m1"); got != want {
		t.Fatalf("portal node:\n got %s\nwant %s", got, want)
	}
	step(1, "", "m1 has exists", "--cmd_type=load", "--model_dir=/data/other")
	if got := getData(t, admin, "/gip/portal/m1"); got != want {
		t.Fatalf("a failed load changed the node: %s", got)
	}
	step(0, "LoadSate(portal=True, publish=None, service={})\n", "", "--cmd_type=status")

	// Publishes: one of this model, one of another, one malformed (skipped with a warning).
	mustCreate(t, admin, "/gip/publish/bad", nil)
	mustCreate(t, admin, "/gip/publish/1:0:other", nil)
	step(0, "LoadSate(portal=True, publish=None, service={})\n", "skipping a publish node", "--cmd_type=get")
	mustCreate(t, admin, "/gip/publish/0:0:m1", nil)
	mustCreate(t, admin, "/gip/service/m1/ps:0/0", replica(datadef.StateAvailable))
	mustCreate(t, admin, "/gip/service/m1/ps:0/1", replica(datadef.StateLoading))
	mustCreate(t, admin, "/gip/service/m1/entry:0/0", replica(datadef.StateAvailable))
	mustCreate(t, admin, "/gip/service/other/ps:0/0", replica(datadef.StateEnd))
	step(0, "LoadSate(portal=True, publish=True, service={'entry:0:0': 30, 'ps:0:0': 30, 'ps:0:1': 20})\n", "")

	// Unload deletes the node and what is under it.
	mustCreate(t, admin, "/gip/portal/m1/child", nil)
	step(0, "", "", "--cmd_type=unload")
	if st, _ := admin.Exists(tctx(t), "/gip/portal/m1"); st != nil {
		t.Fatal("unload left the portal node")
	}
	step(0, "", "m1 not exists, nothing to do!", "--cmd_type=unload")

	// A checkpoint is stored; an empty one is None.
	step(0, "", "", "--cmd_type=load", "--model_dir=/data/m1", "--ckpt=ckpt-100")
	want = `{"model_name": "m1", "model_dir": "/data/m1", "ckpt": "ckpt-100", "num_shard": -1, "action": "NONE", "spec_replicas": []}`
	if got := getData(t, admin, "/gip/portal/m1"); got != want {
		t.Fatalf("portal node:\n got %s\nwant %s", got, want)
	}
	if d.calls != 9 {
		t.Errorf("%d sessions opened, want one per run (9)", d.calls)
	}
}

func TestLoadStateString(t *testing.T) {
	yes := true
	cases := []struct {
		st   loadState
		want string
	}{
		{loadState{}, "LoadSate(portal=None, publish=None, service={})"},
		{loadState{portal: &yes, service: []replicaStat{{"ps:0:0", 30}}}, "LoadSate(portal=True, publish=None, service={'ps:0:0': 30})"},
		// Keys as Python's repr writes them (value printed by Python).
		{loadState{publish: &yes, service: []replicaStat{{"ps:0:0", 30}, {"entry:1:0", 10}, {"it's", 0}}},
			`LoadSate(portal=None, publish=True, service={'ps:0:0': 30, 'entry:1:0': 10, "it's": 0})`},
	}
	for _, c := range cases {
		if got := c.st.String(); got != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
	}
}

// failing fails Exists, Children or Get with a connection loss.
type failing struct {
	zk.Client
	op string
}

func (f failing) Exists(ctx context.Context, path string) (*zk.Stat, error) {
	if f.op == "exists" {
		return nil, zk.ErrConnectionLoss
	}
	return f.Client.Exists(ctx, path)
}

func (f failing) Children(ctx context.Context, path string) ([]string, error) {
	if f.op == "children" {
		return nil, zk.ErrConnectionLoss
	}
	return f.Client.Children(ctx, path)
}

func (f failing) Get(ctx context.Context, path string) ([]byte, zk.Stat, error) {
	if f.op == "get" {
		return nil, zk.Stat{}, zk.ErrConnectionLoss
	}
	return f.Client.Get(ctx, path)
}

// TestErrors: ZooKeeper failures and bad data are errors (exit 1), never "not exists" or a
// partial status.
func TestErrors(t *testing.T) {
	cases := []struct {
		op, cmd, model string
		setup          func(c zk.Client)
		want           string
		kind           errkind.Kind
	}{
		{op: "exists", cmd: "load", want: "connection lost", kind: errkind.Runtime},
		{op: "exists", cmd: "unload", want: "connection lost", kind: errkind.Runtime},
		{op: "exists", cmd: "status", want: "connection lost", kind: errkind.Runtime},
		{op: "children", cmd: "status", want: "children of /gip/publish: connection lost", kind: errkind.Runtime},
		{op: "get", cmd: "status", want: "get /gip/service/m/ps:0/0: connection lost", kind: errkind.Runtime,
			setup: func(c zk.Client) { mustCreateCtx(c, "/gip/service/m/ps:0/0", replica(30)) }},
		{cmd: "status", want: "replica /gip/service/m/ps:0/0: ", kind: errkind.Type,
			setup: func(c zk.Client) { mustCreateCtx(c, "/gip/service/m/ps:0/0", []byte(`{"stat": "x"}`)) }},
		{cmd: "load", model: "a/b", want: `model name "a/b"`, kind: errkind.Value},
		{cmd: "unload", model: "/etc", want: `model name "/etc"`, kind: errkind.Value},
		{cmd: "status", model: "..", want: `model name ".."`, kind: errkind.Value},
		{cmd: "load", model: "m\x00", want: `model name "m\x00"`, kind: errkind.Value},
	}
	for _, c := range cases {
		leakcheck.Check(t)
		srv := zkfake.NewServer()
		base := srv.Client()
		if c.setup != nil {
			c.setup(base)
		}
		model := c.model
		if model == "" {
			model = "m"
		}
		f := clientspec.ServingClientFlags{CmdType: c.cmd, Bzid: "gip", ZKServers: "x:1", ModelName: model, ModelDir: "/d", NumShard: -1, Timeout: time.Second}
		var out bytes.Buffer
		err := execute(context.Background(), f, failing{Client: base, op: c.op}, &out, quiet)
		if err == nil || !strings.Contains(err.Error(), c.want) || errkind.Of(err) != c.kind || out.Len() != 0 {
			t.Errorf("%s on %s failure: %v (kind %v), stdout %q; want %q of kind %v", c.cmd, c.op, err, errkind.Of(err), out.String(), c.want, c.kind)
		}
		base.Close()
	}
}

func mustCreateCtx(c zk.Client, path string, data []byte) {
	if _, err := c.Create(context.Background(), path, data, zk.CreateOptions{MakePath: true}); err != nil {
		panic(err)
	}
}

// TestTimeout: --timeout bounds the connection too.
func TestTimeout(t *testing.T) {
	var errOut bytes.Buffer
	blocked := func(ctx context.Context, servers string, log *slog.Logger) (zk.Client, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	code := run(context.Background(), []string{"--zk_servers=h:1", "--bzid=gip", "--model_name=m", "--timeout=20ms"}, io.Discard, &errOut, blocked)
	if code != 1 || !strings.Contains(errOut.String(), "connect to h:1: context deadline exceeded") {
		t.Errorf("exit %d, stderr %q", code, errOut.String())
	}
}
