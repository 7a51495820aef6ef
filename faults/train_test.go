package faults

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/monolith-go/monolith/faults/netns"
	"github.com/monolith-go/monolith/pkg/runner/checkpoint"
)

// trainJob is a training job of processes: parameter servers (cmd/ps) on fixed loopback ports and
// one worker (cmd/train, the chief), which finds them through Primus' TF_CONFIG.
type trainJob struct {
	t        *testing.T
	psAddrs  []string
	modelDir string
	// dial are the addresses the worker's TF_CONFIG names for the servers (proxies in front of
	// them); nil: psAddrs.
	dial []string
}

// newTrainJob picks the ports of n parameter servers.
func newTrainJob(t *testing.T, n int, modelDir string) *trainJob {
	j := &trainJob{t: t, modelDir: modelDir}
	for range n {
		j.psAddrs = append(j.psAddrs, "127.0.0.1:"+strconv.Itoa(freePort(t)))
	}
	return j
}

// tfConfig is the job's TF_CONFIG with this process's task.
func (j *trainJob) tfConfig(typ string, index int) string {
	addrs := j.psAddrs
	if typ != "ps" && j.dial != nil {
		addrs = j.dial
	}
	return fmt.Sprintf(`{"cluster":{"chief":["127.0.0.1:1"],"worker":[],"ps":["%s"]},"task":{"type":%q,"index":%d}}`,
		strings.Join(addrs, `","`), typ, index)
}

// startServers starts the job's parameter servers and waits until each serves.
func (j *trainJob) startServers() []*proc {
	t := j.t
	t.Helper()
	var out []*proc
	for i, addr := range j.psAddrs {
		_, port, _ := strings.Cut(addr, ":")
		p := startProc(t, fmt.Sprintf("ps %d", i), psBin.Path(t), nil, "--discovery_type=primus", "--tf_config="+j.tfConfig("ps", i),
			"--num_ps="+strconv.Itoa(len(j.psAddrs)), "--index="+strconv.Itoa(i), "--port="+port, "--status_addr=", "--log_level=warn")
		out = append(out, p)
	}
	for i, p := range out {
		p.waitOutput(t, time.Minute, fmt.Sprintf("registered ps.%d at %s", i, j.psAddrs[i]))
	}
	return out
}

// startWorker starts the chief: the demo's generated click log (40000 examples, 2 epochs of 157
// steps), a checkpoint every 50 steps, every parameter server call bounded by psTimeout; more
// flags override these.
func (j *trainJob) startWorker(name string, psTimeout time.Duration, more ...string) *proc {
	j.t.Helper()
	args := append([]string{"--discovery_type=primus", "--tf_config=" + j.tfConfig("chief", 0), "--num_ps=" + strconv.Itoa(len(j.psAddrs)),
		"--model_dir=" + j.modelDir, "--demo_examples=40000", "--epochs=2", "--save_checkpoints_steps=50", "--checkpoints_max_to_keep=100",
		"--log_step_count_steps=50", "--ps_timeout=" + psTimeout.String(), "--status_addr=", "--discovery_timeout=30s"}, more...)
	return startProc(j.t, name, trainBin.Path(j.t), nil, args...)
}

// finalLine is the worker's last line: "eval auc=... best auc=... loss=... steps=N".
var finalLine = regexp.MustCompile(`(?m)^eval auc=\S+ best auc=\S+ loss=\S+ steps=\d+$`)

// stopAll stops processes with SIGTERM, each exiting 0.
func stopAll(t *testing.T, ps []*proc) {
	t.Helper()
	for _, p := range ps {
		if code := p.stop(t, 30*time.Second); code != 0 {
			t.Errorf("%s: exit status %d after SIGTERM; stderr:\n%s", p.name, code, p.tail(2000))
		}
	}
}

