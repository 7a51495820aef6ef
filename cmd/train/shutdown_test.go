package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/zk/zktest"
)

// shutdownPSTimeout is the jobs' --ps_timeout here (the default): what the workers waited for a
// gone chief, or the chief for a gone worker, before the fix.
const shutdownPSTimeout = 30 * time.Second

// startJob starts a job of 2 parameter servers and 2 workers on zk, training long enough for the
// test to stop it (50 epochs: thousands of steps), and waits until a checkpoint of step 50 or
// later is there.
func startJob(t *testing.T, zk, name string, modelDir string) (servers, workers []*proc) {
	t.Helper()
	job := cluster{t: t, zk: zk, job: name, modelDir: modelDir, psTimeout: shutdownPSTimeout, args: []string{"--epochs=50"}}
	servers = []*proc{job.startPS(0), job.startPS(1)}
	workers = []*proc{job.startWorker(0), job.startWorker(1)}
	waitForCheckpoint(t, modelDir, 50, workers)
	return servers, workers
}

// stopServers stops the job's parameter servers.
func stopServers(t *testing.T, servers []*proc) {
	t.Helper()
	for _, s := range servers {
		s.cmd.Process.Signal(syscall.SIGTERM)
		s.wait(t, time.Minute)
	}
}

var stopLine = regexp.MustCompile(`(?m)^stopped step=(\d+)(?: examples=\d+)? (.*)$`)

// stoppedAt is the step and the words of a worker's "stopped step=<n> ..." line.
func stoppedAt(t *testing.T, p *proc) (int64, string) {
	t.Helper()
	m := stopLine.FindStringSubmatch(p.stdout.String())
	if m == nil {
		t.Fatalf("%s printed no stop line; stdout:\n%s", p.name, p.stdout.String())
	}
	step, _ := strconv.ParseInt(m[1], 10, 64)
	return step, m[2]
}

// A signal to a run of one process (the chief, its parameter servers in it) stops it in order at
// a step's end, with a final checkpoint of that step and exit status 0, and the stop line names
// the signal. Before, it said "by a signal".
func TestSignalIsNamed(t *testing.T) {
	leakcheck.Check(t)
	for _, c := range []struct {
		sig  syscall.Signal
		word string
	}{{syscall.SIGTERM, "SIGTERM"}, {syscall.SIGINT, "SIGINT"}} {
		t.Run(c.word, func(t *testing.T) {
			modelDir := filepath.Join(t.TempDir(), "m")
			p := startProc(t, "train", os.Args[0], []string{runAsTrain + "=1"}, withArgs(dnnSmall, "--epochs=500", "--model_dir="+modelDir)...)
			deadline := time.Now().Add(time.Minute)
			for !strings.Contains(p.stdout.String(), "  step 5 ") {
				select {
				case <-p.done:
					t.Fatalf("exited before step 5; stdout:\n%s\nstderr:\n%s", p.stdout.String(), p.tail())
				case <-time.After(10 * time.Millisecond):
				}
				if time.Now().After(deadline) {
					t.Fatalf("no step 5 after a minute; stdout:\n%s", p.stdout.String())
				}
			}
			if err := p.cmd.Process.Signal(c.sig); err != nil {
				t.Fatal(err)
			}
			if code := p.wait(t, time.Minute); code != 0 {
				t.Fatalf("exit status %d after %s; stderr:\n%s", code, c.word, p.tail())
			}
			step, words := stoppedAt(t, p)
			t.Logf("stopped step=%d %s", step, words)
			if want := "by " + c.word + ": the final checkpoint is saved"; words != want {
				t.Errorf("stop line %q, want %q", words, want)
			}
			if _, err := os.Stat(filepath.Join(modelDir, fmt.Sprintf("model.ckpt-%d.index", step))); err != nil {
				t.Errorf("no final checkpoint of step %d: %v", step, err)
			}
		})
	}
}

