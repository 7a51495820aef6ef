package job_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	pb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/hooks/server"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/discovery/consul/consultest"
	"github.com/monolith-go/monolith/pkg/hooks/controller"
	"github.com/monolith-go/monolith/pkg/runner/checkpoint"
	"github.com/monolith-go/monolith/pkg/trainenv"
	"github.com/monolith-go/monolith/pkg/trainer/job"
	"github.com/monolith-go/monolith/pkg/zk/zktest"
)

// smallSteps are the steps of small: 2000 training examples in batches of 128.
const smallSteps = 16

// small is a quick job of the logistic regression (cmd/train's --model=logreg --demo_examples=2000
// --epochs=1 --batch_size=128 --log_step_count_steps=5), with more of the run config's values.
func small(t *testing.T, in input, more map[string]any) job.Config {
	t.Helper()
	v := values("log_step_count_steps", 5)
	maps.Copy(v, more)
	return newConfig(t, job.ModelLogreg, in, 1, 128, v)
}

// A second run on the same model dir restores the last checkpoint and its global step goes on;
// retention keeps the last checkpoints_max_to_keep checkpoints; progress is logged every
// log_step_count_steps with step, examples/s and loss; eval mode evaluates the last checkpoint as
// the training's last evaluation did.
func TestResumeAndRetention(t *testing.T) {
	leakcheck.Check(t)
	dir := t.TempDir()
	in := clickLog(t, job.ModelLogreg, 2000)
	cfg := func(mode string) job.Config {
		return small(t, in, values("model_dir", dir, "save_checkpoints_steps", 5, "checkpoints_max_to_keep", 2, "mode", mode))
	}
	r1 := runOK(t, cfg("train"))
	if _, _, steps := r1.final(t); steps != smallSteps {
		t.Fatalf("first run: steps %d, want %d", steps, smallSteps)
	}
	if !regexp.MustCompile(`msg="training progress" step=6 loss=0\.\d+ steps_per_sec=\S+ examples_per_sec=\S+`).MatchString(r1.stderr) {
		t.Errorf("no progress line for step 6 with loss and examples/s; stderr:\n%s", r1.stderr)
	}
	st, err := checkpoint.ReadState(dir, nil)
	if err != nil || st == nil {
		t.Fatalf("state: %v, %v", st, err)
	}
	want := []string{filepath.Join(dir, "model.ckpt-15"), filepath.Join(dir, "model.ckpt-16")}
	if fmt.Sprint(st.AllModelCheckpointPaths) != fmt.Sprint(want) {
		t.Errorf("checkpoints kept %v, want %v", st.AllModelCheckpointPaths, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "model.ckpt-10.index")); !os.IsNotExist(err) {
		t.Errorf("model.ckpt-10 not deleted by retention: %v", err)
	}

	r2 := runOK(t, cfg("train"))
	if _, _, steps := r2.final(t); steps != 2*smallSteps {
		t.Errorf("second run: steps %d, want %d (the global step goes on)", steps, 2*smallSteps)
	}
	if !strings.Contains(r2.stderr, `msg="restored checkpoint" checkpoint=`+filepath.Join(dir, "model.ckpt-16")+" global_step=16") {
		t.Errorf("second run did not restore model.ckpt-16; stderr:\n%s", r2.stderr)
	}
	r3 := runOK(t, cfg("eval"))
	if lastLine(r3.stdout) != lastLine(r2.stdout) {
		t.Errorf("eval mode: %q, want the training's last evaluation %q", lastLine(r3.stdout), lastLine(r2.stdout))
	}
}

// Steps trains that many more steps, MaxSteps caps the global step, and a model dir at MaxSteps
// only evaluates.
func TestStepsAndMaxSteps(t *testing.T) {
	leakcheck.Check(t)
	dir := t.TempDir()
	in := clickLog(t, job.ModelLogreg, 2000)
	for _, c := range []struct {
		steps, maxSteps int
		want            int64
	}{
		{5, 0, 5},
		{5, 8, 8},
		{0, 8, 8},
		{100, 0, 8 + smallSteps}, // the input ends first
	} {
		cfg := small(t, in, values("model_dir", dir))
		cfg.Steps, cfg.MaxSteps = c.steps, c.maxSteps
		r := runOK(t, cfg)
		if _, _, steps := r.final(t); steps != c.want {
			t.Errorf("steps %d max_steps %d: steps %d, want %d", c.steps, c.maxSteps, steps, c.want)
		}
	}
}

