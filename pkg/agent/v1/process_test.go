package agentv1

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	utilsspec "github.com/monolith-go/monolith/gen/spec/agent_service/utils"
	"github.com/monolith-go/monolith/internal/faketfsbin"
	"github.com/monolith-go/monolith/internal/leakcheck"
	agentbase "github.com/monolith-go/monolith/pkg/agent/base"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/errkind"
)

const (
	sleeper    = "exec sleep 30\n"
	termIgnore = "trap '' TERM\nexec sleep 30\n"
)

func TestProcessType(t *testing.T) {
	for _, c := range []struct {
		t          ProcessType
		value      int
		name, pref string
	}{
		{PS, 1, "PS", "ps"},
		{Entry, 2, "ENTRY", "entry"},
		{Proxy, 3, "PROXY", "proxy"},
		{Unkonwn, 4, "UNKONWN", "unkonwn"},
		{Dense, 5, "DENSE", "dense"},
		{ProcessType(9), 9, "ProcessType(9)", "processtype(9)"},
	} {
		if int(c.t) != c.value || c.t.String() != c.name || c.t.LogPrefix() != c.pref {
			t.Errorf("%d: got %d %q %q, want %d %q %q", c.value, int(c.t), c.t, c.t.LogPrefix(), c.value, c.name, c.pref)
		}
	}
}

func TestNewProcessNodeRejects(t *testing.T) {
	for _, c := range []struct {
		name string
		spec NodeSpec
		kind errkind.Kind
	}{
		{"unknown type", NodeSpec{Type: Unkonwn, Cmd: "x"}, errkind.Precondition},
		{"undefined type", NodeSpec{Type: 0, Cmd: "x"}, errkind.Precondition},
		{"empty command", NodeSpec{Type: PS, Cmd: "  & "}, errkind.Value},
		{"bad port", NodeSpec{Type: PS, Cmd: "x", Port: 70000}, errkind.Value},
		{"entry without sets", NodeSpec{Type: Entry, Cmd: "x"}, errkind.Precondition},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewProcessNode(c.spec)
			if err == nil || errkind.Of(err) != c.kind {
				t.Fatalf("got %v (kind %v), want kind %v", err, errkind.Of(err), c.kind)
			}
		})
	}
}

func newNode(t *testing.T, spec NodeSpec) *ProcessNode {
	t.Helper()
	if spec.Logger == nil {
		spec.Logger = quiet
	}
	if spec.Timing == (Timing{}) {
		spec.Timing = fastTiming()
	}
	n, err := NewProcessNode(spec)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestNodeRunAndKill: the process runs in its directory with its environment and its output in
// the serving log; Kill stops it with SIGTERM and reaps it.
func TestNodeRunAndKill(t *testing.T) {
	leakcheck.Check(t)
	noChildren(t)
	dir := t.TempDir()
	log := &agentbase.ServingLog{Prefix: "ps", TFSLog: filepath.Join(dir, "tfs.std.log")}
	n := newNode(t, NodeSpec{Type: PS, Dir: dir, Env: []string{"FOO=bar", "PATH=" + os.Getenv("PATH")}, Log: log,
		Cmd: script(t, dir, "run.sh", "echo \"foo=$FOO pwd=$(pwd)\"\n"+sleeper)})
	if code, exited := n.Poll(); exited || code != 0 || n.Pid() != 0 || n.Done() != nil {
		t.Fatalf("before Run: exited %v code %d pid %d", exited, code, n.Pid())
	}
	if err := n.Run(tctx(t, 20*time.Second)); err != nil {
		t.Fatal(err)
	}
	pid := n.Pid()
	if _, exited := n.Poll(); exited || pid == 0 {
		t.Fatalf("after Run: exited %v, pid %d", exited, pid)
	}
	want := fmt.Sprintf("foo=bar pwd=%s\n", dir)
	waitFor(t, 10*time.Second, "the serving log", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "ps_tfs.std.log"))
		return string(b) == want
	})
	// Run again while it runs: nothing new starts.
	if err := n.Run(tctx(t, 20*time.Second)); err != nil || n.Pid() != pid {
		t.Fatalf("second Run: %v, pid %d -> %d", err, pid, n.Pid())
	}
	n.Kill()
	code, exited := n.Poll()
	if !exited || code != -int(syscall.SIGTERM) || !gone(pid) {
		t.Fatalf("after Kill: exited %v, returncode %d (want %d), gone %v", exited, code, -int(syscall.SIGTERM), gone(pid))
	}
	if err := n.Run(tctx(t, 20*time.Second)); !errors.Is(err, ErrKilled) {
		t.Fatalf("Run after Kill: %v, want ErrKilled", err)
	}
}

