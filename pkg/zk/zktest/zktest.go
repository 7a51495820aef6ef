// Package zktest runs a real Apache ZooKeeper (Debian's `zookeeper` package) for tests, one
// single-node server per Start on a free loopback port, and injects faults into it: stop, restart,
// an outage of a given length, and the expiry of a client's session.
//
//	s := zktest.Start(t, zktest.WithTickTime(200*time.Millisecond))
//	c, _ := s.Connect(t, 2*time.Second) // a go-zookeeper client; s.ExpireConn(c) expires its session
//	s.StopFor(500 * time.Millisecond)   // the session outlives a short outage
//
// Each server lives in its own t.TempDir() (zoo.cfg, log4j.properties, the snapshots and
// transaction logs under version-2/, the server's log zookeeper.log and its standard output
// zookeeper.out); t.Cleanup kills it and removes the directory, and prints the end of its log
// when the test has failed. The Java process is started with PR_SET_PDEATHSIG on Linux, so it
// dies with the test binary even when the binary is killed before its cleanups run.
//
// Start and the fault methods report failures with t.Fatalf, so call them from the goroutine
// running the test. Launch starts a server outside a test (the parity checker's real-ZooKeeper
// cases) in its own temporary directory, which Close removes.
package zktest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// DefaultJar is where Debian's zookeeper package installs the server.
const DefaultJar = "/usr/share/java/zookeeper.jar"

// ProcessMarker is a JVM system property on every server's command line, set to the id of the
// process that started it (-Dzktest.parent=PID), so leaks can be found in /proc.
const ProcessMarker = "-Dzktest.parent="

// logJars bind the server's SLF4J logging to log4j 1.2; Debian's libzookeeper-java depends on both.
var logJars = []string{"slf4j-log4j12.jar", "log4j-1.2.jar"}

const setupHint = "ZooKeeper tests need Java and Debian's zookeeper package: run tools/bazel/setup.sh"

type config struct {
	tick         time.Duration
	minSession   time.Duration
	maxSession   time.Duration
	startTimeout time.Duration
	port         int
	java         string
	jar          string
	extra        [][2]string
}

// Option configures Start.
type Option func(*config)

// WithTickTime sets ZooKeeper's tickTime (default 2 s). Unless WithSessionTimeouts says otherwise,
// sessions may last from 2 to 20 ticks, as in ZooKeeper; a tick of 200 ms allows 400 ms to 4 s.
func WithTickTime(d time.Duration) Option { return func(c *config) { c.tick = d } }

// WithSessionTimeouts sets minSessionTimeout and maxSessionTimeout: the server clamps the session
// timeout a client asks for into [min, max].
func WithSessionTimeouts(min, max time.Duration) Option {
	return func(c *config) { c.minSession, c.maxSession = min, max }
}

// WithStartTimeout bounds how long Start (and every restart) waits for the server to accept
// sessions (default 30 s).
func WithStartTimeout(d time.Duration) Option { return func(c *config) { c.startTimeout = d } }

// WithPort makes the server listen on a given loopback port instead of a free one.
func WithPort(port int) Option { return func(c *config) { c.port = port } }

// WithConfig adds a line key=value to zoo.cfg, after the ones zktest writes (a later key wins).
func WithConfig(key, value string) Option {
	return func(c *config) { c.extra = append(c.extra, [2]string{key, value}) }
}

// WithJava sets the java binary (default: java from $PATH, then $JAVA_HOME/bin/java).
func WithJava(path string) Option { return func(c *config) { c.java = path } }

// WithJar sets the ZooKeeper server jar (default DefaultJar).
func WithJar(path string) Option { return func(c *config) { c.jar = path } }

// Server is a ZooKeeper server owned by one test (Start) or one caller (Launch).
type Server struct {
	t         reporter
	cfg       config
	dir       string
	ownDir    bool // made by Launch: Close removes it
	port      int
	classpath string

	mu       sync.Mutex
	proc     *process // nil while stopped
	startDur time.Duration
	sessions map[int64][]byte // session id -> password, from handshakes seen by Dialer
}

