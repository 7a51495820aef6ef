package zkreal

import (
	"errors"
	"log/slog"
	"sync"
	"time"
)

// Connection defaults.
const (
	// DefaultConnectTimeout bounds Connect's wait for the first session, as kazoo's start
	// timeout (15 s) does.
	DefaultConnectTimeout = 15 * time.Second
	// DefaultConnectWarnInterval is the least time between two WARN lines about failed
	// connection attempts.
	DefaultConnectWarnInterval = 5 * time.Second
)

// ErrConnectTimeout is the error of a Connect that got no session within Options.ConnectTimeout.
var ErrConnectTimeout = errors.New("no ZooKeeper session within the connect timeout")

// errNoHandshake is a failed attempt whose TCP connection was accepted but gave no session (a
// server that is starting or not serving, or something else listening on the port).
var errNoHandshake = errors.New("connected, but no session was established")

// connectFailures counts failed connection attempts (dials refused, handshakes without a
// session) until the next session, and logs them at WARN, at most one line per interval: an
// unreachable ensemble is retried about once a second forever, and the operator must see it
// without a line per attempt.
type connectFailures struct {
	log      *slog.Logger
	interval time.Duration

	mu       sync.Mutex
	since    time.Time // the first failure since the last session; zero: none
	total    int       // failures since the last session
	unlogged int       // failures since the last WARN line
	lastLine time.Time
	lastErr  error
}

// fail records a failed attempt on server and logs it unless a line was written less than an
// interval ago (the next line counts it).
func (f *connectFailures) fail(server string, err error) {
	f.mu.Lock()
	now := time.Now()
	if f.total == 0 {
		f.since = now
	}
	f.total++
	f.unlogged++
	f.lastErr = err
	if !f.lastLine.IsZero() && now.Sub(f.lastLine) < f.interval {
		f.mu.Unlock()
		return
	}
	attempts, total, failing := f.unlogged, f.total, now.Sub(f.since)
	f.unlogged, f.lastLine = 0, now
	f.mu.Unlock()
	f.log.Warn("ZooKeeper connection attempts failed; retrying", "server", server, "err", err,
		"attempts", attempts, "attempts_total", total, "failing_for", failing.Round(time.Millisecond))
}

// connected ends a run of failures: a session is up.
func (f *connectFailures) connected(server string) {
	f.mu.Lock()
	total, failing := f.total, time.Since(f.since)
	f.since, f.total, f.unlogged, f.lastLine, f.lastErr = time.Time{}, 0, 0, time.Time{}, nil
	f.mu.Unlock()
	if total > 0 {
		f.log.Info("ZooKeeper session established after failed connection attempts", "server", server,
			"attempts_failed", total, "failing_for", failing.Round(time.Millisecond))
	}
}

// summary returns the failures since the last session and the last one's error.
func (f *connectFailures) summary() (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.total, f.lastErr
}
