package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	pb "github.com/monolith-go/monolith/gen/pb/monolith/serving/agent_service"
	"github.com/monolith-go/monolith/internal/faketfsbin"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/internal/syncbuf"
	"github.com/monolith-go/monolith/pkg/agent/inprocserving"
	agentrun "github.com/monolith-go/monolith/pkg/agent/run"
	agentstatus "github.com/monolith-go/monolith/pkg/agent/status"
	agentv3 "github.com/monolith-go/monolith/pkg/agent/v3"
	"github.com/monolith-go/monolith/pkg/agentsvc"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkreal"
	"github.com/monolith-go/monolith/pkg/zk/zktest"
)

func TestFlagsAndConfigErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bad := write("bad.conf", "bzid b\ndeploy_type entry\nnum_ps many\n")
	v2 := write("v2.conf", "bzid b\ndeploy_type unified\nagent_version 2\nlayout_pattern l\n")
	v5 := write("v5.conf", "bzid b\ndeploy_type unified\nagent_version 5\n")
	v3entry := write("v3entry.conf", "bzid b\ndeploy_type entry\nagent_version 3\n")
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  []string
		wantErr  string
	}{
		{"help", []string{"--help"}, 0, []string{"--conf=PATH", "--tfs_log=PATH", "/var/log/tfs.std.log", "--status_addr=",
			"127.0.0.1:0", "--exit_after=", "--log_level=", "self-contained demo"}, ""},
		{"bad value", []string{"--conf", bad}, 2, nil, `bad.conf:3: num_ps "many": not a number`},
		{"missing conf", []string{"--conf", filepath.Join(dir, "nope.conf")}, 2, nil, "no such file"},
		{"unknown flag", []string{"--bogus"}, 2, nil, "unknown flag --bogus"},
		{"bad log level", []string{"--log_level=loud"}, 2, nil, "--log_level"},
		{"negative exit_after", []string{"--exit_after=-1s"}, 2, nil, "--exit_after must not be negative"},
		{"agent_version 2", []string{"--conf", v2}, 2, nil, "agent_version v2 is not support"},
		{"agent_version 5", []string{"--conf", v5}, 2, nil, "agent_version error 5"},
		{"v3 not unified", []string{"--conf", v3entry}, 2, nil, "agent v3 only supports unified deploy_type, got entry"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(context.Background(), tc.args, &out, &errb, nil)
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.wantCode, out.String(), errb.String())
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(out.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, out.String())
				}
			}
			if tc.wantErr != "" {
				lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
				last := lines[len(lines)-1]
				if !strings.Contains(last, tc.wantErr) || !strings.HasPrefix(last, "agent: ") {
					t.Errorf("stderr's last line %q lacks %q", last, tc.wantErr)
				}
			}
		})
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: %d %s", url, resp.StatusCode, body)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// started runs the command in the background and returns what it reported once the agent runs,
// and a function that cancels it and returns its exit status.
func started(t *testing.T, args []string, stdout, stderr io.Writer) (agentrun.Ready, func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	readyCh := make(chan agentrun.Ready, 1)
	code := make(chan int, 1)
	go func() { code <- run(ctx, args, stdout, stderr, func(r agentrun.Ready) { readyCh <- r }) }()
	select {
	case r := <-readyCh:
		return r, func() int { cancel(); return <-code }
	case c := <-code:
		cancel()
		t.Fatalf("exited with %d before the agent ran\nstderr:\n%s", c, stderr)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("the agent did not start")
	}
	return agentrun.Ready{}, nil
}