type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited and been reaped
	err  error         // cmd.Wait's error, set before done is closed
}

// Start starts a single-node ZooKeeper and waits until it accepts sessions. It fails the test
// (never skips it) when java or the ZooKeeper jar is missing, or when the server is not ready
// within the start timeout. t.Cleanup stops the server and removes its directory.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s, err := newServer(t, t.TempDir(), opts)
	if err != nil {
		t.Fatalf("zktest: %v", err)
	}
	// Registered after t.TempDir, so it runs before the directory is removed.
	t.Cleanup(s.cleanup)
	return s
}

// Launch starts a server outside a test (a command such as the parity checker) in a new
// temporary directory; Close stops it and removes the directory. Its fault methods (Start,
// Restart, StopFor) panic where a test's server would fail the test.
func Launch(opts ...Option) (*Server, error) {
	dir, err := os.MkdirTemp("", "zktest-")
	if err != nil {
		return nil, fmt.Errorf("zktest: %w", err)
	}
	s, err := newServer(launchReporter{}, dir, opts)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("zktest: %w", err)
	}
	s.ownDir = true
	return s, nil
}

// Close stops a server made by Launch and removes its directory.
func (s *Server) Close() {
	s.cleanup()
	if s.ownDir {
		os.RemoveAll(s.dir)
	}
}

// reporter is what a Server needs of a test: testing.TB, or launchReporter outside tests.
type reporter interface {
	Helper()
	Logf(format string, args ...any)
	Fatalf(format string, args ...any)
	Failed() bool
}

// launchReporter serves servers made by Launch: nothing to log to, and a failure of a fault
// method panics, as there is no test to fail.
type launchReporter struct{}

func (launchReporter) Helper()                           {}
func (launchReporter) Logf(string, ...any)               {}
func (launchReporter) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (launchReporter) Failed() bool                      { return false }

// newServer configures a server in dir and starts it, retrying on a port taken meanwhile.
func newServer(r reporter, dir string, opts []Option) (*Server, error) {
	cfg := config{tick: 2 * time.Second, startTimeout: 30 * time.Second, jar: DefaultJar}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.minSession == 0 {
		cfg.minSession = 2 * cfg.tick
	}
	if cfg.maxSession == 0 {
		cfg.maxSession = 20 * cfg.tick
	}
	java, err := findJava(cfg.java)
	if err != nil {
		return nil, fmt.Errorf("%v; %s", err, setupHint)
	}
	cfg.java = java
	if _, err := os.Stat(cfg.jar); err != nil {
		return nil, fmt.Errorf("no ZooKeeper server jar: %v; %s", err, setupHint)
	}
	s := &Server{t: r, cfg: cfg, dir: dir, sessions: map[int64][]byte{}}
	s.classpath = s.dir + string(os.PathListSeparator) + cfg.jar
	for _, j := range logJars {
		if p := filepath.Join(filepath.Dir(cfg.jar), j); fileExists(p) {
			s.classpath += string(os.PathListSeparator) + p
		}
	}
	logConf := fmt.Sprintf(log4jProperties, filepath.Join(s.dir, "zookeeper.log"))
	if err := os.WriteFile(filepath.Join(s.dir, "log4j.properties"), []byte(logConf), 0o644); err != nil {
		return nil, err
	}
	// A free port can be taken by another process before the server binds it: try a few.
	for attempt := 1; ; attempt++ {
		s.port = cfg.port
		if s.port == 0 {
			if s.port, err = freePort(); err != nil {
				return nil, err
			}
		}
		if err = s.writeConfig(); err != nil {
			return nil, err
		}
		err = s.start()
		if err == nil || cfg.port != 0 || attempt == 3 || !errors.Is(err, errAddrInUse) {
			break
		}
		r.Logf("zktest: port %d was taken, trying another one", s.port)
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Addr is the server's client address, "127.0.0.1:port".
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Port is the server's client port.
func (s *Server) Port() int { return s.port }

// Dir is the server's directory: its configuration, data (version-2/) and logs.
func (s *Server) Dir() string { return s.dir }

// LogPath is the server's log file.
func (s *Server) LogPath() string { return filepath.Join(s.dir, "zookeeper.log") }

// StartupTime is how long the latest start took, from launching java until srvr answered.
func (s *Server) StartupTime() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.startDur
}

// Running reports whether the server process is up (it may not be accepting sessions yet only
// while Start is in progress).
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil
}

