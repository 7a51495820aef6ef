package agentv3

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/leakcheck"
	agentstatus "github.com/monolith-go/monolith/pkg/agent/status"
	"github.com/monolith-go/monolith/pkg/tfs"
)

// TestTFSRestart: with TFSRestart, a TF Serving that exits is restarted after the backoff (a new
// process from Options.TFS, sent the current config again), the backoff doubling while it keeps
// exiting; a process that cannot be made is tried again; the agent stays healthy, is not ready
// while a restart is pending, counts the restarts in Status and the metrics, and
// WaitForTermination does not return for an exit.
func TestTFSRestart(t *testing.T) {
	leakcheck.Check(t)
	var mu sync.Mutex
	var procs []*exitingTFS
	failNext := false
	last := func() *exitingTFS {
		mu.Lock()
		defer mu.Unlock()
		return procs[len(procs)-1]
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(procs)
	}
	m := agentstatus.NewMetrics()
	r := &countingReloader{}
	a, ctl := fakeAgent(t, nil, nil, func(o *Options) {
		o.TFSRestart, o.TFSRestartBackoff, o.TFSRestartBackoffMax = true, 150*time.Millisecond, time.Minute
		o.PollInterval, o.Metrics, o.Reloader = time.Millisecond, m, r
		o.ReloadBackoff, o.ReloadBackoffMax = time.Millisecond, 5*time.Millisecond
		o.TFS = func(file string) (tfs.Process, error) {
			mu.Lock()
			defer mu.Unlock()
			if failNext {
				failNext = false
				return nil, errors.New("no binary")
			}
			p := &exitingTFS{FakeWrapper: &tfs.FakeWrapper{ModelConfigFile: file}, done: make(chan struct{})}
			procs = append(procs, p)
			return p, nil
		}
	})
	declare(t, ctl, "m", ptr("latest"), "entry")
	publish(t, ctl, "m", "entry")
	settle(t, a)
	eventually(t, "ready", func() bool { return len(a.Ready(context.Background())) == 0 })
	waitCtx, cancelWait := context.WithCancel(context.Background())
	waited := make(chan error, 1)
	go func() { waited <- a.WaitForTermination(waitCtx) }()
	sent := func() int { r.mu.Lock(); defer r.mu.Unlock(); return len(r.sent) }
	before := sent()

	// kill -9: restarted after 150 ms.
	first := last()
	exitAt := time.Now()
	first.exit(-1)
	eventually(t, "not ready while the restart is pending", func() bool {
		rs := a.Ready(context.Background())
		return len(rs) == 1 && strings.HasPrefix(rs[0], "tf serving exited with code -1; restarting it (restart 1 due in ")
	})
	if err := a.Healthy(); err != nil {
		t.Errorf("unhealthy while restarting: %v", err)
	}
	if s := a.Status(context.Background()).TFS; s == nil || s.Running || s.LastExit != "exited with code -1 (killed by a signal)" || s.NextRestartAt.IsZero() {
		t.Errorf("status while restarting: %+v", s)
	}
	eventually(t, "a second process", func() bool { return count() == 2 && a.TFS() == tfs.Process(last()) })
	if d := time.Since(exitAt); d < 150*time.Millisecond {
		t.Errorf("restarted %v after the exit, want the 150 ms backoff", d)
	}
	if !first.stopped() {
		t.Error("the process that exited was not stopped (released)")
	}
	eventually(t, "ready again, the config sent again", func() bool { return len(a.Ready(context.Background())) == 0 && sent() > before })
	if s := a.Status(context.Background()).TFS; !s.Running || s.Restarts != 1 || !s.Restart || !s.NextRestartAt.IsZero() {
		t.Errorf("status after the restart: %+v", s)
	}

	// It exits again at once, and the next process cannot be made: 300 ms, then 600 ms.
	mu.Lock()
	failNext = true
	mu.Unlock()
	exitAt = time.Now()
	last().exit(3)
	eventually(t, "a third process", func() bool { return count() == 3 && a.TFS() == tfs.Process(last()) })
	if d := time.Since(exitAt); d < 900*time.Millisecond {
		t.Errorf("restarted %v after the second exit, want 300 ms + 600 ms of backoff", d)
	}
	eventually(t, "ready again", func() bool { return len(a.Ready(context.Background())) == 0 })
	s := a.Status(context.Background()).TFS
	if s.Restarts != 2 || s.RestartFailures != 1 || s.LastExit != "exited with code 3" {
		t.Errorf("status after the second restart: %+v", s)
	}
	body := scrape(t, m)
	for _, want := range []string{`monolith_agent_tfs_restarts_total{result="ok"} 2`, `monolith_agent_tfs_restarts_total{result="error"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	select {
	case err := <-waited:
		t.Fatalf("WaitForTermination returned %v on an exit", err)
	default:
	}
	cancelWait()
	if err := <-waited; err != nil {
		t.Errorf("WaitForTermination = %v after the context ended", err)
	}
	if !last().stopped() {
		t.Error("the running process was not stopped with the agent")
	}
	if !slices.ContainsFunc(procs[:2], func(p *exitingTFS) bool { return p.stopped() }) {
		t.Error("exited processes not released")
	}
}