// restore_dir starts a new model dir from another's last checkpoint; restore_ckpt picks an older
// one.
func TestRestoreDirAndCkpt(t *testing.T) {
	leakcheck.Check(t)
	a, b, c := t.TempDir(), t.TempDir(), t.TempDir()
	in := clickLog(t, job.ModelLogreg, 2000)
	runOK(t, small(t, in, values("model_dir", a, "save_checkpoints_steps", 5)))
	steps := func(cfg job.Config, n int) job.Config { cfg.Steps = n; return cfg }
	r := runOK(t, steps(small(t, in, values("model_dir", b, "restore_dir", a)), 4))
	if _, _, steps := r.final(t); steps != smallSteps+4 {
		t.Errorf("restore_dir: steps %d, want %d", steps, smallSteps+4)
	}
	r = runOK(t, steps(small(t, in, values("model_dir", c, "restore_dir", a, "restore_ckpt", "model.ckpt-10")), 3))
	if _, _, steps := r.final(t); steps != 13 {
		t.Errorf("restore_ckpt model.ckpt-10: steps %d, want 13", steps)
	}
	r = runOK(t, steps(small(t, in, values("model_dir", a, "restore_ckpt", "model.ckpt-5")), 1))
	if _, _, steps := r.final(t); steps != 6 {
		t.Errorf("restore_ckpt model.ckpt-5 in the model dir: steps %d, want 6", steps)
	}
}

// The controller hook server runs while training does: SaveCheckpoint saves a checkpoint of the
// current step through the estimator, GetTrainingStatus reads the global step.
func TestControllerSaveCheckpoint(t *testing.T) {
	leakcheck.Check(t)
	dir := t.TempDir()
	probe := newProbe(3)
	wait := start(t, endless(t, values("model_dir", dir)), nil, probe)
	probe.wait(t, wait)
	stopped := false
	defer func() {
		if !stopped {
			close(probe.stop)
			wait()
		}
	}()

	client, err := controller.DialModelDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	before := probe.step.Load()
	if _, err := client.SaveCheckpoint(ctx, &pb.SaveCheckpointRequest{}); err != nil {
		t.Fatalf("SaveCheckpoint: %v", err)
	}
	st, err := checkpoint.ReadState(dir, nil)
	if err != nil || st == nil {
		t.Fatalf("no checkpoint state after SaveCheckpoint: %v", err)
	}
	saved, err := checkpoint.StepOf(st.ModelCheckpointPath)
	if err != nil {
		t.Fatal(err)
	}
	if saved < before || saved > probe.step.Load() {
		t.Errorf("SaveCheckpoint saved step %d, want one between %d and %d", saved, before, probe.step.Load())
	}
	status, err := client.GetTrainingStatus(ctx, &pb.GetTrainingStatusRequest{})
	if err != nil {
		t.Fatalf("GetTrainingStatus: %v", err)
	}
	if status.GetGlobalStep() < saved {
		t.Errorf("GetTrainingStatus global step %d, before the saved %d", status.GetGlobalStep(), saved)
	}

	close(probe.stop)
	stopped = true
	r := wait()
	if r.err != nil {
		t.Fatalf("exit %d: %v; stderr:\n%s", r.code, r.err, r.stderr)
	}
	if _, _, steps := r.final(t); steps < saved {
		t.Errorf("final step %d before the saved %d", steps, saved)
	}
	if !strings.Contains(r.stdout, "  controller   127.0.0.1:") {
		t.Errorf("stdout does not say where the controller listens:\n%s", r.stdout)
	}
}

// With the zk discovery the worker registers /monolith/<deep_insight_name>/worker.0 holding its
// (the controller's) address on a real ZooKeeper while it trains; the node is gone after.
func TestZKDiscovery(t *testing.T) {
	leakcheck.Check(t)
	srv := zktest.Start(t)
	conn, _ := srv.Connect(t, 10*time.Second)
	dir := t.TempDir()
	probe := newProbe(2)
	wait := start(t, endless(t, values("model_dir", dir, "discovery_type", "zk", "zk_server", srv.Addr(),
		"deep_insight_name", "demo_job")), nil, probe)
	probe.wait(t, wait)

	node := "/monolith/demo_job/worker.0"
	got, _, err := conn.Get(node)
	addr, rerr := controller.ReadAddr(dir)
	close(probe.stop)
	r := wait()
	if err != nil || rerr != nil {
		t.Fatalf("while training: get %s: %v; controller address: %v; stderr:\n%s", node, err, rerr, r.stderr)
	}
	if string(got) != addr {
		t.Errorf("%s holds %q, want the controller's address %q", node, got, addr)
	}
	if r.err != nil {
		t.Fatalf("exit %d: %v; stderr:\n%s", r.code, r.err, r.stderr)
	}
	if ok, _, err := conn.Exists(node); err != nil || ok {
		t.Errorf("after the run: %s exists=%v (%v), want it gone", node, ok, err)
	}
	if !strings.Contains(r.stdout, "  registered   worker.0 at "+addr+" (1 of 1 workers visible)") {
		t.Errorf("stdout does not report the registration:\n%s", r.stdout)
	}
}

