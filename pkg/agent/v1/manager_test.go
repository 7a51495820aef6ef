package agentv1

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/leakcheck"
)

// graph is a mixed-like graph of sleeping processes: PS (with a proxy sub node), dense, entry.
type graph struct {
	m                       *ProcessMgr
	ps, proxy, dense, entry *ProcessNode
	sets                    *stubSets
}

func newGraph(t *testing.T, opts MgrOptions, entryCmd string) *graph {
	t.Helper()
	dir := t.TempDir()
	g := &graph{sets: &stubSets{}}
	g.sets.set(true, true)
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	g.m = NewProcessMgr(opts)
	g.ps = newNode(t, NodeSpec{Type: PS, Dir: dir, Cmd: script(t, dir, "ps.sh", sleeper)})
	g.proxy = newNode(t, NodeSpec{Type: Proxy, Dir: dir, Cmd: script(t, dir, "proxy.sh", sleeper)})
	g.ps.AddSubproc(g.proxy)
	g.dense = newNode(t, NodeSpec{Type: Dense, Dir: dir, Cmd: script(t, dir, "dense.sh", sleeper)})
	if entryCmd == "" {
		entryCmd = sleeper
	}
	g.entry = newNode(t, NodeSpec{Type: Entry, IsTCEMain: true, Dir: dir, Sets: g.sets, Port: freePort(t),
		Cmd: script(t, dir, "entry.sh", entryCmd)})
	// The entry's port is checked: a listener stands in for it.
	l, err := netListen(g.entry.Port())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	for _, n := range []*ProcessNode{g.ps, g.dense, g.entry} {
		g.m.AddSubproc(n)
	}
	return g
}

func (g *graph) nodes() []*ProcessNode { return []*ProcessNode{g.ps, g.proxy, g.dense, g.entry} }

func (g *graph) pids(t *testing.T) []int {
	t.Helper()
	var out []int
	for _, n := range g.nodes() {
		out = append(out, n.Pid())
	}
	return out
}

func assertAllGone(t *testing.T, pids []int) {
	t.Helper()
	for _, p := range pids {
		if p != 0 && !gone(p) {
			t.Errorf("pid %d survived", p)
		}
	}
}

// TestSupervisorTakesGraphDown: whichever process dies, the supervisor stops all the others and
// says which one exited.
func TestSupervisorTakesGraphDown(t *testing.T) {
	for i, name := range []string{"PS", "PROXY", "DENSE", "ENTRY"} {
		t.Run(name, func(t *testing.T) {
			leakcheck.Check(t)
			noChildren(t)
			g := newGraph(t, MgrOptions{}, "")
			defer g.m.KillAll()
			if err := g.m.Start(tctx(t, 20*time.Second)); err != nil {
				t.Fatal(err)
			}
			pids := g.pids(t)
			for _, p := range pids {
				if p == 0 || gone(p) {
					t.Fatalf("not every process runs: %v", pids)
				}
			}
			if err := syscall.Kill(pids[i], syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			select {
			case <-g.m.Done():
			case <-time.After(20 * time.Second):
				t.Fatal("the graph was not taken down")
			}
			err := g.m.Err()
			if !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), fmt.Sprintf("%s (pid %d) exited with returncode -9", name, pids[i])) {
				t.Fatalf("Err = %v", err)
			}
			assertAllGone(t, pids)
		})
	}
}

// TestKillAll stops everything, reports no error, and may be called again; the manager does not
// start again.
func TestKillAll(t *testing.T) {
	leakcheck.Check(t)
	noChildren(t)
	g := newGraph(t, MgrOptions{}, "")
	if err := g.m.Start(tctx(t, 20*time.Second)); err != nil {
		t.Fatal(err)
	}
	pids := g.pids(t)
	g.m.KillAll()
	select {
	case <-g.m.Done():
	default:
		t.Fatal("Done not closed after KillAll")
	}
	if err := g.m.Err(); err != nil {
		t.Fatalf("Err after KillAll = %v", err)
	}
	assertAllGone(t, pids)
	for _, n := range g.nodes() {
		if code, exited := n.Poll(); !exited || code != -int(syscall.SIGTERM) {
			t.Errorf("%v: exited %v, returncode %d: want stopped by SIGTERM", n.Type(), exited, code)
		}
	}
	g.m.KillAll()
	if err := g.m.Start(tctx(t, 20*time.Second)); err == nil {
		t.Fatal("Start after KillAll succeeded")
	}
}