// TestKillEscalates: a process ignoring SIGTERM gets SIGKILL after the grace period.
func TestKillEscalates(t *testing.T) {
	leakcheck.Check(t)
	noChildren(t)
	dir := t.TempDir()
	timing := fastTiming()
	timing.StopGrace = 100 * time.Millisecond
	n := newNode(t, NodeSpec{Type: Dense, Dir: dir, Timing: timing, Cmd: script(t, dir, "stubborn.sh", termIgnore)})
	if err := n.Run(tctx(t, 20*time.Second)); err != nil {
		t.Fatal(err)
	}
	// Give sh the time to set the trap and exec: a SIGTERM before that would end it.
	waitFor(t, 10*time.Second, "exec of sleep", func() bool {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", n.Pid()))
		return strings.TrimSpace(string(b)) == "sleep"
	})
	began := time.Now()
	n.Kill()
	if code, exited := n.Poll(); !exited || code != -int(syscall.SIGKILL) {
		t.Fatalf("returncode %d (exited %v), want %d", code, exited, -int(syscall.SIGKILL))
	}
	if el := time.Since(began); el < timing.StopGrace {
		t.Fatalf("killed after %v, before the grace period %v", el, timing.StopGrace)
	}
}

// TestKillSubprocsFirst: Kill of a node stops its sub nodes too, and none of them runs again.
func TestKillSubprocsFirst(t *testing.T) {
	leakcheck.Check(t)
	noChildren(t)
	dir := t.TempDir()
	parent := newNode(t, NodeSpec{Type: PS, Dir: dir, Cmd: script(t, dir, "p.sh", sleeper)})
	sub := newNode(t, NodeSpec{Type: Dense, Dir: dir, Cmd: script(t, dir, "s.sh", sleeper)})
	subsub := newNode(t, NodeSpec{Type: Proxy, Dir: dir, Cmd: script(t, dir, "ss.sh", sleeper)})
	sub.AddSubproc(subsub)
	parent.AddSubproc(sub)
	if err := parent.Run(tctx(t, 20*time.Second)); err != nil {
		t.Fatal(err)
	}
	pids := []int{parent.Pid(), sub.Pid(), subsub.Pid()}
	for i, p := range pids {
		if p == 0 || gone(p) {
			t.Fatalf("process %d not running (pid %d)", i, p)
		}
	}
	parent.Kill()
	for i, p := range pids {
		if !gone(p) {
			t.Errorf("process %d (pid %d) survived Kill", i, p)
		}
	}
	if err := sub.Run(tctx(t, 20*time.Second)); !errors.Is(err, ErrKilled) {
		t.Fatalf("sub Run after Kill: %v, want ErrKilled", err)
	}
}

func TestAddSubprocAndFlatten(t *testing.T) {
	mk := func(tp ProcessType) *ProcessNode {
		return newNode(t, NodeSpec{Type: tp, Cmd: "x", Sets: &stubSets{}})
	}
	ps, entry, dense, entry2, proxy := mk(PS), mk(Entry), mk(Dense), mk(Entry), mk(Proxy)
	for _, c := range []struct {
		sub  *ProcessNode
		want bool
	}{{entry, true}, {dense, true}, {entry2, false}} {
		if got := ps.AddSubproc(c.sub); got != c.want {
			t.Errorf("AddSubproc(%v) = %v, want %v", c.sub.Type(), got, c.want)
		}
	}
	entry.AddSubproc(proxy)
	other := mk(Dense)
	got := Flatten(ps, nil, other)
	want := []*ProcessNode{ps, entry, proxy, dense, other}
	if len(got) != len(want) {
		t.Fatalf("Flatten: %d nodes, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("Flatten[%d] = %v, want %v", i, got[i].Type(), want[i].Type())
		}
	}
}

