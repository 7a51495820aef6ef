// The fault suite (issue 32 item 7, "partitions, not just kills"): the system's parts, mostly the
// real binaries of cmd/, run in a private network namespace of the test's (faults/netns), where
// partitions are iptables DROP rules on their ports, and latency, bandwidth and stalled
// connections come from toxiproxy proxies in the test's process placed between the parts
// (faults/toxic: these machines' kernel has no netem). Each scenario states its bound on recovery
// and logs what it measured ("recovery: ...").
//
// Run it alone: go test ./faults/... (as root, with iptables installed; else it skips), or bazel
// test --test_tag_filters=faults //... .
package faults

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monolith-go/monolith/faults/netns"
	"github.com/monolith-go/monolith/internal/cmdbin"
	"github.com/monolith-go/monolith/internal/syncbuf"
)

// The binaries of cmd/ the scenarios run: under Bazel the built ones (-<name>=$(rootpath
// //cmd/<name>)), else go build's.
var (
	modelServerBin = cmdbin.New("model_server", "github.com/monolith-go/monolith/cmd/model_server")
	psBin          = cmdbin.New("ps", "github.com/monolith-go/monolith/cmd/ps")
	trainBin       = cmdbin.New("train", "github.com/monolith-go/monolith/cmd/train")
	agentBin       = cmdbin.New("agent", "github.com/monolith-go/monolith/cmd/agent")
)

// TestMain runs the tests in a private network namespace (netns.Main re-executes the test binary
// there), or skips them where none can be made.
func TestMain(m *testing.M) {
	flag.Parse()
	code := netns.Main(m)
	for _, b := range []*cmdbin.Binary{modelServerBin, psBin, trainBin, agentBin} {
		b.Cleanup()
	}
	os.Exit(code)
}

// tctx is a context that ends within d, or with the test.
func tctx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// freePort is a loopback port nothing listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	return lis.Addr().(*net.TCPAddr).Port
}

// eventually polls cond every 20 ms until it holds, and returns how long that took; it fails t
// after within.
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	begin := time.Now()
	for !cond() {
		if time.Since(begin) > within {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(begin)
}

// proc is a process a scenario started.
type proc struct {
	name           string
	cmd            *exec.Cmd
	stdout, stderr syncbuf.Buffer
	done           chan struct{}
}

// startProc starts bin with args (env added to the test's environment); it is killed when the
// test ends, if still running, and the end of its stderr is logged when the test failed.
func startProc(t testing.TB, name, bin string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("%s: stderr:\n%s", p.name, p.tail(3000))
		}
	})
	return p
}

// kill kills the process (if running) and waits for it.
func (p *proc) kill() {
	select {
	case <-p.done:
	default:
		p.cmd.Process.Kill()
		<-p.done
	}
}

// stop sends SIGTERM and waits (at most within) for the exit; it returns the exit status.
func (p *proc) stop(t testing.TB, within time.Duration) int {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	return p.wait(t, within)
}

// wait waits for the process's exit (at most within) and returns its exit status.
func (p *proc) wait(t testing.TB, within time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(within):
		p.kill()
		t.Fatalf("%s did not exit within %v; stderr:\n%s", p.name, within, p.tail(3000))
		return -1
	}
}

// exited reports whether the process has exited.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// tail is the end of the process's stderr.
func (p *proc) tail(n int) string {
	s := p.stderr.String()
	if len(s) > n {
		s = "..." + s[len(s)-n:]
	}
	return s
}

// waitOutput waits until the process's stdout (or stderr) holds s, failing t when it exits first
// or within passes.
func (p *proc) waitOutput(t testing.TB, within time.Duration, s string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(p.stdout.String(), s) && !strings.Contains(p.stderr.String(), s) {
		if p.exited() {
			t.Fatalf("%s exited (%v) before printing %q; stdout:\n%s\nstderr:\n%s", p.name, p.cmd.ProcessState, s, p.stdout.String(), p.tail(3000))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no %q within %v; stderr:\n%s", p.name, s, within, p.tail(3000))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// rate is a count per second over a window, for the reports.
func rate(n int, d time.Duration) string { return fmt.Sprintf("%.1f/s", float64(n)/d.Seconds()) }

// A partition is silent: a connect to a partitioned port times out (its SYNs are dropped), where
// one to a port nothing listens on is refused at once; healed, the port answers again. (Main
// checks this too before any test runs.)
func TestPartitionIsSilent(t *testing.T) {
	netns.Require(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	closed := freePort(t)
	begin := time.Now()
	_, err = net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(closed), time.Second)
	refused := time.Since(begin)
	if err == nil || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("a connect to a closed port: %v, want refused", err)
	}
	cut := netns.Partition(t, ln.Addr().(*net.TCPAddr).Port)
	begin = time.Now()
	_, err = net.DialTimeout("tcp", ln.Addr().String(), time.Second)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("a connect to the partitioned port: %v after %v, want a timeout", err, time.Since(begin))
	}
	t.Logf("a connect to a partitioned port timed out after %v (one to a closed port was refused in %v)", time.Since(begin).Round(time.Millisecond), refused)
	if err := cut.Heal(); err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatalf("a connect to the healed port: %v", err)
	}
	c.Close()
}
