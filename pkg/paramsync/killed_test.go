package paramsync

import (
	"context"
	"flag"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	"github.com/monolith-go/monolith/internal/cmdbin"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/modelserver/exporttest"
	"github.com/monolith-go/monolith/pkg/modelserver/psshard"
)

// modelServerBin is cmd/model_server: under Bazel the built binary
// (-model_server=$(rootpath //cmd/model_server)), else go build's.
var modelServerBin = cmdbin.New("model_server", "github.com/monolith-go/monolith/cmd/model_server")

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	modelServerBin.Cleanup()
	os.Exit(code)
}

// TestKilledReplicaCatchesUp: a serving replica (cmd/model_server, a process) killed with
// SIGKILL and started again reloads the export, without the pushes since; parameter sync sees its
// new load at the next push and sends it every entry, so that within 2 sync intervals of its
// coming back it serves exactly the trainer's embeddings again.
func TestKilledReplicaCatchesUp(t *testing.T) {
	leakcheck.Check(t)
	ctx := tctx(t)
	const interval = time.Second
	j := exporttest.NewJob(t, 1, []int{8})
	j.PS[0].SetTrackTouched(true)
	j.Train(ctx, 10)
	base := filepath.Join(t.TempDir(), "demo")
	j.Export(ctx, base, 1)
	port := freePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	bin := modelServerBin.Path(t)
	start := func() *exec.Cmd {
		t.Helper()
		cmd := exec.Command(bin, "--host=127.0.0.1", "--port="+strconv.Itoa(port), "--status_addr=", "--log_level=warn",
			"--model_name=demo:ps_0", "--model_base_path="+filepath.Join(base, "ps_0"), "--file_system_poll_wait_seconds=1")
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	client := servingapis.NewPredictionServiceClient(cc)
	ids := make([]int64, 0, 64)
	for _, ex := range j.Examples(1, 200) { // the training stream's: trained ids
		for _, nf := range ex.GetNamedFeature() {
			if nf.GetName() == "slot_1" {
				for _, f := range nf.GetFeature().GetFidV2List().GetValue() {
					ids = append(ids, int64(f))
				}
			}
		}
	}
	served := func() ([]float32, error) {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		resp, err := client.Predict(sctx, &servingapis.PredictRequest{
			ModelSpec: &servingapis.ModelSpec{Name: "demo:ps_0", SignatureName: psshard.Signature},
			Inputs:    psshard.Request("slot_1", ids)})
		if err != nil {
			return nil, err
		}
		out := make([]float32, len(ids)*exporttest.Dim)
		return out, psshard.LookupResult(resp.GetOutputs(), len(ids), out)
	}
	// equalWithin waits until the replica serves the trainer's embeddings, and says how long.
	equalWithin := func(what string, d time.Duration) time.Duration {
		t.Helper()
		begin := time.Now()
		deadline := begin.Add(d)
		for {
			got, err := served()
			if err == nil && maxAbs(got, j.Lookup(ctx, "slot_1", ids)) == 0 {
				return time.Since(begin)
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the replica does not serve the trainer's embeddings within %v (err %v)", what, d, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitServing := func() {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			if _, err := served(); err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("the model server does not serve demo:ps_0 within 30 s")
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	ms := start()
	waitServing()
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	p := newPusher(t, Config{Source: j.PS[0], Targets: StaticTargets{addr}, Model: "demo", Shard: 0, Interval: interval, Retries: -1, Metrics: m})
	pctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); p.Run(pctx) }()
	defer func() { stop(); <-done }()

	j.Train(ctx, 30) // updates since the export
	t.Logf("pushed to the first replica within %v", equalWithin("before the kill", 3*interval))
	// The first contact's catch-up has completed before the kill.
	for deadline := time.Now().Add(10 * time.Second); gather(t, reg)[`monolith_parameter_sync_catch_ups_total{target="`+addr+`"}`] != 1; {
		if time.Now().After(deadline) {
			t.Fatal("no catch-up push at the first contact within 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}

	if err := ms.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	ms.Wait()
	// The export it reloads lacks the updates since: only a catch-up brings them back.
	start()
	waitServing()
	// Training has paused: only a catch-up brings back the updates the export lacks.
	took := equalWithin("after the kill", 2*interval)
	t.Logf("the restarted replica serves the trainer's embeddings %v after it serves again", took.Round(time.Millisecond))
	if n := gather(t, reg)[`monolith_parameter_sync_catch_ups_total{target="`+addr+`"}`]; n != 2 {
		t.Errorf("%v catch-up pushes, want 2 (the first contact, the restart)", n)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	return lis.Addr().(*net.TCPAddr).Port
}
