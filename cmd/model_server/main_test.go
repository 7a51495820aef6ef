package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	agentpb "github.com/monolith-go/monolith/gen/pb/monolith/serving/agent_service"
	tfframework "github.com/monolith-go/monolith/gen/pb/tensorflow/core/framework"
	tfprotobuf "github.com/monolith-go/monolith/gen/pb/tensorflow/core/protobuf"
	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	servingconfig "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/config"
	utilsspec "github.com/monolith-go/monolith/gen/spec/agent_service/utils"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/internal/syncbuf"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/agentsvc"
	"github.com/monolith-go/monolith/pkg/export"
	"github.com/monolith-go/monolith/pkg/instance"
	"github.com/monolith-go/monolith/pkg/modelconfig"
	"github.com/monolith-go/monolith/pkg/modelserver/entry"
	"github.com/monolith-go/monolith/pkg/modelserver/exporttest"
	"github.com/monolith-go/monolith/pkg/modelserver/tensors"
	"github.com/monolith-go/monolith/pkg/pytext"
	"github.com/monolith-go/monolith/pkg/tfs"
)

func noEnv(string) (string, bool) { return "", false }

func TestUsage(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.config")
	os.WriteFile(bad, []byte("model_config_list {"), 0o644)
	twice := filepath.Join(dir, "twice.config")
	os.WriteFile(twice, []byte(`model_config_list { config { name: "a" base_path: "/x" } config { name: "a" base_path: "/y" } }`), 0o644)
	local := []string{"--port=0", "--host=127.0.0.1", "--status_addr="}
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		{"help", []string{"--help"}, 0, "--model_config_file=STRING", ""},
		{"help lists the agent flag", []string{"--help"}, 0, "--agent_addr", ""},
		{"bad port", []string{"--port=http"}, 2, "", "--port"},
		{"port out of range", []string{"--port=70000"}, 2, "", "--port 70000"},
		{"bad log level", []string{"--log_level=loud"}, 2, "", "--log_level"},
		{"bad log format", []string{"--log_format=xml"}, 2, "", "--log_format"},
		{"config file and base path", append([]string{"--model_config_file=x", "--model_base_path=y"}, local...), 2, "", "mutually exclusive"},
		{"missing config file", append([]string{"--model_config_file=" + filepath.Join(dir, "nope")}, local...), 2, "", "no such file"},
		{"unparsable config file", append([]string{"--model_config_file=" + bad}, local...), 2, "", bad},
		{"model twice in the config file", append([]string{"--model_config_file=" + twice}, local...), 2, "", "configured twice"},
		{"negative retries", append([]string{"--archon_entry_to_ps_rpc_retry=-1"}, local...), 2, "", "negative"},
		{"zero timeout", append([]string{"--archon_entry_to_ps_rpc_timeout=0"}, local...), 2, "", "not positive"},
		{"unknown flag", append([]string{"--bogus=x"}, local...), 2, "", "model_server: unknown flag --bogus"},
		{"version", append([]string{"--version"}, local...), 0, "model_server ", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb syncbuf.Buffer
			code := run(context.Background(), tc.args, &out, &errb, noEnv, nil)
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
	t.Run("port taken", func(t *testing.T) {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer lis.Close()
		_, port, _ := net.SplitHostPort(lis.Addr().String())
		var out, errb syncbuf.Buffer
		if code := run(context.Background(), []string{"--host=127.0.0.1", "--port=" + port, "--status_addr="}, &out, &errb, noEnv, nil); code != 1 {
			t.Errorf("exit %d, want 1:\n%s", code, errb.String())
		}
	})
}

// agentWrapperArgs is the command line agent v3 runs TF Serving with (pkg/tfs Wrapper.Command)
// for a binary that is a gRPC remote-op build, without the binary.
func agentWrapperArgs(t *testing.T, configFile string) []string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "tensorflow_model_server")
	os.WriteFile(bin, []byte("\x7fELF...PredictionServiceGrpc..."), 0o755)
	w, err := tfs.NewWrapper(tfs.WrapperConfig{Binary: bin, ArchonPort: 1, GRPCPort: 0, HTTPPort: 2, ModelConfigFile: configFile,
		TFS: utilsspec.DefaultTfServingConfig(), PSM: "p.s.m", Cluster: "c"})
	if err != nil {
		t.Fatal(err)
	}
	if !w.GRPCRemoteOp() {
		t.Fatal("not taken for a gRPC remote-op build")
	}
	return w.Command()[1:]
}

