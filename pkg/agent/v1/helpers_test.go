package agentv1

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	utilsspec "github.com/monolith-go/monolith/gen/spec/agent_service/utils"
	"github.com/monolith-go/monolith/internal/faketfsbin"
	"github.com/monolith-go/monolith/pkg/agentconf"
)

// quiet is a logger for tests that do not look at the log.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestMain(m *testing.M) { faketfsbin.Main(m) }

// childProcs lists this test process's child processes (zombies included), except the java of
// a test ZooKeeper server: pid -> "comm state".
func childProcs(t *testing.T) map[int]string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("read /proc: %v", err)
	}
	self := os.Getpid()
	out := map[int]string{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses: cut at the last ')'.
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		comm := s[open+1 : end]
		fields := strings.Fields(s[end+1:])
		if len(fields) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		if ppid == self && comm != "java" {
			out[pid] = comm + " " + fields[0]
		}
	}
	return out
}

// noChildren fails the test when a child process of the test process is still around (running
// or unreaped) once the test ends.
func noChildren(t *testing.T) {
	t.Helper()
	t.Cleanup(func() {
		if left := childProcs(t); len(left) > 0 {
			t.Errorf("child processes left behind: %v", left)
			for pid := range left {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
}

// gone reports whether no process has pid any more (it was reaped).
func gone(pid int) bool {
	return syscall.Kill(pid, 0) == syscall.ESRCH
}

// script writes a shell script into dir and returns the command line running it. (sh reads the
// script as data, so no just-written executable is exec'd: no ETXTBSY.)
func script(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return "/bin/sh " + p
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func netListen(port int) (net.Listener, error) {
	return net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
}

func ptr[T any](v T) *T { return &v }

// newConf is an agent v1 config: one shard holding every PS task, this host at 127.0.0.1, free
// ports.
func newConf(t *testing.T, env map[string]string, set func(f *utilsspec.AgentConfig)) *agentconf.AgentConfig {
	t.Helper()
	e := map[string]string{"MY_HOST_IP": "127.0.0.1", "MY_HOST_IPV6": "::1", "SHARD_ID": "0",
		"MONOLITH_HOST_SHARD_N": "1", "MY_POD_NAME": "agent-v1-test"}
	for k, v := range env {
		e[k] = v
	}
	f := utilsspec.DefaultAgentConfig()
	f.Bzid, f.BaseName, f.BasePath = ptr("bz"), ptr("mdl"), ptr("/models/mdl")
	f.AgentVersion, f.NumPS = 1, 2
	f.PlatformConfigFile = ptr(filepath.Join(t.TempDir(), "platform_config_file.cfg"))
	if set != nil {
		set(&f)
	}
	c, err := agentconf.New(f, agentconf.Options{Env: agentconf.MapEnv(e), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// tctx is a context for one test's calls.
func tctx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// waitFor polls cond every 5 ms until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// fastTiming is a Timing for tests: millisecond polls, a short grace.
func fastTiming() Timing {
	return Timing{SetPollInterval: 10 * time.Millisecond, SetMaxWait: 20 * time.Second,
		PortPollInterval: 10 * time.Millisecond, PortMaxWait: 20 * time.Second, StopGrace: 5 * time.Second}
}

// stubSets is a StartedSets the test flips.
type stubSets struct {
	mu              sync.Mutex
	ps, dense       bool
	psCalls, dCalls int
}

func (s *stubSets) IsPSSetStarted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.psCalls++
	return s.ps
}

func (s *stubSets) IsDenseSetStarted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dCalls++
	return s.dense
}

func (s *stubSets) set(ps, dense bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ps, s.dense = ps, dense
}

func (s *stubSets) calls() (int, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.psCalls, s.dCalls
}