// The other discoveries: Primus (TF_CONFIG fixes the address and the role; registration is a
// no-op), MLP (the MLP_* variables fix them) and Consul (the reference's HTTP protocol, against
// consultest's agent, which sees the registration while training runs and the deregistration).
func TestOtherDiscoveries(t *testing.T) {
	leakcheck.Check(t)
	in := clickLog(t, job.ModelLogreg, 2000)
	tfConfig := func(typ string, index int) string {
		return fmt.Sprintf(`{"cluster":{"chief":["127.0.0.1:2220"],"worker":["127.0.0.1:2221"]},"task":{"type":%q,"index":%d}}`, typ, index)
	}
	t.Run("primus chief", func(t *testing.T) {
		r := runOK(t, small(t, in, values("model_dir", t.TempDir(), "discovery_type", "primus", "tf_config", tfConfig("chief", 0))))
		if !strings.Contains(r.stdout, "  registered   worker.0 at 127.0.0.1:2220 (") {
			t.Errorf("stdout:\n%s", r.stdout)
		}
		r.final(t)
	})
	t.Run("primus worker 1", func(t *testing.T) {
		r := start(t, small(t, in, values("model_dir", t.TempDir(), "discovery_type", "primus", "tf_config", tfConfig("worker", 0))), nil)()
		if r.code != 2 || !strings.HasPrefix(r.line, "primus discovery makes this process worker 1") {
			t.Errorf("exit %d (%q), stderr:\n%s", r.code, r.line, r.stderr)
		}
	})
	t.Run("mlp", func(t *testing.T) {
		env := trainenv.Env{"MLP_ROLE": "worker", "MLP_ROLE_INDEX": "0", "MLP_WORKER_NUM": "1", "MLP_PORT": "2230",
			"YARN_INET_ADDR": "127.0.0.1", "MLP_WORKER_0_PRIMARY_HOST": "127.0.0.1", "MLP_WORKER_0_PORT": "2230"}
		r := start(t, small(t, in, values("model_dir", t.TempDir(), "discovery_type", "mlp")), env)()
		if r.err != nil || !strings.Contains(r.stdout, "  registered   worker.0 at 127.0.0.1:2230 (1 of 1 workers visible)") {
			t.Errorf("exit %d: %v; stdout:\n%s\nstderr:\n%s", r.code, r.err, r.stdout, r.stderr)
		}
	})
	t.Run("consul", func(t *testing.T) {
		agent := consultest.Start(t)
		host, port := agent.HostPort()
		env := trainenv.Env{"CONSUL_HTTP_HOST": host, "CONSUL_HTTP_PORT": strconv.Itoa(port)}
		dir := t.TempDir()
		probe := newProbe(2)
		wait := start(t, endless(t, values("model_dir", dir, "discovery_type", "consul", "uuid", "demo-uuid")), env, probe)
		probe.wait(t, wait)
		n := 0
		for _, req := range agent.Requests() {
			if strings.HasPrefix(req.Path, "/v1/agent/service/register") {
				n++
			}
		}
		close(probe.stop)
		r := wait()
		if r.err != nil {
			t.Fatalf("exit %d: %v; stderr:\n%s", r.code, r.err, r.stderr)
		}
		if n == 0 {
			t.Errorf("no registration reached the agent while training ran: %v", agent.Requests())
		}
		deregistered := false
		for _, req := range agent.Requests() {
			deregistered = deregistered || strings.HasPrefix(req.Path, "/v1/agent/service/deregister/")
		}
		if !deregistered {
			t.Errorf("no deregistration after the run: %v", agent.Requests())
		}
	})
}