// Stop kills the server (SIGKILL, like a crash) and waits for it to exit. Data and sessions are
// kept in its directory: ZooKeeper writes every transaction to its log before answering, so
// nothing acknowledged is lost. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		s.proc.kill()
		s.proc = nil
	}
}

// Start starts a stopped server again on the same directory and port and waits until it accepts
// sessions. Sessions that had not expired when it stopped are still valid: ZooKeeper restores
// them with a fresh timeout, so clients that reconnect within it keep their session and
// ephemeral nodes. Starting a running server does nothing.
func (s *Server) Start() {
	s.t.Helper()
	if err := s.start(); err != nil {
		s.t.Fatalf("zktest: restart: %v", err)
	}
}

// Restart stops the server and starts it again.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.Start()
}

// StopFor stops the server, waits d, and starts it again: an outage of about d plus the start time.
func (s *Server) StopFor(d time.Duration) {
	s.t.Helper()
	s.Stop()
	time.Sleep(d)
	s.Start()
}

func (s *Server) writeConfig() error {
	var b strings.Builder
	fmt.Fprintf(&b, "tickTime=%d\n", s.cfg.tick.Milliseconds())
	fmt.Fprintf(&b, "minSessionTimeout=%d\n", s.cfg.minSession.Milliseconds())
	fmt.Fprintf(&b, "maxSessionTimeout=%d\n", s.cfg.maxSession.Milliseconds())
	fmt.Fprintf(&b, "dataDir=%s\n", s.dir)
	fmt.Fprintf(&b, "clientPort=%d\n", s.port)
	b.WriteString("clientPortAddress=127.0.0.1\n")
	b.WriteString("admin.enableServer=false\n")
	b.WriteString("4lw.commands.whitelist=ruok,srvr\n")
	// Tests need no fsync (a killed process loses nothing written) nor 64 MB preallocated logs.
	b.WriteString("forceSync=no\n")
	b.WriteString("preAllocSize=1024\n")
	for _, kv := range s.cfg.extra {
		fmt.Fprintf(&b, "%s=%s\n", kv[0], kv[1])
	}
	return os.WriteFile(filepath.Join(s.dir, "zoo.cfg"), []byte(b.String()), 0o644)
}

var errAddrInUse = errors.New("address already in use")

