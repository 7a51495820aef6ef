package zktest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// TestMain fails the run when a server started by this test binary is still running at the end.
func TestMain(m *testing.M) {
	code := m.Run()
	if pids := leftoverServers(); len(pids) > 0 {
		fmt.Fprintf(os.Stderr, "zktest: ZooKeeper processes left running: %v\n", pids)
		code = 1
	}
	os.Exit(code)
}

// leftoverServers lists the live processes whose command line carries this binary's marker.
func leftoverServers() []int {
	marker := []byte(ProcessMarker + strconv.Itoa(os.Getpid()) + "\x00")
	paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var pids []int
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(b), string(marker)) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		pids = append(pids, pid)
	}
	return pids
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func (s *Server) pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// states records a client's session states, in order.
type states struct {
	mu      sync.Mutex
	log     []zk.State
	changed chan struct{}
}

func newStates() *states { return &states{changed: make(chan struct{})} }

func (r *states) callback(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, ev.State)
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *states) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.log)
}

func (r *states) since(from int) []zk.State {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]zk.State(nil), r.log[from:]...)
}

// waitFor waits until want is recorded at an index >= from and returns that index.
func (r *states) waitFor(t *testing.T, want zk.State, from int, timeout time.Duration) int {
	t.Helper()
	deadline := time.After(timeout)
	for {
		r.mu.Lock()
		for i := from; i < len(r.log); i++ {
			if r.log[i] == want {
				r.mu.Unlock()
				return i
			}
		}
		changed := r.changed
		r.mu.Unlock()
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("no %v within %v; states since #%d: %v", want, timeout, from, r.since(from))
		}
	}
}

func TestStartCreateGet(t *testing.T) {
	t.Parallel()
	servers := []struct {
		name string
		opts []Option
	}{
		{"default", nil},
		{"short ticks", []Option{WithTickTime(200 * time.Millisecond)}},
	}
	nodes := []struct {
		path  string
		data  string
		flags int32
	}{
		{"/plain", "x", 0},
		{"/plain/child", "", 0},
		{"/ephemeral", "e", zk.FlagEphemeral},
		{"/seq-", "s", zk.FlagSequence},
	}
	for _, sc := range servers {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			s := Start(t, sc.opts...)
			t.Logf("start time: %v", s.StartupTime())
			c, _ := s.Connect(t, 4*time.Second)
			for _, n := range nodes {
				path, err := c.Create(n.path, []byte(n.data), n.flags, zk.WorldACL(zk.PermAll))
				if err != nil {
					t.Fatalf("create %s: %v", n.path, err)
				}
				if n.flags&zk.FlagSequence != 0 && path == n.path {
					t.Errorf("create %s: got %s, want a sequence suffix", n.path, path)
				}
				got, stat, err := c.Get(path)
				if err != nil || string(got) != n.data {
					t.Fatalf("get %s = %q, %v; want %q", path, got, err, n.data)
				}
				if eph := stat.EphemeralOwner == c.SessionID(); eph != (n.flags&zk.FlagEphemeral != 0) {
					t.Errorf("%s: ephemeral owner %x, session %x", path, stat.EphemeralOwner, c.SessionID())
				}
			}
			st, err := s.Srvr()
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode != "standalone" || st.Connections < 1 || st.Zxid <= 0 || st.NodeCount < len(nodes) {
				t.Errorf("srvr = %+v", st)
			}
			t.Logf("srvr: version %s, mode %s, zxid %#x, %d connections, %d nodes", st.Version, st.Mode, st.Zxid, st.Connections, st.NodeCount)
		})
	}
}

