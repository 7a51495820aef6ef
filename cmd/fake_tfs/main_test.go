package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	utilsspec "github.com/monolith-go/monolith/gen/spec/agent_service/utils"
	"github.com/monolith-go/monolith/internal/syncbuf"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/pytext"
)

func TestUsage(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		{"help", []string{"--help"}, 0, "--model_config_file=STRING", ""},
		{"bad port", []string{"--port=http"}, 2, "", "--port"},
		{"bad log level", []string{"--fake_log_level=loud"}, 2, "", "--fake_log_level"},
		{"config file and base path", []string{"--model_config_file=x", "--model_base_path=y"}, 2, "", "mutually exclusive"},
		{"missing config file", []string{"--model_config_file=" + filepath.Join(dir, "nope")}, 2, "", "no such file"},
		{"port in use or invalid", []string{"--port=70000", "--fake_host=127.0.0.1"}, 2, "", "listen"},
		// Before: an unknown flag was ignored and the fake served on *:8500.
		{"unknown flag", []string{"--bogus=x", "--port=0", "--fake_host=127.0.0.1"}, 2, "", "fake_tfs: unknown flag --bogus"},
		{"version", []string{"--version", "--port=0", "--fake_host=127.0.0.1"}, 0, "fake_tfs ", ""},
		{"bad log format", []string{"--log_format=xml"}, 2, "", "--log_format"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb syncbuf.Buffer
			code := run(context.Background(), tc.args, &out, &errb, nil)
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.wantCode, out.String(), errb.String())
			}
			if !strings.Contains(out.String(), tc.wantOut) {
				t.Errorf("stdout lacks %q:\n%s", tc.wantOut, out.String())
			}
			if !strings.Contains(errb.String(), tc.wantErr) {
				t.Errorf("stderr lacks %q:\n%s", tc.wantErr, errb.String())
			}
		})
	}
}

// waitAvailable polls GetModelStatus (every RPC with a deadline) until the model's versions are all
// AVAILABLE.
func waitAvailable(t *testing.T, addr, model string) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := servingapis.NewModelServiceClient(conn)
	deadline := time.Now().Add(10 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		resp, err := client.GetModelStatus(ctx, &servingapis.GetModelStatusRequest{ModelSpec: &servingapis.ModelSpec{Name: model}})
		cancel()
		if err == nil {
			last = pytext.Format(resp)
			ok := len(resp.GetModelVersionStatus()) > 0
			for _, s := range resp.GetModelVersionStatus() {
				ok = ok && s.GetState() == servingapis.ModelVersionStatus_AVAILABLE
			}
			if ok {
				return
			}
		} else {
			last = err.Error()
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s never became AVAILABLE at %s; last: %s", model, addr, last)
}

// agentCommand builds the TF Serving command line the agent runs for an entry of a mixed deploy
// (agent v1, so it carries every flag the agent may emit) with the model server config written to
// dir, and returns its arguments, the gRPC port and the entry model's name.
func agentCommand(t *testing.T, dir string) (args []string, port int, model string) {
	t.Helper()
	fields := utilsspec.DefaultAgentConfig()
	set := func(name string, v any) {
		if err := fields.Set(name, v); err != nil {
			t.Fatalf("set %s: %v", name, err)
		}
	}
	set("bzid", "b")
	set("base_name", "m")
	set("base_path", "/tmp/never-read")
	set("deploy_type", "mixed")
	set("num_ps", 2)
	set("enable_batching", true)
	set("fetch_ps_long_conn_enable", false)
	set("num_load_threads", 4)
	set("per_process_gpu_memory_fraction", 0.5)
	set("version", "v1.2")
	cfg, err := agentconf.New(fields, agentconf.Options{Env: agentconf.MapEnv(map[string]string{"TCE_PSM": "p.s.m", "TCE_CLUSTER": "c"})})
	if err != nil {
		t.Fatalf("agentconf.New: %v", err)
	}
	msc, err := cfg.ModelServerConfig(agentconf.ServerEntry)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "entry.config")
	if err := os.WriteFile(file, []byte(pytext.Format(msc)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd, port, err := cfg.CmdAndPort("fake_tfs", agentconf.ServerEntry, file)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("agent command: %s", cmd)
	for _, want := range []string{"--archon_rpc_psm=", "--enable_batching=true", "--archon_entry_to_ps_long_conn_enable=false", "--rest_api_port="} {
		if !strings.Contains(cmd, want) {
			t.Errorf("the agent's command line lacks %s; the test no longer covers it", want)
		}
	}
	return strings.Fields(cmd)[1:], port, msc.GetModelConfigList().GetConfig()[0].GetName()
}

// TestAgentCommandLine runs the fake with the exact command line the agent builds for TF Serving
// and stops it as a signal would.
func TestAgentCommandLine(t *testing.T) {
	args, port, model := agentCommand(t, t.TempDir())
	args = append(args, "--fake_step_interval=1ms")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncbuf.Buffer
	ready := make(chan string, 1)
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, &out, &errb, func(addr string) { ready <- addr }) }()
	select {
	case addr := <-ready:
		if !strings.HasSuffix(addr, ":"+strconv.Itoa(port)) {
			t.Errorf("listening on %s, want port %d", addr, port)
		}
	case code := <-done:
		t.Fatalf("exited %d before serving:\n%s", code, errb.String())
	}
	waitAvailable(t, "127.0.0.1:"+strconv.Itoa(port), model)
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d after the signal:\n%s", code, errb.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no exit 10 s after the signal")
	}
	log := errb.String()
	for _, want := range []string{"msg=stopping", "msg=stopped"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}

// TestBinary builds the binary with go build and stops it with SIGTERM. It runs under go test
// only: under Bazel (TEST_SRCDIR set) there is no go tool in the sandbox, and the in-process tests
// above cover the same code.
func TestBinary(t *testing.T) {
	if os.Getenv("TEST_SRCDIR") != "" {
		t.Skip("needs the go tool; skipped under Bazel")
	}
	if testing.Short() {
		t.Skip("builds a binary")
	}
	bin := filepath.Join(t.TempDir(), "fake_tfs")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "--port=0", "--fake_host=127.0.0.1", "--model_name=m", "--model_base_path=/never/read",
		"--fake_step_interval=1ms", "--archon_port=1", "--version=v1.2")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	addrRe := regexp.MustCompile(`msg="fake tfs serving" addr=(\S+)`)
	lines := bufio.NewScanner(stderr)
	var addr string
	var log strings.Builder
	for addr == "" && lines.Scan() {
		log.WriteString(lines.Text() + "\n")
		if m := addrRe.FindStringSubmatch(lines.Text()); m != nil {
			addr = m[1]
		}
	}
	if addr == "" {
		t.Fatalf("no serving address logged:\n%s", log.String())
	}
	rest := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(stderr)
		rest <- string(b)
	}()
	waitAvailable(t, addr, "m")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		tail := <-rest
		if err != nil {
			t.Errorf("exit after SIGTERM: %v\n%s%s", err, log.String(), tail)
		}
		if !strings.Contains(tail, "msg=stopped") {
			t.Errorf("no clean stop logged:\n%s%s", log.String(), tail)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still running 10 s after SIGTERM")
	}
}