func TestWaitForStarted(t *testing.T) {
	for _, c := range []struct {
		name    string
		cmd     func(t *testing.T, dir string, port int) string
		listen  bool // something else holds the port open
		maxWait time.Duration
		wantErr error
	}{
		{"exits before its port opens", func(t *testing.T, dir string, _ int) string {
			return script(t, dir, "exit.sh", "exit 3\n")
		}, false, 20 * time.Second, ErrExited},
		{"port never opens", func(t *testing.T, dir string, _ int) string {
			return script(t, dir, "run.sh", sleeper)
		}, false, 60 * time.Millisecond, ErrStartTimeout},
		{"port opened by the process", func(t *testing.T, _ string, port int) string {
			return fmt.Sprintf("%s --port=%d --fake_host=127.0.0.1 --fake_new_version_interval=0", faketfsbin.Path(t), port)
		}, false, 20 * time.Second, nil},
		{"port already open", func(t *testing.T, dir string, _ int) string {
			return script(t, dir, "run.sh", sleeper)
		}, true, 20 * time.Second, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			leakcheck.Check(t)
			noChildren(t)
			dir := t.TempDir()
			port := freePort(t)
			if c.listen {
				l, err := netListen(port)
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
			}
			timing := fastTiming()
			timing.PortMaxWait = c.maxWait
			n := newNode(t, NodeSpec{Type: PS, Dir: dir, Port: port, Timing: timing, Cmd: c.cmd(t, dir, port)})
			defer n.Kill()
			err := n.Run(tctx(t, 30*time.Second))
			if c.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				if !agentconf.CheckPortOpen(context.Background(), port) {
					t.Fatal("port not open after Run")
				}
				return
			}
			if !errors.Is(err, c.wantErr) || errkind.Of(err) != errkind.Runtime {
				t.Fatalf("Run: %v, want %v (kind Runtime)", err, c.wantErr)
			}
		})
	}
}

// TestWaitForStartedEndsWithContext: a cancelled wait for the port returns at once.
func TestWaitForStartedEndsWithContext(t *testing.T) {
	leakcheck.Check(t)
	noChildren(t)
	dir := t.TempDir()
	n := newNode(t, NodeSpec{Type: PS, Dir: dir, Port: freePort(t), Cmd: script(t, dir, "run.sh", sleeper)})
	defer n.Kill()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(30*time.Millisecond, cancel)
	if err := n.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v, want context.Canceled", err)
	}
}

// TestEntryWaitsForSets: the entry starts only once the PS set (and the dense set under
// dense_alone) has started, within the bound; nothing starts otherwise.
func TestEntryWaitsForSets(t *testing.T) {
	for _, c := range []struct {
		name       string
		denseAlone bool
		ps, dense  bool          // initially
		flipAfter  time.Duration // then both become true (0: never)
		maxWait    time.Duration
		wantErr    error
		wantDense  bool // the dense set was asked about
	}{
		{"PS set up", false, true, false, 0, 20 * time.Second, nil, false},
		{"PS set comes up", false, false, false, 50 * time.Millisecond, 20 * time.Second, nil, false},
		{"dense set comes up", true, true, false, 50 * time.Millisecond, 20 * time.Second, nil, true},
		{"PS set never up", false, false, true, 0, 80 * time.Millisecond, ErrStartTimeout, false},
		{"dense set never up", true, true, false, 0, 80 * time.Millisecond, ErrStartTimeout, true},
		{"dense set not needed", false, true, false, 0, 20 * time.Second, nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			leakcheck.Check(t)
			noChildren(t)
			dir := t.TempDir()
			sets := &stubSets{}
			sets.set(c.ps, c.dense)
			if c.flipAfter > 0 {
				time.AfterFunc(c.flipAfter, func() { sets.set(true, true) })
			}
			timing := fastTiming()
			timing.SetMaxWait = c.maxWait
			n := newNode(t, NodeSpec{Type: Entry, Dir: dir, Sets: sets, DenseAlone: c.denseAlone, Timing: timing,
				Cmd: script(t, dir, "entry.sh", sleeper)})
			defer n.Kill()
			began := time.Now()
			err := n.Run(tctx(t, 30*time.Second))
			if el := time.Since(began); el < timing.SetPollInterval {
				t.Errorf("the first check came after %v, before one poll interval", el)
			}
			psCalls, dCalls := sets.calls()
			if psCalls == 0 || (dCalls > 0) != c.wantDense {
				t.Errorf("set checks: PS %d, dense %d (want dense asked: %v)", psCalls, dCalls, c.wantDense)
			}
			if c.wantErr == nil {
				if err != nil || n.Pid() == 0 {
					t.Fatalf("Run: %v, pid %d", err, n.Pid())
				}
				return
			}
			if !errors.Is(err, c.wantErr) || n.Pid() != 0 {
				t.Fatalf("Run: %v (pid %d), want %v and no process", err, n.Pid(), c.wantErr)
			}
		})
	}
}