// agentV1EntryArgs is the command line agent v1 builds for an entry of a mixed deploy (it carries
// every flag the agent may emit), without the binary.
func agentV1EntryArgs(t *testing.T, configFile string) []string {
	t.Helper()
	fields := utilsspec.DefaultAgentConfig()
	for name, v := range map[string]any{"bzid": "b", "base_name": "m", "base_path": "/tmp/never-read", "deploy_type": "mixed", "num_ps": 2,
		"enable_batching": true, "fetch_ps_long_conn_enable": false, "num_load_threads": 4, "per_process_gpu_memory_fraction": 0.5, "version": "v1.2",
		"agent_version": 1} {
		if err := fields.Set(name, v); err != nil {
			t.Fatalf("set %s: %v", name, err)
		}
	}
	cfg, err := agentconf.New(fields, agentconf.Options{Env: agentconf.MapEnv(map[string]string{"TCE_PSM": "p.s.m", "TCE_CLUSTER": "c"})})
	if err != nil {
		t.Fatal(err)
	}
	cmd, _, err := cfg.CmdAndPort("model_server", agentconf.ServerEntry, configFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--archon_entry_to_ps_rpc_timeout=", "--enable_batching=true", "--archon_entry_to_ps_long_conn_enable=false", "--num_load_threads=4", "--version=v1.2"} {
		if !strings.Contains(cmd, want) {
			t.Errorf("the agent's command line lacks %s; the test no longer covers it", want)
		}
	}
	return strings.Fields(cmd)[1:]
}

// fakeAgent is an AgentService on loopback whose HeartBeat lists the PS sub-graphs at an address
// set once the model server listens (a unified deploy: one model server serves entry and PS).
type fakeAgent struct {
	mu    sync.Mutex
	table map[string][]string
	addr  string
}

func startAgent(t *testing.T) *fakeAgent {
	t.Helper()
	a := &fakeAgent{table: map[string][]string{}}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	agentpb.RegisterAgentServiceServer(gs, agentsvc.NewProviderService(func() map[string][]string {
		a.mu.Lock()
		defer a.mu.Unlock()
		return maps.Clone(a.table) // the service reads it after the lock is released
	}, nil))
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	a.addr = lis.Addr().String()
	return a
}

func (a *fakeAgent) serve(models []string, addr string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, m := range models {
		a.table[m] = []string{addr}
	}
}

