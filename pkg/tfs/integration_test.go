package tfs

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	"github.com/monolith-go/monolith/internal/faketfsbin"
	"github.com/monolith-go/monolith/pkg/datadef"
)

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
	bin := faketfsbin.Path(t)
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

func TestMain(m *testing.M) { faketfsbin.Main(m) }