// TestDemo runs the command with no flags: the embedded demo serves the demo model's entry and
// all its PS shards, binds them, answers HeartBeat and the status endpoint, prints its guide and
// stops cleanly.
func TestDemo(t *testing.T) {
	leakcheck.Check(t)
	var stdout, stderr syncbuf.Buffer
	r, stop := started(t, nil, &stdout, &stderr)
	want := []string{"demo_model:entry", "demo_model:ps_0", "demo_model:ps_1"}
	var rep agentstatus.Report
	eventually(t, "the demo's models to be AVAILABLE and bound", func() bool {
		rep = agentstatus.Report{}
		getJSON(t, r.StatusURL+"/status", &rep)
		n := 0
		for _, m := range rep.Models {
			if m.State == "AVAILABLE" {
				n++
			}
		}
		return n == len(want) && slices.Equal(rep.Bound, want)
	})
	loaded := []string{}
	for _, e := range rep.Layout.Entries {
		if e.Loaded {
			loaded = append(loaded, e.SavedModel)
		}
	}
	if !slices.Equal(loaded, want) || len(rep.Layout.Entries) != len(want) {
		t.Errorf("layout: %+v", rep.Layout)
	}
	a := r.Agent.(*agentv3.Agent)
	eventually(t, "the bindings to reach the service map", func() bool { return len(a.AddrsMap()) == len(want) })
	c, err := agentsvc.Dial(inprocserving.LocalAddr(a.AgentServiceAddr()), agentsvc.ClientOptions{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.HeartBeat(context.Background(), pb.ServerType_ENTRY)
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	tfsAddr := *a.ServiceInfo().GRPC
	for _, name := range want {
		if got := resp.GetAddresses()[name].GetAddress(); !slices.Equal(got, []string{tfsAddr}) {
			t.Errorf("HeartBeat[%s] = %v, want [%s]", name, got, tfsAddr)
		}
	}
	if code := stop(); code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, stderr.String())
	}
	out := stdout.String()
	for _, w := range []string{"Monolith agent demo", "layout /demo/layouts/demo_layout lists demo_model:entry",
		"curl " + r.StatusURL + "/status", "--cmd_type=hb", "Press Ctrl-C to stop.", "agent stopped (context canceled)"} {
		if !strings.Contains(out, w) {
			t.Errorf("stdout lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(stderr.String(), "level=INFO") {
		t.Errorf("the demo logs at info by default:\n%s", stderr.String())
	}
}

// TestExitAfter: --exit_after stops the demo by itself with status 0.
func TestExitAfter(t *testing.T) {
	leakcheck.Check(t)
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"--exit_after=300ms", "--status_addr="}, &stdout, &stderr, nil); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	if out := stdout.String(); !strings.Contains(out, "agent stopped (--exit_after 300ms elapsed)") || strings.Contains(out, "curl") {
		t.Errorf("stdout:\n%s", out)
	}
}