func TestRestartKeepsData(t *testing.T) {
	t.Parallel()
	s := Start(t, WithTickTime(200*time.Millisecond))
	c, _ := s.Connect(t, 4*time.Second)
	for _, p := range []string{"/a", "/a/b"} {
		if _, err := c.Create(p, []byte(p), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	before, err := s.Srvr()
	if err != nil {
		t.Fatal(err)
	}
	oldPID := s.pid()
	if pids := leftoverServers(); !slices.Contains(pids, oldPID) {
		t.Errorf("the /proc scan of TestMain misses the running server %d (found %v)", oldPID, pids)
	}
	began := time.Now()
	s.Restart()
	t.Logf("restart (kill + start) took %v, start %v", time.Since(began), s.StartupTime())
	if alive(oldPID) {
		t.Errorf("old server process %d still alive after Restart", oldPID)
	}
	after, err := s.Srvr()
	if err != nil {
		t.Fatal(err)
	}
	if after.Zxid < before.Zxid {
		t.Errorf("zxid went back from %#x to %#x", before.Zxid, after.Zxid)
	}
	c2, _ := s.Connect(t, 4*time.Second)
	for _, p := range []string{"/a", "/a/b"} {
		got, _, err := c2.Get(p)
		if err != nil || string(got) != p {
			t.Errorf("after restart get %s = %q, %v", p, got, err)
		}
	}
}

// A session outlives an outage shorter than its timeout: the client reconnects to it and its
// ephemeral nodes stay.
func TestSessionSurvivesOutage(t *testing.T) {
	t.Parallel()
	faults := []struct {
		name  string
		fault func(*Server)
	}{
		{"Restart", (*Server).Restart},
		{"StopFor 500ms", func(s *Server) { s.StopFor(500 * time.Millisecond) }},
		{"Stop then Start", func(s *Server) { s.Stop(); s.Start() }},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			s := Start(t, WithTickTime(200*time.Millisecond)) // sessions up to 4 s
			rec := newStates()
			c, _ := s.Connect(t, 4*time.Second, zk.WithEventCallback(rec.callback))
			id := c.SessionID()
			if _, err := c.Create("/eph", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
				t.Fatal(err)
			}
			mark := rec.len()
			began := time.Now()
			f.fault(s)
			i := rec.waitFor(t, zk.StateDisconnected, mark, 5*time.Second)
			rec.waitFor(t, zk.StateHasSession, i, 10*time.Second)
			t.Logf("client back %v after the fault began; states %v", time.Since(began), rec.since(mark))
			for _, st := range rec.since(mark) {
				if st == zk.StateExpired {
					t.Fatalf("session expired: %v", rec.since(mark))
				}
			}
			if got := c.SessionID(); got != id {
				t.Errorf("session %#x, want %#x", got, id)
			}
			if ok, stat, err := c.Exists("/eph"); err != nil || !ok || stat.EphemeralOwner != id {
				t.Errorf("ephemeral node after the outage: exists %v, %+v, %v", ok, stat, err)
			}
		})
	}
}

func TestExpireSession(t *testing.T) {
	t.Parallel()
	s := Start(t, WithTickTime(200*time.Millisecond))
	rec := newStates()
	c, _ := s.Connect(t, 4*time.Second, zk.WithEventCallback(rec.callback))
	id := c.SessionID()
	if _, err := c.Create("/owner", []byte("me"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	watcher, _ := s.Connect(t, 4*time.Second)
	ok, _, ch, err := watcher.ExistsW("/owner")
	if err != nil || !ok {
		t.Fatalf("exists /owner: %v %v", ok, err)
	}
	mark := rec.len()
	began := time.Now()
	if err := s.ExpireConn(c); err != nil {
		t.Fatal(err)
	}
	t.Logf("ExpireConn took %v", time.Since(began))
	select {
	case ev := <-ch:
		if ev.Type != zk.EventNodeDeleted {
			t.Errorf("watch event %+v, want EventNodeDeleted", ev)
		}
		t.Logf("ephemeral node deleted %v after ExpireConn began", time.Since(began))
	case <-time.After(5 * time.Second):
		t.Fatal("no watch event for the ephemeral node")
	}
	if ok, _, err := watcher.Exists("/owner"); err != nil || ok {
		t.Errorf("/owner after expiry: exists %v, %v", ok, err)
	}
	i := rec.waitFor(t, zk.StateExpired, mark, 10*time.Second)
	t.Logf("client saw StateExpired %v after ExpireConn began", time.Since(began))
	// go-zookeeper then opens a new session by itself.
	rec.waitFor(t, zk.StateHasSession, i, 10*time.Second)
	if got := c.SessionID(); got == id || got == 0 {
		t.Errorf("session after expiry %#x, old %#x", got, id)
	}
	t.Logf("states: %v", rec.since(mark))
}

func TestExpireSessionErrors(t *testing.T) {
	t.Parallel()
	s := Start(t, WithTickTime(200*time.Millisecond))
	rec := newStates()
	c, _ := s.Connect(t, 4*time.Second, zk.WithEventCallback(rec.callback))
	id := c.SessionID()
	passwd, ok := s.Passwd(id)
	if !ok || len(passwd) == 0 {
		t.Fatalf("no password recorded for session %#x", c.SessionID())
	}
	wrong := append([]byte(nil), passwd...)
	wrong[0] ^= 0xff
	expired, _ := s.Connect(t, 4*time.Second)
	expiredID := expired.SessionID()
	expiredPasswd, _ := s.Passwd(expiredID)
	if err := s.ExpireSession(expiredID, expiredPasswd); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		id     int64
		passwd []byte
	}{
		{"wrong password", c.SessionID(), wrong},
		{"unknown session", 0x7eadbeef, passwd},
		{"already expired", expiredID, expiredPasswd},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := s.ExpireSession(tc.id, tc.passwd); !errors.Is(err, ErrSessionInvalid) {
				t.Errorf("ExpireSession = %v, want ErrSessionInvalid", err)
			}
		})
	}
	// A refused takeover does not hurt the real session. (ZooKeeper 3.8 drops the client's
	// connection before it checks the password; the client reconnects to its session, so
	// requests may fail for about a second.)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := c.Create("/still-mine", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
		if err == nil {
			break
		}
		if time.Now().After(deadline) || (err != zk.ErrNoServer && err != zk.ErrConnectionClosed) {
			t.Fatalf("session after refused takeovers: %v; states %v", err, rec.since(0))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := c.SessionID(); got != id {
		t.Errorf("session %#x after refused takeovers, want %#x; states %v", got, id, rec.since(0))
	}
	t.Logf("client states: %v", rec.since(0))
	plain, _, err := zk.Connect([]string{s.Addr()}, 4*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if err := s.ExpireConn(plain); !errors.Is(err, ErrUnknownSession) {
		t.Errorf("ExpireConn of a client not dialed through s.Dialer = %v, want ErrUnknownSession", err)
	}
}

func TestTwoServersInParallel(t *testing.T) {
	t.Parallel()
	a, b := Start(t), Start(t)
	if a.Addr() == b.Addr() || a.Dir() == b.Dir() {
		t.Fatalf("both servers on %s / %s", a.Addr(), a.Dir())
	}
	ca, _ := a.Connect(t, 4*time.Second)
	cb, _ := b.Connect(t, 4*time.Second)
	if _, err := ca.Create("/only-a", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := cb.Exists("/only-a"); err != nil || ok {
		t.Errorf("/only-a on the other server: %v, %v", ok, err)
	}
	t.Logf("servers on %s (started in %v) and %s (%v)", a.Addr(), a.StartupTime(), b.Addr(), b.StartupTime())
}

// fatalTB records the message of a Fatalf and unwinds with a panic.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Fatalf(format string, args ...interface{}) {
	f.msg = fmt.Sprintf(format, args...)
	panic(f)
}

func (f *fatalTB) Helper() {}

func startFails(t *testing.T, opts ...Option) string {
	f := &fatalTB{TB: t}
	func() {
		defer func() {
			if r := recover(); r != nil && r != f {
				panic(r)
			}
		}()
		Start(f, opts...)
		t.Fatal("Start succeeded")
	}()
	return f.msg
}

func TestStartFails(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	takenPort := taken.Addr().(*net.TCPAddr).Port
	cases := []struct {
		name string
		opts []Option
		want []string
	}{
		{"no jar", []Option{WithJar("/nonexistent/zookeeper.jar")}, []string{"/nonexistent/zookeeper.jar", "run tools/bazel/setup.sh"}},
		{"no java", []Option{WithJava("/nonexistent/java")}, []string{"no java", "run tools/bazel/setup.sh"}},
		{"port taken", []Option{WithPort(takenPort)}, []string{"address already in use", fmt.Sprintf("127.0.0.1:%d exited before it was ready", takenPort)}},
		{"not ready in time", []Option{WithStartTimeout(time.Millisecond)}, []string{"not ready after 1ms", "127.0.0.1:", "zookeeper.log ends with"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msg := startFails(t, tc.opts...)
			t.Logf("Start failed with: %s", msg)
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q lacks %q", msg, w)
				}
			}
		})
	}
}

