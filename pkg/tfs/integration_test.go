package tfs

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	"github.com/monolith-go/monolith/pkg/datadef"
)

var fakeTFSBinary = flag.String("fake_tfs", "", "path of the fake_tfs binary (Bazel passes it; go test builds it)")

// fakeTFS returns the fake TF Serving binary: the one Bazel built, or one go build makes now.
func fakeTFS(t *testing.T) string {
	t.Helper()
	if *fakeTFSBinary != "" {
		// $(rootpath) is relative to the workspace root inside the runfiles tree.
		if srcdir := os.Getenv("TEST_SRCDIR"); srcdir != "" {
			return filepath.Join(srcdir, os.Getenv("TEST_WORKSPACE"), *fakeTFSBinary)
		}
		p, err := filepath.Abs(*fakeTFSBinary)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	bin := filepath.Join(t.TempDir(), "fake_tfs")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/monolith-go/monolith/cmd/fake_tfs").CombinedOutput()
	if err != nil {
		t.Fatalf("go build fake_tfs: %v\n%s", err, out)
	}
	return bin
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestMonitorDrivesFakeTFSBinary runs the fake TF Serving as a process, the way the agent runs
// tensorflow_model_server, and drives a reload + status cycle through the monitor over gRPC.
func TestMonitorDrivesFakeTFSBinary(t *testing.T) {
	port := freePort(t)
	bin := fakeTFS(t)
	t.Logf("fake TF Serving binary: %s", bin)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--port="+strconv.Itoa(port), "--fake_host=127.0.0.1",
		"--fake_step_interval=5ms", "--fake_new_version_interval=0", "--archon_port=1", "--log_conf=x")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}()

	env["PORT3"] = strconv.Itoa(port)
	m := newMonitor(t, "deploy_type ps\nnum_ps 2\n")
	env["PORT3"] = "8003"
	m.SetHost("127.0.0.1")
	if err := m.Connect(); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	name := "m"
	pm := datadef.PublishMeta{ModelName: &name, PType: datadef.PublishLoad, SubModels: []datadef.SubModel{
		{Name: "ps_0", Path: "/models/m/ps_0/1"}, {Name: "ps_1", Path: "/models/m/ps_1/1"}}}
	cfgs, err := m.GenModelConfig([]datadef.PublishMeta{pm}, false)
	if err != nil {
		t.Fatal(err)
	}
	// The process may still be starting: retry the reload until it answers.
	var lastErr error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		_, lastErr = m.Reload(rctx, "ps", cfgs["ps"])
		rcancel()
		if lastErr == nil {
			break
		}
	}
	if lastErr != nil {
		t.Fatalf("reload never succeeded: %v", lastErr)
	}
	var states string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		st, err := m.PublishStatus(ctx, pm, false)
		if err != nil {
			t.Fatal(err)
		}
		states = fmt.Sprint(st["m:ps_0"].Status.GetState(), st["m:ps_1"].Status.GetState())
		if st["m:ps_0"].Status.GetState() == servingapis.ModelVersionStatus_AVAILABLE &&
			st["m:ps_1"].Status.GetState() == servingapis.ModelVersionStatus_AVAILABLE {
			return
		}
	}
	t.Fatalf("models never became AVAILABLE; last states %s", states)
}