// A signal (SIGTERM, SIGINT) to either worker of a job stops the whole job in order: the
// signalled worker announces its stop in the next step's allreduce, every worker ends after that
// step, the chief saves its final checkpoint of it and evaluates, each deregisters from the
// service discovery, and all exit 0 — well within --ps_timeout. Before, only the signalled worker
// stopped: the other waited --ps_timeout (30 s) at the step gate and failed ("a worker stopped?"),
// and the chief that did so saved no final checkpoint.
func TestClusterSignalStopsTheJob(t *testing.T) {
	leakcheck.Check(t)
	zk := zktest.Start(t)
	for i, c := range []struct {
		name string
		who  int
		sig  syscall.Signal
		word string
	}{
		{"SIGTERM to worker 1", 1, syscall.SIGTERM, "SIGTERM"},
		{"SIGINT to the chief", 0, syscall.SIGINT, "SIGINT"},
	} {
		t.Run(c.name, func(t *testing.T) {
			modelDir := filepath.Join(t.TempDir(), "m")
			servers, workers := startJob(t, zk.Addr(), fmt.Sprintf("signal%d", i), modelDir)
			if err := workers[c.who].cmd.Process.Signal(c.sig); err != nil {
				t.Fatal(err)
			}
			signalled := time.Now()
			for _, w := range workers {
				if code := w.wait(t, time.Minute); code != 0 {
					t.Errorf("%s: exit status %d after %v, want 0; stdout:\n%s\nstderr:\n%s", w.name, code,
						time.Since(signalled).Round(time.Millisecond), w.stdout.String(), w.tail())
				}
			}
			elapsed := time.Since(signalled)
			t.Logf("both workers exited %v after the %s", elapsed.Round(time.Millisecond), c.word)
			if t.Failed() {
				return
			}
			if elapsed > shutdownPSTimeout/2 {
				t.Errorf("the job took %v to stop, want well within --ps_timeout %v", elapsed, shutdownPSTimeout)
			}
			chiefStep, chiefWords := stoppedAt(t, workers[0])
			workerStep, workerWords := stoppedAt(t, workers[1])
			t.Logf("chief: stopped step=%d %s; worker 1: stopped step=%d %s", chiefStep, chiefWords, workerStep, workerWords)
			if chiefStep != workerStep {
				t.Errorf("the chief stopped at step %d, worker 1 at %d", chiefStep, workerStep)
			}
			signalledWords := []string{chiefWords, workerWords}[c.who]
			if !strings.HasPrefix(signalledWords, "by "+c.word+":") {
				t.Errorf("%s's stop line %q does not name %s", workers[c.who].name, signalledWords, c.word)
			}
			if other := []string{chiefWords, workerWords}[1-c.who]; !strings.Contains(other, "another worker") {
				t.Errorf("%s's stop line %q does not say another worker stopped the job", workers[1-c.who].name, other)
			}
			if _, err := os.Stat(filepath.Join(modelDir, fmt.Sprintf("model.ckpt-%d.index", chiefStep))); err != nil {
				t.Errorf("no final checkpoint of step %d: %v", chiefStep, err)
			}
			r := result{stdout: workers[0].stdout.String(), stderr: workers[0].stderr.String()}
			if _, _, steps := r.final(t); steps != chiefStep {
				t.Errorf("the chief evaluated step %d, stopped at %d", steps, chiefStep)
			}
			if want := fmt.Sprintf("trained steps=%d (the chief evaluates)", workerStep); !strings.Contains(workers[1].stdout.String(), want) {
				t.Errorf("worker 1's stdout lacks %q:\n%s", want, workers[1].stdout.String())
			}
			for i, w := range workers {
				if want := fmt.Sprintf(`msg="deregistered from the service discovery" server_type=worker index=%d`, i); !strings.Contains(w.stderr.String(), want) {
					t.Errorf("%s did not log %q; stderr:\n%s", w.name, want, w.tail())
				}
			}
			stopServers(t, servers)
		})
	}
}

// namesChief and namesWorker1 find the task named gone in a worker's error.
var (
	namesChief   = regexp.MustCompile(`worker 0 \(the chief, [^)]*\) is gone`)
	namesWorker1 = regexp.MustCompile(`worker 1 \([^)]*\) is gone`)
)

// When the chief dies (kill -9, or its saver fails: here a directory stands where its checkpoint
// of step 100 goes), the other worker fails within a second or two, naming it; when a worker dies,
// the chief does, naming it. Before, they waited --ps_timeout (30 s) at the step gate or the
// allreduce and failed with "a worker stopped? see its log".
func TestClusterPeerGone(t *testing.T) {
	leakcheck.Check(t)
	zk := zktest.Start(t)
	for i, c := range []struct {
		name  string
		kill  int // the worker killed; -1: the chief fails in its saver
		other int
		want  *regexp.Regexp
	}{
		{"chief killed", 0, 1, namesChief},
		{"chief's saver fails", -1, 1, namesChief},
		{"worker 1 killed", 1, 0, namesWorker1},
	} {
		t.Run(c.name, func(t *testing.T) {
			modelDir := filepath.Join(t.TempDir(), "m")
			if c.kill < 0 {
				if err := os.MkdirAll(filepath.Join(modelDir, "model.ckpt-100.input.json", "in-the-way"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			servers, workers := startJob(t, zk.Addr(), fmt.Sprintf("gone%d", i), modelDir)
			var gone time.Time
			if c.kill >= 0 {
				if err := workers[c.kill].cmd.Process.Kill(); err != nil {
					t.Fatal(err)
				}
				<-workers[c.kill].done
				gone = time.Now()
			} else {
				if code := workers[0].wait(t, time.Minute); code == 0 {
					t.Fatalf("the chief exited 0 though its checkpoint of step 100 cannot be saved; stderr:\n%s", workers[0].tail())
				}
				gone = time.Now()
				t.Logf("the chief failed: %q", workers[0].errorLines())
			}
			other := workers[c.other]
			code := other.wait(t, time.Minute)
			elapsed := time.Since(gone)
			errs := other.errorLines()
			t.Logf("%s: exit %d %v after %s was gone: %q", other.name, code, elapsed.Round(time.Millisecond), []string{"the chief", "worker 1"}[1-c.other], errs)
			if code == 0 || len(errs) != 1 || !c.want.MatchString(errs[0]) {
				t.Errorf("%s: exit status %d, error lines %q; want a failure matching %q; stderr:\n%s", other.name, code, errs, c.want, other.tail())
			}
			if elapsed > shutdownPSTimeout/3 {
				t.Errorf("%s took %v to fail, want within a few seconds (not --ps_timeout %v)", other.name, elapsed, shutdownPSTimeout)
			}
			stopServers(t, servers)
		})
	}
}