func TestParseSrvr(t *testing.T) {
	const real = "Zookeeper version: 3.8.0-${mvngit.commit.id}, built on 2024-12-29 17:54 UTC\n" +
		"Latency min/avg/max: 0/0.0/0\nReceived: 12\nSent: 11\nConnections: 2\nOutstanding: 0\n" +
		"Zxid: 0x1a\nMode: standalone\nNode count: 7\n"
	cases := []struct {
		name    string
		in      string
		want    Stats
		wantErr bool
	}{
		{"3.8 standalone", real, Stats{Version: "3.8.0-${mvngit.commit.id}, built on 2024-12-29 17:54 UTC",
			Mode: "standalone", Zxid: 0x1a, Connections: 2, NodeCount: 7, Received: 12, Sent: 11, Raw: real}, false},
		{"not serving", "This ZooKeeper instance is not currently serving requests\n", Stats{}, true},
		{"bad zxid", "Zookeeper version: x\nMode: standalone\nZxid: zz\n", Stats{}, true},
		{"empty", "", Stats{}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseSrvr(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if !tc.wantErr && got != tc.want {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestLaunch: a server started outside a test answers, and Close stops it and removes its
// directory; a failed Launch leaves no directory behind.
func TestLaunch(t *testing.T) {
	s, err := Launch(WithTickTime(200 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := fourLetter(s.Addr(), "srvr", 5*time.Second); err != nil || !strings.Contains(out, "Zookeeper version") {
		s.Close()
		t.Fatalf("srvr: %q, %v", out, err)
	}
	dir := s.Dir()
	s.Close()
	if s.Running() {
		t.Error("still running after Close")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("directory %s left behind: %v", dir, err)
	}
	if _, err := Launch(WithJar(filepath.Join(t.TempDir(), "none.jar"))); err == nil || !strings.Contains(err.Error(), "no ZooKeeper server jar") {
		t.Fatalf("Launch without a jar: %v", err)
	}
}