// TestEntryWaitEndsWithContext: a cancelled wait for the PS set starts nothing.
func TestEntryWaitEndsWithContext(t *testing.T) {
	leakcheck.Check(t)
	dir := t.TempDir()
	n := newNode(t, NodeSpec{Type: Entry, Dir: dir, Sets: &stubSets{}, Cmd: script(t, dir, "entry.sh", sleeper)})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(30*time.Millisecond, cancel)
	if err := n.Run(ctx); !errors.Is(err, context.Canceled) || n.Pid() != 0 {
		t.Fatalf("Run: %v (pid %d), want context.Canceled and no process", err, n.Pid())
	}
}

// TestFailover: a PS or dense process that is not the main one runs again; any other is killed.
func TestFailover(t *testing.T) {
	for _, c := range []struct {
		t       ProcessType
		main    bool
		restart bool
	}{
		{PS, false, true},
		{Dense, false, true},
		{PS, true, false},
		{Dense, true, false},
		{Entry, false, false},
		{Entry, true, false},
		{Proxy, false, false},
	} {
		t.Run(fmt.Sprintf("%v main=%v", c.t, c.main), func(t *testing.T) {
			leakcheck.Check(t)
			noChildren(t)
			dir := t.TempDir()
			sets := &stubSets{}
			sets.set(true, true)
			n := newNode(t, NodeSpec{Type: c.t, IsTCEMain: c.main, Dir: dir, Sets: sets, Cmd: script(t, dir, "run.sh", sleeper)})
			defer n.Kill()
			if n.Restartable() != c.restart {
				t.Fatalf("Restartable = %v, want %v", n.Restartable(), c.restart)
			}
			if err := n.Run(tctx(t, 20*time.Second)); err != nil {
				t.Fatal(err)
			}
			first := n.Pid()
			if !c.restart {
				// A running process that is not restartable is killed.
				if err := n.Failover(tctx(t, 20*time.Second)); err != nil {
					t.Fatal(err)
				}
				if !gone(first) {
					t.Fatal("failover did not kill the process")
				}
				return
			}
			if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			<-n.Done()
			if code, exited := n.Poll(); !exited || code != -int(syscall.SIGKILL) {
				t.Fatalf("after SIGKILL: exited %v, returncode %d", exited, code)
			}
			if err := n.Failover(tctx(t, 20*time.Second)); err != nil {
				t.Fatal(err)
			}
			if second := n.Pid(); second == first || gone(second) {
				t.Fatalf("not restarted: pid %d -> %d", first, second)
			}
			if _, exited := n.Poll(); exited {
				t.Fatal("restarted process reported exited")
			}
		})
	}
}

func TestTimingFor(t *testing.T) {
	conf := newConf(t, nil, func(f *utilsspec.AgentConfig) { f.DeployType = ptr("ps"); f.UpdateModelStatusInterval = 3 })
	got := TimingFor(conf, Timing{})
	want := Timing{SetPollInterval: 6 * time.Second, SetMaxWait: DefaultSetMaxWait, PortPollInterval: DefaultPortPollInterval,
		PortMaxWait: DefaultPortMaxWait, StopGrace: DefaultStopGrace}
	if got != want {
		t.Fatalf("TimingFor = %+v, want %+v", got, want)
	}
	set := Timing{SetPollInterval: time.Millisecond, SetMaxWait: 2, PortPollInterval: 3, PortMaxWait: 4, StopGrace: 5}
	if got := TimingFor(conf, set); got != set {
		t.Fatalf("TimingFor kept %+v, want %+v", got, set)
	}
}