// TestStartFailureKillsStarted: when a node cannot start, the ones already running are stopped.
func TestStartFailureKillsStarted(t *testing.T) {
	leakcheck.Check(t)
	noChildren(t)
	g := newGraph(t, MgrOptions{}, "exit 7\n")
	// The entry's port must stay closed for its exit to be seen: give it a port nobody holds.
	g.entry.spec.Port = freePort(t)
	err := g.m.Start(tctx(t, 20*time.Second))
	if !errors.Is(err, ErrExited) {
		t.Fatalf("Start: %v, want ErrExited", err)
	}
	<-g.m.Done()
	assertAllGone(t, g.pids(t))
}

// TestStartAbortedByKillAll: KillAll while the entry waits for the PS set ends the Start at once.
func TestStartAbortedByKillAll(t *testing.T) {
	leakcheck.Check(t)
	noChildren(t)
	g := newGraph(t, MgrOptions{}, "")
	g.sets.set(false, false)
	errc := make(chan error, 1)
	go func() { errc <- g.m.Start(tctx(t, 30*time.Second)) }()
	waitFor(t, 10*time.Second, "the entry's wait", func() bool { n, _ := g.sets.calls(); return n > 0 })
	pids := g.pids(t)
	g.m.KillAll()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Start: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Start did not return")
	}
	if g.entry.Pid() != 0 {
		t.Fatal("the entry started")
	}
	assertAllGone(t, pids)
}

// TestExitDuringStart: a PS dying while the entry waits takes the graph down and fails Start.
func TestExitDuringStart(t *testing.T) {
	leakcheck.Check(t)
	noChildren(t)
	g := newGraph(t, MgrOptions{}, "")
	g.sets.set(false, false)
	errc := make(chan error, 1)
	go func() { errc <- g.m.Start(tctx(t, 30*time.Second)) }()
	waitFor(t, 10*time.Second, "the entry's wait", func() bool { n, _ := g.sets.calls(); return n > 0 })
	pids := g.pids(t)
	if err := syscall.Kill(g.ps.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), "PS") {
			t.Fatalf("Start: %v, want the PS's exit", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Start did not return")
	}
	<-g.m.Done()
	assertAllGone(t, pids)
}

// TestFailoverRestarts: with failover on, a PS or dense process that dies is restarted and the
// graph stays up; the main process dying still takes it down.
func TestFailoverRestarts(t *testing.T) {
	leakcheck.Check(t)
	noChildren(t)
	g := newGraph(t, MgrOptions{Failover: true}, "")
	defer g.m.KillAll()
	if err := g.m.Start(tctx(t, 20*time.Second)); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*ProcessNode{g.ps, g.dense} {
		old := n.Pid()
		if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, fmt.Sprintf("%v restarted", n.Type()), func() bool {
			p := n.Pid()
			return p != old && p != 0 && !gone(p)
		})
	}
	select {
	case <-g.m.Done():
		t.Fatalf("graph taken down: %v", g.m.Err())
	default:
	}
	pids := g.pids(t)
	if err := syscall.Kill(g.entry.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.m.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the graph was not taken down")
	}
	if err := g.m.Err(); !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), "ENTRY") {
		t.Fatalf("Err = %v", err)
	}
	assertAllGone(t, pids)
}

func TestStartTwice(t *testing.T) {
	leakcheck.Check(t)
	noChildren(t)
	g := newGraph(t, MgrOptions{}, "")
	defer g.m.KillAll()
	if err := g.m.Start(tctx(t, 20*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := g.m.Start(tctx(t, 20*time.Second)); err == nil {
		t.Fatal("second Start succeeded")
	}
	if len(g.m.SubProcs()) != 3 {
		t.Fatalf("SubProcs: %d, want 3", len(g.m.SubProcs()))
	}
}
