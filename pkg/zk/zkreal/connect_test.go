package zkreal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/zk/zktest"
)

// logCapture is a JSON slog handler's output, safe for concurrent writers.
type logCapture struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logCapture) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logCapture) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(l, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// lines returns the records of level whose message is msg.
func (l *logCapture) lines(t *testing.T, level, msg string) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["level"] == level && rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

const (
	failedMsg    = "ZooKeeper connection attempts failed; retrying"
	recoveredMsg = "ZooKeeper session established after failed connection attempts"
)

// closedPorts returns loopback addresses nothing listens on (ports just freed).
func closedPorts(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, l.Addr().String())
		l.Close()
	}
	return out
}

// TestConnectUnreachable (issue 21 item 6): with no server reachable, Connect gives up after
// ConnectTimeout with an error naming the servers, the time waited and the failed attempts, and
// the attempts are logged at WARN, at most one line per ConnectWarnInterval, each line counting
// the attempts since the previous one. The caller's context still ends the wait first when it is
// shorter.
func TestConnectUnreachable(t *testing.T) {
	cases := []struct {
		name           string
		servers        int
		connectTimeout time.Duration
		warnInterval   time.Duration
		ctxTimeout     time.Duration
		wantErr        error
		wantLines      [2]int // bounds of the WARN lines
	}{
		// One server: an attempt about every second (go-zookeeper's back-off), one line within the
		// default interval of 5 s.
		{"one server, default interval", 1, 2 * time.Second, 0, 30 * time.Second, ErrConnectTimeout, [2]int{1, 1}},
		// Three servers: three attempts each second, a line at most every second.
		{"three servers, 1 s interval", 3, 2200 * time.Millisecond, time.Second, 30 * time.Second, ErrConnectTimeout, [2]int{2, 4}},
		{"caller's context ends first", 1, 10 * time.Second, 0, 1200 * time.Millisecond, context.DeadlineExceeded, [2]int{1, 1}},
		{"no connect timeout", 1, -1, 0, 1200 * time.Millisecond, context.DeadlineExceeded, [2]int{1, 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			var logs logCapture
			servers := closedPorts(t, tc.servers)
			ctx, cancel := context.WithTimeout(context.Background(), tc.ctxTimeout)
			defer cancel()
			began := time.Now()
			c, err := Connect(ctx, Options{Servers: servers, ConnectTimeout: tc.connectTimeout,
				ConnectWarnInterval: tc.warnInterval, Logger: logs.logger()})
			took := time.Since(began)
			if err == nil {
				c.Close()
				t.Fatal("Connect to closed ports succeeded")
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Connect: %v; want %v", err, tc.wantErr)
			}
			if tc.wantErr == ErrConnectTimeout && errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Connect: %v: the connect timeout must not read as the caller's deadline", err)
			}
			// Bounded: the shorter of the two limits, plus the ongoing attempt's grace.
			limit := tc.ctxTimeout
			if tc.connectTimeout > 0 {
				limit = min(limit, tc.connectTimeout)
			}
			if took > limit+5*time.Second {
				t.Errorf("Connect returned after %v; its limit was %v", took, limit)
			}
			msg := err.Error()
			for _, s := range servers {
				if !strings.Contains(msg, s) {
					t.Errorf("error %q does not name server %s", msg, s)
				}
			}
			for _, want := range []string{"waited ", "connection attempts failed", "connection refused"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not say %q", msg, want)
				}
			}

			lines := logs.lines(t, "WARN", failedMsg)
			t.Logf("after %v: %v; WARN lines: %v", took.Round(time.Millisecond), err, lines)
			if len(lines) < tc.wantLines[0] || len(lines) > tc.wantLines[1] {
				t.Fatalf("%d WARN lines %v; want %d to %d", len(lines), lines, tc.wantLines[0], tc.wantLines[1])
			}
			logged := 0
			for i, l := range lines {
				n, _ := l["attempts"].(float64)
				total, _ := l["attempts_total"].(float64)
				logged += int(n)
				if n < 1 || int(total) != logged {
					t.Errorf("line %d: attempts %v, attempts_total %v; want >= 1 and %d", i, l["attempts"], l["attempts_total"], logged)
				}
				if srv, _ := l["server"].(string); !strings.Contains(strings.Join(servers, ","), srv) || srv == "" {
					t.Errorf("line %d names server %q, not one of %v", i, srv, servers)
				}
			}
			// Rate-limited: fewer lines than attempts, and the attempts in between are counted.
			attempts := attemptsIn(t, msg)
			if attempts < 2 || len(lines) >= attempts || logged > attempts {
				t.Errorf("%d attempts, %d WARN lines counting %d: want several attempts, fewer lines", attempts, len(lines), logged)
			}
		})
	}
}

// attemptsIn reads "N connection attempts failed" from a Connect error.
func attemptsIn(t *testing.T, msg string) int {
	t.Helper()
	before, _, ok := strings.Cut(msg, " connection attempts failed")
	if !ok {
		t.Fatalf("no attempt count in %q", msg)
	}
	fields := strings.Fields(before)
	var n int
	if _, err := fmt.Sscan(fields[len(fields)-1], &n); err != nil {
		t.Fatalf("attempt count in %q: %v", msg, err)
	}
	return n
}

// TestReconnectLogged: losing the server is logged at WARN while the client retries, and the
// session coming back at INFO with the number of failed attempts.
func TestReconnectLogged(t *testing.T) {
	srv := zktest.Start(t)
	var logs logCapture
	connect(t, srv, Options{SessionTimeout: 10 * time.Second, Logger: logs.logger()})
	srv.Stop()
	eventually(t, 10*time.Second, "a WARN line about the failed attempts", func() bool {
		return len(logs.lines(t, "WARN", failedMsg)) > 0
	})
	srv.Start()
	eventually(t, 20*time.Second, "an INFO line about the session coming back", func() bool {
		return len(logs.lines(t, "INFO", recoveredMsg)) > 0
	})
	rec := logs.lines(t, "INFO", recoveredMsg)[0]
	if n, _ := rec["attempts_failed"].(float64); n < 1 {
		t.Errorf("recovery line %v: want attempts_failed >= 1", rec)
	}
}