// writeConfig writes the model server config the agent writes for an export: the entry under
// latest, the PS sub-graphs under their resolved latest_once (specific), and the default model.
func writeConfig(t *testing.T, file, base string, version int64, numPS int) []string {
	t.Helper()
	mc, err := modelconfig.ModelConfig("demo:entry", filepath.Join(base, export.EntrySubGraph), modelconfig.PolicyLatest, modelconfig.VersionData{N: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	configs := []*servingconfig.ModelConfig{mc}
	names := []string{"demo:entry"}
	for i := range numPS {
		sub := export.PSSubGraph(i)
		mc, err := modelconfig.ModelConfig("demo:"+sub, filepath.Join(base, sub), modelconfig.PolicySpecific, modelconfig.VersionData{N: version}, nil)
		if err != nil {
			t.Fatal(err)
		}
		configs = append(configs, mc)
		names = append(names, "demo:"+sub)
	}
	configs = append(configs, modelconfig.Default())
	cfg := &servingconfig.ModelServerConfig{Config: &servingconfig.ModelServerConfig_ModelConfigList{ModelConfigList: &servingconfig.ModelConfigList{Config: configs}}}
	if err := os.WriteFile(file, []byte(pytext.Format(cfg)), 0o644); err != nil {
		t.Fatal(err)
	}
	return names
}

func waitAvailable(t *testing.T, client servingapis.ModelServiceClient, model string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		resp, err := client.GetModelStatus(ctx, &servingapis.GetModelStatusRequest{ModelSpec: &servingapis.ModelSpec{Name: model}})
		cancel()
		if err == nil {
			last = pytext.Format(resp)
			if l := resp.GetModelVersionStatus(); len(l) > 0 && l[0].GetState() == servingapis.ModelVersionStatus_AVAILABLE {
				return
			}
			if l := resp.GetModelVersionStatus(); len(l) > 0 && l[0].GetState() == servingapis.ModelVersionStatus_END {
				t.Fatalf("%s ended: %s", model, last)
			}
		} else {
			last = err.Error()
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s never became AVAILABLE; last: %s", model, last)
}

// TestServesAnExportOnTheAgentsCommandLine runs the model server with the exact command lines the
// agent builds for TF Serving (v3's wrapper, v1's entry) on the config the agent writes for a real
// export, and checks that every sub-graph becomes AVAILABLE, that Predict on the entry returns the
// trainer's scores (its PS replicas found through the agent's HeartBeat), that the status endpoint
// reports it, and that a signal stops it cleanly.
func TestServesAnExportOnTheAgentsCommandLine(t *testing.T) {
	leakcheck.Check(t)
	ctx, cancelAll := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancelAll()
	job := exporttest.NewJob(t, 2, []int{16})
	job.Train(ctx, 20)
	base := filepath.Join(t.TempDir(), "demo")
	res := job.Export(ctx, base, 2)
	examples := job.Examples(9, 16)
	want := job.Predict(ctx, examples)
	in, err := instance.Marshal(examples)
	if err != nil {
		t.Fatal(err)
	}
	for name, argsOf := range map[string]func(*testing.T, string) []string{"agent v3": agentWrapperArgs, "agent v1 entry": agentV1EntryArgs} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "model_server_config.pbtxt")
			models := writeConfig(t, file, base, res.Version, 2)
			agent := startAgent(t)
			args := append(argsOf(t, file), "--host=127.0.0.1", "--port=0", "--status_addr=127.0.0.1:0", "--agent_addr="+agent.addr)
			runCtx, stop := context.WithCancel(ctx)
			defer stop()
			var out, errb syncbuf.Buffer
			type addrs struct{ grpc, status string }
			ready := make(chan addrs, 1)
			done := make(chan int, 1)
			go func() {
				done <- run(runCtx, args, &out, &errb, noEnv, func(a, s string) { ready <- addrs{a, s} })
			}()
			var a addrs
			select {
			case a = <-ready:
			case code := <-done:
				t.Fatalf("exited %d before serving:\n%s", code, errb.String())
			}
			agent.serve(models, a.grpc)
			conn, err := grpc.NewClient(a.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			for _, m := range models {
				waitAvailable(t, servingapis.NewModelServiceClient(conn), m)
			}
			if _, err := servingapis.NewModelServiceClient(conn).GetModelStatus(ctx, &servingapis.GetModelStatusRequest{ModelSpec: &servingapis.ModelSpec{Name: "default"}}); status.Code(err) != codes.NotFound {
				t.Errorf("the default model (no base path): %v, want NOT_FOUND", err)
			}
			resp, err := servingapis.NewPredictionServiceClient(conn).Predict(ctx, &servingapis.PredictRequest{
				ModelSpec: &servingapis.ModelSpec{Name: "demo:entry"},
				Inputs:    map[string]*tfframework.TensorProto{entry.InputExamples: instance.MakeTensorProto(in)}})
			if err != nil {
				t.Fatalf("Predict: %v\n%s", err, errb.String())
			}
			got, err := tensors.Float32s(resp.GetOutputs()[entry.OutputScores])
			if err != nil || len(got) != len(want) {
				t.Fatalf("scores %v, %v", got, err)
			}
			for i := range got {
				if math.Abs(float64(got[i])-want[i]) > 1e-6 {
					t.Errorf("example %d scored %v, the trainer %v", i, got[i], want[i])
				}
			}
			body := httpGet(t, a.status+"/metrics")
			for _, want := range []string{
				`monolith_model_server_requests_total{code="OK",method="Predict",model="demo:entry",signature="serving_default"} 1`,
				`monolith_model_server_entry_ps_requests_total{code="OK",ps="demo:ps_0"}`,
				`monolith_model_server_model_versions{model="demo:ps_1",state="AVAILABLE"} 1`,
			} {
				if !strings.Contains(body, want) {
					t.Errorf("metrics lack %s", want)
				}
			}
			stop()
			select {
			case code := <-done:
				if code != 0 {
					t.Errorf("exit %d after the signal:\n%s", code, errb.String())
				}
			case <-time.After(20 * time.Second):
				t.Fatal("no exit 20 s after the signal")
			}
			for _, want := range []string{"msg=stopping", "msg=stopped"} {
				if !strings.Contains(errb.String(), want) {
					t.Errorf("log lacks %q", want)
				}
			}
			if !strings.Contains(out.String(), "model_server serving on "+a.grpc) {
				t.Errorf("stdout: %s", out.String())
			}
		})
	}
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestAgentAddrFromPORT2: without --agent_addr the entry asks localhost:$PORT2, as Monolith's
// entry; with neither, an entry does not load and says why.
func TestAgentAddrFromPORT2(t *testing.T) {
	leakcheck.Check(t)
	ctx, cancelAll := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancelAll()
	job := exporttest.NewJob(t, 1, []int{})
	job.Train(ctx, 2)
	base := filepath.Join(t.TempDir(), "demo")
	res := job.Export(ctx, base, 1)
	file := filepath.Join(t.TempDir(), "models.config")
	models := writeConfig(t, file, base, res.Version, 1)
	in, _ := instance.Marshal(job.Examples(9, 2))
	agent := startAgent(t)
	_, port, _ := net.SplitHostPort(agent.addr)
	for _, tc := range []struct {
		name string
		env  map[string]string
		ok   bool
	}{
		{"PORT2", map[string]string{"PORT2": port}, true},
		{"no agent", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runCtx, stop := context.WithCancel(ctx)
			defer stop()
			var out, errb syncbuf.Buffer
			ready := make(chan string, 1)
			done := make(chan int, 1)
			env := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
			go func() {
				done <- run(runCtx, []string{"--model_config_file=" + file, "--host=127.0.0.1", "--port=0", "--status_addr="}, &out, &errb, env, func(a, _ string) { ready <- a })
			}()
			addr := <-ready
			agent.serve(models, addr)
			conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			ms := servingapis.NewModelServiceClient(conn)
			waitAvailable(t, ms, "demo:ps_0")
			if tc.ok {
				waitAvailable(t, ms, "demo:entry")
				if _, err := servingapis.NewPredictionServiceClient(conn).Predict(ctx, &servingapis.PredictRequest{ModelSpec: &servingapis.ModelSpec{Name: "demo:entry"},
					Inputs: map[string]*tfframework.TensorProto{entry.InputExamples: instance.MakeTensorProto(in)}}); err != nil {
					t.Errorf("Predict: %v", err)
				}
			} else {
				deadline := time.Now().Add(30 * time.Second)
				for {
					resp, err := ms.GetModelStatus(ctx, &servingapis.GetModelStatusRequest{ModelSpec: &servingapis.ModelSpec{Name: "demo:entry"}})
					if err == nil && resp.GetModelVersionStatus()[0].GetState() == servingapis.ModelVersionStatus_END {
						if msg := resp.GetModelVersionStatus()[0].GetStatus().GetErrorMessage(); !strings.Contains(msg, "--agent_addr") {
							t.Errorf("error message %q", msg)
						}
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("entry without agent: %v %v", resp, err)
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			stop()
			if code := <-done; code != 0 {
				t.Errorf("exit %d:\n%s", code, errb.String())
			}
		})
	}
}

// TestBinary builds the binary with go build: it holds the string that makes the agent take it for
// a gRPC remote-op build, serves, and stops on SIGTERM. It runs under go test only: under Bazel
// (TEST_SRCDIR set) there is no go tool in the sandbox, and the in-process tests above cover the
// same code.
func TestBinary(t *testing.T) {
	if os.Getenv("TEST_SRCDIR") != "" {
		t.Skip("needs the go tool; skipped under Bazel")
	}
	if testing.Short() {
		t.Skip("builds a binary")
	}
	bin := filepath.Join(t.TempDir(), "model_server")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	w, err := tfs.NewWrapper(tfs.WrapperConfig{Binary: bin})
	if err != nil {
		t.Fatal(err)
	}
	if !w.GRPCRemoteOp() {
		t.Error("the agent would not take the binary for a gRPC remote-op build (no PredictionServiceGrpc in it)")
	}
	base := t.TempDir()
	cmd := exec.Command(bin, "--port=0", "--host=127.0.0.1", "--status_addr=127.0.0.1:0", "--model_name=m:ps_0", "--model_base_path="+base,
		"--archon_port=1", "--version=v1.2", "--log_format=json")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncbuf.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	addrRe := regexp.MustCompile(`^model_server serving on (\S+)$`)
	lines := bufio.NewScanner(stdout)
	var addr string
	for addr == "" && lines.Scan() {
		if m := addrRe.FindStringSubmatch(lines.Text()); m != nil {
			addr = m[1]
		}
	}
	if addr == "" {
		t.Fatalf("no serving address printed:\n%s", stderr.String())
	}
	go io.Copy(io.Discard, stdout)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := servingapis.NewModelServiceClient(conn).GetModelStatus(ctx, &servingapis.GetModelStatusRequest{ModelSpec: &servingapis.ModelSpec{Name: "m:ps_0"}}); status.Code(err) != codes.NotFound {
		t.Errorf("a model without versions: %v, want NOT_FOUND", err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v\n%s", err, stderr.String())
		}
		if !strings.Contains(stderr.String(), `"msg":"stopped"`) {
			t.Errorf("no clean stop logged (json):\n%s", stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("still running 20 s after SIGTERM")
	}
}

// TestCorruptNewestVersion: a PS sub-graph whose newest version is corrupt (a truncated manifest)
// when the server starts is served from the newest version that loads, the corrupt one reported
// END with the file's error; a corrupt version that appears while it serves (a truncated table
// file) is reported and skipped the same way; the next good version replaces the served one.
// TF Serving's latest policy (and this server before) served nothing at start: "Servable not
// found for request: Latest(demo:ps_0)".
func TestCorruptNewestVersion(t *testing.T) {
	leakcheck.Check(t)
	ctx, cancelAll := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancelAll()
	job := exporttest.NewJob(t, 1, []int{})
	staging := filepath.Join(t.TempDir(), "demo")
	var versions []int64
	for range 4 {
		job.Train(ctx, 2)
		versions = append(versions, job.Export(ctx, staging, 1).Version)
	}
	sub := export.PSSubGraph(0)
	base := filepath.Join(t.TempDir(), "demo", sub)
	place := func(v int64, corrupt func(dir string)) string {
		t.Helper()
		tmp := filepath.Join(base, export.TempPrefix+strconv.FormatInt(v, 10))
		if err := os.CopyFS(tmp, os.DirFS(filepath.Join(staging, sub, strconv.FormatInt(v, 10)))); err != nil {
			t.Fatal(err)
		}
		if corrupt != nil {
			corrupt(tmp)
		}
		dir := filepath.Join(base, strconv.FormatInt(v, 10))
		if err := os.Rename(tmp, dir); err != nil { // whole, as the exporter publishes a version
			t.Fatal(err)
		}
		return dir
	}
	truncate := func(file string) {
		t.Helper()
		st, err := os.Stat(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(file, st.Size()/2); err != nil {
			t.Fatal(err)
		}
	}
	place(versions[0], nil)
	bad := place(versions[1], func(dir string) { truncate(filepath.Join(dir, export.PSManifestFile)) })

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var out, errb syncbuf.Buffer
	ready := make(chan [2]string, 1)
	done := make(chan int, 1)
	go func() {
		done <- run(runCtx, []string{"--model_name=demo:" + sub, "--model_base_path=" + base, "--host=127.0.0.1", "--port=0",
			"--status_addr=127.0.0.1:0", "--file_system_poll_wait_seconds=1"}, &out, &errb, noEnv, func(a, s string) { ready <- [2]string{a, s} })
	}()
	var addrs [2]string
	select {
	case addrs = <-ready:
	case code := <-done:
		t.Fatalf("exited %d before serving:\n%s", code, errb.String())
	}
	conn, err := grpc.NewClient(addrs[0], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ms, ps := servingapis.NewModelServiceClient(conn), servingapis.NewPredictionServiceClient(conn)
	// expect waits until GetModelStatus lists want (version -> state, newest first) and the
	// server serves version serving; it returns the statuses.
	expect := func(want string, serving int64) []*servingapis.ModelVersionStatus {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		var last string
		for {
			resp, err := ms.GetModelStatus(ctx, &servingapis.GetModelStatusRequest{ModelSpec: &servingapis.ModelSpec{Name: "demo:" + sub}})
			got := ""
			for i, s := range resp.GetModelVersionStatus() {
				if i > 0 {
					got += " "
				}
				got += strconv.FormatInt(s.GetVersion(), 10) + ":" + s.GetState().String()
			}
			md, merr := ps.GetModelMetadata(ctx, &servingapis.GetModelMetadataRequest{ModelSpec: &servingapis.ModelSpec{Name: "demo:" + sub}, MetadataField: []string{"version"}})
			if err == nil && merr == nil && got == want && md.GetModelSpec().GetVersion().GetValue() == serving {
				return resp.GetModelVersionStatus()
			}
			last = got + fmt.Sprintf(" (status: %v; serving: %v, %v)", err, md.GetModelSpec().GetVersion().GetValue(), merr)
			if time.Now().After(deadline) {
				t.Fatalf("versions %s, want %q serving %d\n%s", last, want, serving, errb.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	failed := func(st *servingapis.ModelVersionStatus, file string) {
		t.Helper()
		if st.GetState() != servingapis.ModelVersionStatus_END || st.GetStatus().GetErrorCode() == tfprotobuf.Code_OK ||
			!strings.Contains(st.GetStatus().GetErrorMessage(), file) {
			t.Errorf("version %d: %v, want END with an error naming %s", st.GetVersion(), st, file)
		}
	}
	v := func(i int) string { return strconv.FormatInt(versions[i], 10) }

	// At start: version 1 corrupt, version 0 serves.
	sts := expect(v(1)+":END "+v(0)+":AVAILABLE", versions[0])
	failed(sts[0], filepath.Join(bad, export.PSManifestFile))

	// While serving: version 2 appears with a truncated table file, and is skipped.
	var part string // the table file, relative to the version directory
	bad2 := place(versions[2], func(dir string) {
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, _ error) error {
			if d != nil && !d.IsDir() && part == "" && strings.HasPrefix(d.Name(), "part-") {
				part, _ = filepath.Rel(dir, p)
			}
			return nil
		})
		if part == "" {
			t.Fatalf("no table file under %s", dir)
		}
		truncate(filepath.Join(dir, part))
	})
	sts = expect(v(2)+":END "+v(1)+":END "+v(0)+":AVAILABLE", versions[0])
	failed(sts[0], filepath.Join(bad2, part))

	// A good version 3 replaces version 0; the failures stay reported while on disk.
	place(versions[3], nil)
	expect(v(3)+":AVAILABLE "+v(2)+":END "+v(1)+":END "+v(0)+":END", versions[3])

	body := httpGet(t, addrs[1]+"/metrics")
	for _, want := range []string{
		`monolith_model_server_loads_total{model="demo:ps_0",result="error"} 2`,
		`monolith_model_server_loads_total{model="demo:ps_0",result="ok"} 2`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	for _, want := range []string{"version failed to load", "version skipped until the model's config changes"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, errb.String())
		}
	}
	stop()
	if code := <-done; code != 0 {
		t.Errorf("exit %d:\n%s", code, errb.String())
	}
}
