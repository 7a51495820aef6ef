package zkmirror

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// The _realzk cases ran against a real ZooKeeper. pkg/zk/zktest starts one for tests but needs a
// testing.TB; the checker is a command, so this file starts a single-node server itself, the same
// way (Debian's zookeeper package, a free loopback port, readiness by srvr).

const (
	zkJar          = "/usr/share/java/zookeeper.jar"
	zkStartTimeout = 30 * time.Second
)

// zkLogJars bind the server's logging to log4j 1.2 (Debian's libzookeeper-java depends on both).
var zkLogJars = []string{"slf4j-log4j12.jar", "log4j-1.2.jar"}

// zkServer is a ZooKeeper server process owned by one case.
type zkServer struct {
	addr string
	dir  string
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has been reaped
}

// startZooKeeper starts a server whose files live in dir and waits until it accepts sessions.
func startZooKeeper(dir string) (*zkServer, error) {
	java, err := findJava()
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(zkJar); err != nil {
		return nil, fmt.Errorf("real ZooKeeper: no server jar (install Debian's zookeeper package): %w", err)
	}
	classpath := dir + string(os.PathListSeparator) + zkJar
	for _, j := range zkLogJars {
		if p := filepath.Join(filepath.Dir(zkJar), j); fileExists(p) {
			classpath += string(os.PathListSeparator) + p
		}
	}
	logConf := "log4j.rootLogger=INFO, FILE\nlog4j.appender.FILE=org.apache.log4j.FileAppender\n" +
		"log4j.appender.FILE.File=" + filepath.Join(dir, "zookeeper.log") + "\n" +
		"log4j.appender.FILE.layout=org.apache.log4j.PatternLayout\n" +
		"log4j.appender.FILE.layout.ConversionPattern=%d{ISO8601} %-5p [%t:%C{1}@%L] - %m%n\n"
	if err := os.WriteFile(filepath.Join(dir, "log4j.properties"), []byte(logConf), 0o644); err != nil {
		return nil, fmt.Errorf("real ZooKeeper: %w", err)
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ { // a free port can be taken before the server binds it
		port, err := freePort()
		if err != nil {
			return nil, fmt.Errorf("real ZooKeeper: %w", err)
		}
		s, err := launchZooKeeper(java, classpath, dir, port)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func launchZooKeeper(java, classpath, dir string, port int) (*zkServer, error) {
	cfg := fmt.Sprintf("tickTime=500\nminSessionTimeout=1000\nmaxSessionTimeout=20000\ndataDir=%s\n"+
		"clientPort=%d\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n"+
		"4lw.commands.whitelist=ruok,srvr\nforceSync=no\npreAllocSize=1024\n", dir, port)
	if err := os.WriteFile(filepath.Join(dir, "zoo.cfg"), []byte(cfg), 0o644); err != nil {
		return nil, fmt.Errorf("real ZooKeeper: %w", err)
	}
	out, err := os.OpenFile(filepath.Join(dir, "zookeeper.out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("real ZooKeeper: %w", err)
	}
	defer out.Close()
	cmd := exec.Command(java, "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData",
		"-cp", classpath, "org.apache.zookeeper.server.quorum.QuorumPeerMain", filepath.Join(dir, "zoo.cfg"))
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr()
	s := &zkServer{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, cmd: cmd, done: make(chan struct{})}
	// The parent-death signal fires when the thread that forked the child exits, so that thread
	// lives (locked) as long as the child.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			close(s.done)
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(s.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("real ZooKeeper: start %s: %w", java, err)
	}
	if err := s.waitReady(); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// waitReady waits until srvr answers with the version: ruok says imok before sessions are accepted.
func (s *zkServer) waitReady() error {
	deadline := time.Now().Add(zkStartTimeout)
	for {
		select {
		case <-s.done:
			return fmt.Errorf("real ZooKeeper on %s exited before it was ready (see %s)", s.addr, s.dir)
		default:
		}
		if resp, err := fourLetter(s.addr, "srvr"); err == nil && strings.HasPrefix(resp, "Zookeeper version") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("real ZooKeeper on %s not ready after %v", s.addr, zkStartTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop kills the server and waits until it has exited.
func (s *zkServer) stop() {
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
	}
	<-s.done
}

func fourLetter(addr, cmd string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(500 * time.Millisecond)); err != nil {
		return "", err
	}
	if _, err := conn.Write([]byte(cmd)); err != nil {
		return "", err
	}
	var b strings.Builder
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
	}
	return b.String(), nil
}

func findJava() (string, error) {
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
	return "", errors.New("real ZooKeeper: no java in $PATH, $JAVA_HOME/bin or /usr/bin")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