// start launches the server unless it is running and waits until srvr answers with the version.
func (s *Server) start() error {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		return nil
	}
	out, err := os.OpenFile(filepath.Join(s.dir, "zookeeper.out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	logSize := fileSize(s.LogPath())
	cmd := exec.Command(s.cfg.java,
		"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData",
		ProcessMarker+strconv.Itoa(os.Getpid()),
		"-cp", s.classpath,
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", filepath.Join(s.dir, "zoo.cfg"))
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr()
	began := time.Now()
	p, err := launch(cmd)
	if err != nil {
		return fmt.Errorf("starting %s: %v", s.cfg.java, err)
	}
	if err := s.waitReady(p, began); err != nil {
		p.kill()
		if strings.Contains(s.logSince(logSize), "Address already in use") {
			err = fmt.Errorf("%w: %v", errAddrInUse, err)
		}
		return err
	}
	s.proc = p
	s.startDur = time.Since(began)
	s.t.Logf("zktest: ZooKeeper on %s ready in %v", s.Addr(), s.startDur.Round(time.Millisecond))
	return nil
}

// launch starts cmd from a goroutine locked to its OS thread: PR_SET_PDEATHSIG fires when the
// thread that forked the child exits, so that thread must live as long as the child.
func launch(cmd *exec.Cmd) (*process, error) {
	p := &process{cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

func (p *process) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

func (s *Server) waitReady(p *process, began time.Time) error {
	deadline := began.Add(s.cfg.startTimeout)
	var last string
	for {
		select {
		case <-p.done:
			return fmt.Errorf("ZooKeeper on %s exited before it was ready (%v); log %s ends with:\n%s",
				s.Addr(), p.err, s.LogPath(), s.logTail(30))
		default:
		}
		// ruok answers imok before the server accepts sessions; srvr answers with the version
		// only once it does ("This ZooKeeper instance is not currently serving requests" before).
		resp, err := fourLetter(s.Addr(), "srvr", 500*time.Millisecond)
		if err == nil && strings.HasPrefix(resp, "Zookeeper version") {
			return nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("srvr answered %q", firstLine(resp))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ZooKeeper on %s not ready after %v (last: %s); log %s ends with:\n%s",
				s.Addr(), s.cfg.startTimeout, last, s.LogPath(), s.logTail(30))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *Server) cleanup() {
	s.Stop()
	if s.t.Failed() {
		s.t.Logf("zktest: ZooKeeper on %s: the last lines of %s:\n%s", s.Addr(), s.LogPath(), s.logTail(40))
	}
}

// logTail returns the last n lines of the server's log and of its standard output.
func (s *Server) logTail(n int) string {
	var b strings.Builder
	for _, name := range []string{"zookeeper.log", "zookeeper.out"} {
		if tail := tailFile(filepath.Join(s.dir, name), n); tail != "" {
			if name == "zookeeper.out" {
				b.WriteString("--- standard output and error:\n")
			}
			b.WriteString(tail)
		}
	}
	if b.Len() == 0 {
		return "(empty)"
	}
	return b.String()
}

func (s *Server) logSince(offset int64) string {
	b, err := os.ReadFile(s.LogPath())
	if err != nil || int64(len(b)) < offset {
		return ""
	}
	return string(b[offset:])
}

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return ""
	}
	if len(b) > 64<<10 {
		b = b[len(b)-64<<10:]
	}
	lines := bytes.SplitAfter(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, nil)) + "\n"
}

func fileSize(path string) int64 {
	if fi, err := os.Stat(path); err == nil {
		return fi.Size()
	}
	return 0
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func findJava(java string) (string, error) {
	if java != "" {
		if _, err := os.Stat(java); err != nil {
			return "", fmt.Errorf("no java: %v", err)
		}
		return java, nil
	}
	if p, err := exec.LookPath("java"); err == nil {
		return p, nil
	}
	candidates := []string{"/usr/bin/java"}
	if home := os.Getenv("JAVA_HOME"); home != "" {
		candidates = append([]string{filepath.Join(home, "bin", "java")}, candidates...)
	}
	for _, p := range candidates {
		if fileExists(p) {
			return p, nil
		}
	}
	return "", errors.New("no java in $PATH, $JAVA_HOME/bin or /usr/bin")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

const log4jProperties = `# Written by zktest: the server logs to a file in its directory, not to the test's output.
log4j.rootLogger=INFO, FILE
log4j.appender.FILE=org.apache.log4j.FileAppender
log4j.appender.FILE.File=%s
log4j.appender.FILE.Append=true
log4j.appender.FILE.layout=org.apache.log4j.PatternLayout
log4j.appender.FILE.layout.ConversionPattern=%%d{ISO8601} %%-5p [%%t:%%C{1}@%%L] - %%m%%n
`