// Scenario 1: the worker and one of its two parameter servers (PS 1) are partitioned for 10 s in
// the middle of training. The worker fails within its RPC deadline (--ps_timeout, 3 s here, with
// room for a loaded machine: 2 deadlines and 5 s), with one error naming PS 1, and exits non-zero;
// the parameter servers keep running. After the heal the job is started again on the same servers:
// it restores its last checkpoint (which replaces what the servers hold) within 30 s of the heal
// and ends exactly where an uninterrupted job ends (the same final evaluation line, to the last
// digit: a single worker resumes bit for bit), so nothing is lost.
func TestPartitionWorkerFromPS(t *testing.T) {
	netns.Require(t)
	const (
		psTimeout = 3 * time.Second
		partition = 10 * time.Second
	)
	base := t.TempDir()

	// The uninterrupted job, on servers of its own (a new job is refused on servers holding
	// another's tables).
	ref := newTrainJob(t, 2, filepath.Join(base, "reference"))
	servers := ref.startServers()
	w := ref.startWorker("reference worker", psTimeout)
	if code := w.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("the uninterrupted job: exit %d; stderr:\n%s", code, w.tail(3000))
	}
	want := finalLine.FindString(w.stdout.String())
	if want == "" {
		t.Fatalf("the uninterrupted job printed no final evaluation:\n%s", w.stdout.String())
	}
	stopAll(t, servers)

	job := newTrainJob(t, 2, filepath.Join(base, "partitioned"))
	servers = job.startServers()
	w = job.startWorker("worker", psTimeout)
	saved := waitCheckpoint(t, job.modelDir, 100, w)
	_, port, _ := strings.Cut(job.psAddrs[1], ":")
	psPort, _ := strconv.Atoi(port)
	cut := netns.Partition(t, psPort)
	code := w.wait(t, time.Minute)
	failedAfter := time.Since(cut.Since())
	errs := errorLines(w.stderr.String())
	t.Logf("the worker exited %d, %v after the partition began (after the checkpoint of step %d): %q", code, failedAfter.Round(time.Millisecond), saved, errs)
	if code == 0 || len(errs) != 1 || !namesPS1.MatchString(errs[0]) || !strings.Contains(errs[0], job.psAddrs[1]) {
		t.Errorf("the worker: exit status %d, error lines %q; want a failure naming ps 1 (%s); stderr:\n%s", code, errs, job.psAddrs[1], w.tail(3000))
	}
	if bound := 2*psTimeout + 5*time.Second; failedAfter > bound {
		t.Errorf("the worker took %v to fail, want within the RPC deadline %v (bound %v)", failedAfter, psTimeout, bound)
	}
	for _, s := range servers {
		if s.exited() {
			t.Fatalf("%s exited during the partition: %v; stderr:\n%s", s.name, s.cmd.ProcessState, s.tail(2000))
		}
	}
	time.Sleep(time.Until(cut.Since().Add(partition)))
	if err := cut.Heal(); err != nil {
		t.Fatal(err)
	}
	healed := time.Now()
	st, err := checkpoint.ReadState(job.modelDir, nil)
	if err != nil || st == nil {
		t.Fatalf("checkpoint state after the partition: %v, %v", st, err)
	}
	last, err := checkpoint.StepOf(st.ModelCheckpointPath)
	if err != nil || last < saved {
		t.Fatalf("last checkpoint %s (%v), want one of step %d or later", st.ModelCheckpointPath, err, saved)
	}

	// The job started again, on the same servers.
	w = job.startWorker("restarted worker", psTimeout)
	restored := fmt.Sprintf(`msg="restored checkpoint" checkpoint=%s global_step=%d`, st.ModelCheckpointPath, last)
	w.waitOutput(t, 30*time.Second, restored)
	recovery := time.Since(healed)
	if code := w.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("the restarted job: exit %d; stderr:\n%s", code, w.tail(3000))
	}
	got := finalLine.FindString(w.stdout.String())
	t.Logf("recovery: %v from the heal to the restarted job's restore of step %d (bound 30 s); it ended with %q, the uninterrupted job with %q",
		recovery.Round(time.Millisecond), last, got, want)
	if got != want {
		t.Errorf("the resumed job ended with %q, the uninterrupted one with %q", got, want)
	}
	stopAll(t, servers)
}

// namesPS1 finds PS 1 named in an error (the router's "ps 1 (<addr>): lookup ..." or
// "ps 1: ... apply gradients ...").
var namesPS1 = regexp.MustCompile(`\bps 1[ :]`)

// errorLines are the "train: ..." lines of a worker's stderr.
func errorLines(stderr string) []string {
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "train: ") {
			out = append(out, l)
		}
	}
	return out
}

// waitCheckpoint waits until the model dir's state names a checkpoint of step min or later and
// returns its step; the worker exiting first fails the test.
func waitCheckpoint(t *testing.T, dir string, min int64, w *proc) int64 {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if st, err := checkpoint.ReadState(dir, nil); err == nil && st != nil {
			if step, err := checkpoint.StepOf(st.ModelCheckpointPath); err == nil && step >= min {
				return step
			}
		}
		if w.exited() {
			t.Fatalf("%s exited before a checkpoint of step %d; stdout:\n%s\nstderr:\n%s", w.name, min, w.stdout.String(), w.tail(3000))
		}
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint of step %d within a minute", min)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