// TestConf runs the command with --conf against a real ZooKeeper, with cmd/fake_tfs as TF
// Serving (MONOLITH_TFS_BINARY): the agent loads the published model, binds it and stops cleanly;
// with a TF Serving that exits at once the command exits with status 1.
func TestConf(t *testing.T) {
	// Built first, outside the deadline: under go test it is compiled here, which on a loaded
	// machine took most of the minute the subtests share.
	fakeTFS := faketfsbin.Path(t)
	srv := zktest.Start(t, zktest.WithTickTime(200*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ctl, err := zkreal.Connect(ctx, zkreal.Options{Servers: []string{srv.Addr()}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	if _, err := ctl.Create(ctx, "/cli/saved_models/m/entry", []byte(`{"model_base_path": "/m/entry", "version_policy": "latest"}`),
		zk.CreateOptions{MakePath: true}); err != nil {
		t.Fatal(err)
	}
	if err := ctl.EnsurePath(ctx, "/cli/layouts/l/m:entry"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "agent.conf")
	text := fmt.Sprintf("bzid cli\ndeploy_type unified\nagent_version 3\nzk_servers %s\nlayout_pattern l\n", srv.Addr())
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MY_HOST_IP", "127.0.0.1")
	t.Setenv("MY_POD_NAME", "cli-0")
	args := []string{"--conf", conf, "--tfs_log", filepath.Join(dir, "tfs.log")}

	t.Run("serves", func(t *testing.T) {
		leakcheck.Check(t)
		t.Setenv(agentv3.TFSBinaryEnv, filepath.Join(dir, "not-this-one"))
		var stdout, stderr syncbuf.Buffer
		// --tfs_binary wins over $MONOLITH_TFS_BINARY.
		r, stop := started(t, append(args, "--tfs_binary", fakeTFS), &stdout, &stderr)
		eventually(t, "m:entry to be bound", func() bool {
			var rep agentstatus.Report
			getJSON(t, r.StatusURL+"/status", &rep)
			return slices.Equal(rep.Bound, []string{"m:entry"}) && len(rep.Models) == 1 && rep.Models[0].State == "AVAILABLE"
		})
		kids, err := ctl.Children(ctx, "/cli/binding/m")
		if err != nil || len(kids) != 1 || !strings.HasPrefix(kids[0], "entry:") {
			t.Errorf("bindings %v, %v", kids, err)
		}
		if code := stop(); code != 0 {
			t.Fatalf("exit %d\nstderr:\n%s", code, stderr.String())
		}
		if out := stdout.String(); !strings.Contains(out, "agent v3 running (deploy_type unified") || !strings.Contains(out, "status endpoint  http://") {
			t.Errorf("stdout:\n%s", out)
		}
		eventually(t, "the binding to go", func() bool {
			kids, _ := ctl.Children(ctx, "/cli/binding/m/entry")
			return len(kids) == 0
		})
	})
	t.Run("advertise_host", func(t *testing.T) {
		leakcheck.Check(t)
		// --advertise_host=127.0.0.1: the container service info in ZooKeeper and HeartBeat's
		// answers name loopback addresses, which the machine's address (agentconf.LocalIP) never
		// is, so a deployment on one machine sends no traffic off it.
		var stdout, stderr syncbuf.Buffer
		r, stopAgent := started(t, append(args, "--tfs_binary", fakeTFS, "--advertise_host=127.0.0.1"), &stdout, &stderr)
		stop := sync.OnceValue(stopAgent)
		defer stop()
		a := r.Agent.(*agentv3.Agent)
		grpcAddr := *a.ServiceInfo().GRPC
		if !strings.HasPrefix(grpcAddr, "127.0.0.1:") || !strings.HasPrefix(*a.ServiceInfo().Agent, "127.0.0.1:") {
			t.Errorf("service info advertises gRPC %s, agent %s; want 127.0.0.1", grpcAddr, *a.ServiceInfo().Agent)
		}
		info, ok, err := a.Backend().ServiceInfo(ctx, a.Container())
		if err != nil || !ok || *info.GRPC != grpcAddr {
			t.Errorf("ZooKeeper's service info %+v, %v, %v; want gRPC %s", info, ok, err, grpcAddr)
		}
		eventually(t, "m:entry to be bound", func() bool { return len(a.AddrsMap()["m:entry"]) == 1 })
		c, err := agentsvc.Dial(inprocserving.LocalAddr(a.AgentServiceAddr()), agentsvc.ClientOptions{Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		resp, err := c.HeartBeat(ctx, pb.ServerType_ENTRY)
		// fake_tfs is no gRPC remote-op build: HeartBeat gives its archon address.
		want := *a.ServiceInfo().Archon
		if got := resp.GetAddresses()["m:entry"].GetAddress(); err != nil || !slices.Equal(got, []string{want}) || !strings.HasPrefix(want, "127.0.0.1:") {
			t.Errorf("HeartBeat[m:entry] = %v, %v; want [%s] on 127.0.0.1", got, err, want)
		}
		if code := stop(); code != 0 {
			t.Fatalf("exit %d\nstderr:\n%s", code, stderr.String())
		}
	})
	t.Run("zookeeper unreachable", func(t *testing.T) {
		leakcheck.Check(t)
		// A port nothing listens on: the agent gives up after --zk_connect_timeout, logging the
		// failed attempts (it used to wait forever, silent at INFO).
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		closed := ln.Addr().String()
		ln.Close()
		bad := filepath.Join(dir, "unreachable.conf")
		text := fmt.Sprintf("bzid cli\ndeploy_type unified\nagent_version 3\nzk_servers %s\nlayout_pattern l\n", closed)
		if err := os.WriteFile(bad, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr syncbuf.Buffer
		code := run(ctx, []string{"--conf", bad, "--tfs_binary", fakeTFS, "--tfs_log", filepath.Join(dir, "tfs.log"),
			"--zk_connect_timeout=1500ms", "--log_format=json"}, &stdout, &stderr, nil)
		out := stderr.String()
		if code != 1 || !strings.Contains(out, "no ZooKeeper session within the connect timeout") || !strings.Contains(out, closed) {
			t.Errorf("exit %d, stderr:\n%s", code, out)
		}
		if !strings.Contains(out, `"level":"WARN"`) {
			t.Errorf("no WARN line for the failed connects:\n%s", out)
		}
	})
	t.Run("tf serving binary missing", func(t *testing.T) {
		leakcheck.Check(t)
		missing := filepath.Join(dir, "no-such-tfs")
		var stdout, stderr bytes.Buffer
		code := run(ctx, append(args, "--tfs_binary="+missing), &stdout, &stderr, nil)
		if want := "--tfs_binary " + missing + " does not exist"; code == 0 || !strings.Contains(stderr.String(), want) {
			t.Errorf("exit %d, stderr %q, want non-zero and %q", code, stderr.String(), want)
		}
	})
	t.Run("tf serving exits", func(t *testing.T) {
		leakcheck.Check(t)
		// A TF Serving that exits at once with status 1: with --tfs_restart=false the agent stops.
		bin := filepath.Join(dir, "exits")
		if err := os.WriteFile(bin, []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		t.Setenv(agentv3.TFSBinaryEnv, bin)
		var stdout, stderr bytes.Buffer
		code := run(ctx, append(args, "--tfs_restart=false"), &stdout, &stderr, nil)
		if code != 1 || !strings.Contains(stderr.String(), "agent: agent v3: tf serving exited with code 1") {
			t.Errorf("exit %d, stderr:\n%s", code, stderr.String())
		}
	})
	t.Run("tf serving killed", func(t *testing.T) {
		leakcheck.Check(t)
		// kill -9 of TF Serving (fake_tfs, behind a script that notes each process's pid): the
		// agent restarts it (--tfs_restart is on by default), serves and binds the model again,
		// and counts the restart; the killed process's log is kept.
		pids := filepath.Join(t.TempDir(), "pids")
		bin := filepath.Join(t.TempDir(), "tfs")
		script := fmt.Sprintf("#!/bin/sh\necho $$ >> %s\nexec %s \"$@\"\n", pids, fakeTFS)
		if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		pidsOf := func() []int {
			b, _ := os.ReadFile(pids)
			var out []int
			for _, f := range strings.Fields(string(b)) {
				var p int
				fmt.Sscan(f, &p)
				out = append(out, p)
			}
			return out
		}
		tfsLog := filepath.Join(t.TempDir(), "tfs.log")
		var stdout, stderr syncbuf.Buffer
		r, stop := started(t, []string{"--conf", conf, "--tfs_log", tfsLog, "--tfs_binary", bin}, &stdout, &stderr)
		served := func() bool {
			var rep agentstatus.Report
			getJSON(t, r.StatusURL+"/status", &rep)
			return slices.Equal(rep.Bound, []string{"m:entry"}) && len(rep.Models) == 1 && rep.Models[0].State == "AVAILABLE" &&
				rep.Readiness != nil && rep.Readiness.Ready
		}
		eventually(t, "m:entry to be served and bound, the agent ready", served)
		first := pidsOf()
		if len(first) != 1 {
			t.Fatalf("TF Serving pids %v", first)
		}
		if err := syscall.Kill(first[0], syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		eventually(t, "a second TF Serving", func() bool { return len(pidsOf()) == 2 })
		eventually(t, "m:entry served and bound again, the agent ready", served)
		var rep agentstatus.Report
		getJSON(t, r.StatusURL+"/status", &rep)
		if s := rep.TFS; s == nil || !s.Restart || !s.Running || s.Restarts != 1 || s.LastExit != "exited with code -1 (killed by a signal)" {
			t.Errorf("status of TF Serving %+v", rep.TFS)
		}
		resp, err := http.Get(r.StatusURL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := `monolith_agent_tfs_restarts_total{result="ok"} 1`; !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
		if _, err := os.Stat(tfsLog + ".prev"); err != nil {
			t.Errorf("the killed TF Serving's log: %v", err)
		}
		if code := stop(); code != 0 {
			t.Fatalf("exit %d\nstderr:\n%s", code, stderr.String())
		}
		if !strings.Contains(stderr.String(), "tf serving exited with code -1 (killed by a signal); restarting it") {
			t.Errorf("stderr lacks the restart:\n%s", stderr.String())
		}
	})
}

// TestMain gives the demo's tests a cache directory of their own (not the user's): the first demo
// trains the model into it, the next ones find it there.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "agent-test-cache")
	if err != nil {
		panic(err)
	}
	// Go's build cache defaults to $XDG_CACHE_HOME/go-build: keep the real one, or building
	// fake_tfs (faketfsbin) starts from an empty cache (about a minute instead of a second).
	if os.Getenv("GOCACHE") == "" {
		if out, err := exec.Command("go", "env", "GOCACHE").Output(); err == nil {
			os.Setenv("GOCACHE", strings.TrimSpace(string(out)))
		}
	}
	os.Setenv("XDG_CACHE_HOME", dir)
	flag.Parse()
	code := m.Run()
	faketfsbin.Cleanup()
	os.RemoveAll(dir)
	os.Exit(code)
}
