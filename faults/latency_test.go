package faults

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/monolith-go/monolith/faults/netns"
	"github.com/monolith-go/monolith/faults/toxic"
	"github.com/monolith-go/monolith/pkg/runner/checkpoint"
)

// summaryLines are the worker's throughput and ps lookup summary lines.
var summaryLines = regexp.MustCompile(`(?m)^(throughput|ps lookups) .*$`)

// Scenario 4: slow links and stalled connections, through toxiproxy proxies in this process on
// every link of training (worker -> PS 0, worker -> PS 1) and of serving (client -> the entry of
// agent v3's model server): 100 ms +- 50 ms of latency each way, and on the PS links a bandwidth
// of 1 MB/s server to worker.
//
// Under the latency every Predict (one every 200 ms, deadline 3 s) answers the trainer's scores,
// and training goes on. Once it has a checkpoint of step 20 (of 40) every link stalls
// (toxiproxy's timeout toxic: data stops, connections stay open) for 6 s: the worker fails within
// its RPC deadline (3 s, bound 2 deadlines and 5 s) naming a PS; Predicts time out. Once the stall
// is removed (toxiproxy closes the stalled connections) Predicts answer correctly again within
// 5 s, and the job started again through the same slow proxies restores its last checkpoint
// within 30 s and ends exactly where an unproxied job ends (the same final evaluation line): the
// latency and the stall lost nothing. The figures (step throughput and PS call latency with and
// without the proxies, Predict latency, the failures) are logged.
func TestLatencyAndStalls(t *testing.T) {
	netns.Require(t)
	ctx := tctx(t, 4*time.Minute)
	const (
		psTimeout = 3 * time.Second
		stall     = 6 * time.Second
		latency   = 100 * time.Millisecond
		jitter    = 50 * time.Millisecond
	)
	// A short job: 5120 examples, 2 epochs of 20 steps, a checkpoint every 10 steps.
	small := []string{"--demo_examples=5120", "--save_checkpoints_steps=10", "--log_step_count_steps=10"}
	base := t.TempDir()

	ref := newTrainJob(t, 2, filepath.Join(base, "reference"))
	servers := ref.startServers()
	w := ref.startWorker("reference worker", psTimeout, small...)
	if code := w.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("the unproxied job: exit %d; stderr:\n%s", code, w.tail(3000))
	}
	want := finalLine.FindString(w.stdout.String())
	refSummary := summaryLines.FindAllString(w.stdout.String(), -1)
	stopAll(t, servers)

	// Serving, behind a slow proxy.
	s := startServing(t, ctx, 10*time.Second)
	direct := newPredictor(t, ctx, s.entryAddr, s.job, 2*time.Second)
	eventually(t, time.Minute, "the entry's Predict answers the trainer's scores", func() bool {
		if s.agent.exited() {
			t.Fatalf("the agent exited: %v; stderr:\n%s", s.agent.cmd.ProcessState, s.agent.tail(3000))
		}
		_, err := direct.predict(ctx)
		return err == nil
	})
	entryProxy := toxic.Start(t, "entry", s.entryAddr)
	entryProxy.Latency("latency", toxic.Both, latency, jitter)
	pred := newPredictor(t, ctx, entryProxy.Addr, s.job, 3*time.Second)
	loop := pred.loop(ctx, 200*time.Millisecond)
	defer loop.stop()

	// Training, behind slow proxies; every link stalls once a checkpoint of step 20 is there.
	job := newTrainJob(t, 2, filepath.Join(base, "proxied"))
	var proxies []*toxic.Proxy
	for i, addr := range job.psAddrs {
		p := toxic.Start(t, fmt.Sprintf("ps_%d", i), addr)
		p.Latency("latency", toxic.Both, latency, jitter)
		p.Bandwidth("bandwidth", toxic.Downstream, 1000)
		proxies = append(proxies, p)
		job.dial = append(job.dial, p.Addr)
	}
	servers = job.startServers()
	w = job.startWorker("worker", psTimeout, small...)
	saved := waitCheckpoint(t, job.modelDir, 20, w)
	loop.mu.Lock()
	slowN, slowFailures, slowLat := loop.n, len(loop.failures), append([]time.Duration(nil), loop.lat...)
	loop.mu.Unlock()
	stalled := time.Now()
	for _, p := range append([]*toxic.Proxy{entryProxy}, proxies...) {
		p.Stall("stall", toxic.Upstream)
	}
	code := w.wait(t, time.Minute)
	failedAfter := time.Since(stalled)
	errs := errorLines(w.stderr.String())
	t.Logf("stall: the worker exited %d, %v after the stall began (after the checkpoint of step %d): %q", code, failedAfter.Round(time.Millisecond), saved, errs)
	if code == 0 || len(errs) != 1 || !namesPS.MatchString(errs[0]) {
		t.Errorf("the worker: exit status %d, error lines %q; want a failure naming a ps; stderr:\n%s", code, errs, w.tail(3000))
	}
	if bound := 2*psTimeout + 5*time.Second; failedAfter > bound {
		t.Errorf("the worker took %v to fail, want within the RPC deadline %v (bound %v)", failedAfter, psTimeout, bound)
	}
	time.Sleep(time.Until(stalled.Add(stall)))
	for _, p := range append([]*toxic.Proxy{entryProxy}, proxies...) {
		p.Remove("stall")
	}
	removed := time.Now()
	predictBack := eventually(t, 5*time.Second, "a Predict answering the trainer's scores after the stall", func() bool {
		_, err := pred.predict(ctx)
		return err == nil
	})
	loop.mu.Lock()
	n0, f0 := loop.n, len(loop.failures)
	loop.mu.Unlock()

	st, err := checkpoint.ReadState(job.modelDir, nil)
	if err != nil || st == nil {
		t.Fatalf("checkpoint state after the stall: %v, %v", st, err)
	}
	last, err := checkpoint.StepOf(st.ModelCheckpointPath)
	if err != nil || last < saved {
		t.Fatalf("last checkpoint %s (%v), want one of step %d or later", st.ModelCheckpointPath, err, saved)
	}
	w = job.startWorker("restarted worker", psTimeout, small...)
	w.waitOutput(t, 30*time.Second, fmt.Sprintf(`msg="restored checkpoint" checkpoint=%s global_step=%d`, st.ModelCheckpointPath, last))
	restarted := time.Since(removed)
	if code := w.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("the restarted job: exit %d; stderr:\n%s", code, w.tail(3000))
	}
	got := finalLine.FindString(w.stdout.String())
	t.Logf("training under %v +- %v each way, 1 MB/s from the servers (the restarted job, steps %d to 40):\n  proxied:   %s\n  unproxied: %s",
		latency, jitter, last+1, strings.Join(summaryLines.FindAllString(w.stdout.String(), -1), "\n             "), strings.Join(refSummary, "\n             "))
	stopAll(t, servers)
	loop.stop()
	loop.mu.Lock()
	defer loop.mu.Unlock()
	t.Logf("recovery: a Predict answers correctly %v after the stall's removal (bound 5 s); the restarted job restored step %d %v after it (bound 30 s) and ended with %q (unproxied: %q)",
		predictBack.Round(time.Millisecond), last, restarted.Round(time.Millisecond), got, want)
	t.Logf("Predict under %v +- %v each way: %d sent before the stall, %d failed; latency p50 %v, p99 %v, max %v; from the stall to the first correct answer after it %d of %d failed (deadline 3 s); after that %d of %d failed",
		latency, jitter, slowN, slowFailures, percentile(slowLat, 50).Round(time.Millisecond), percentile(slowLat, 99).Round(time.Millisecond),
		percentile(slowLat, 100).Round(time.Millisecond), f0-slowFailures, n0-slowN, len(loop.failures)-f0, loop.n-n0)
	if got != want {
		t.Errorf("the restarted job ended with %q, the unproxied one with %q", got, want)
	}
	if slowFailures > 0 || len(loop.failures) > f0 {
		t.Errorf("Predicts failed outside the stall: %q", loop.failures)
	}
	if s.agent.exited() {
		t.Errorf("the agent exited: %v", s.agent.cmd.ProcessState)
	}
}

// namesPS finds a PS named in an error.
var namesPS = regexp.MustCompile(`\bps [01][ :]`)
