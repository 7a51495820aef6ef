// Package netns runs a test binary inside a private network namespace of its own, where network
// partitions are iptables rules that touch nothing outside it.
//
// A fault suite's TestMain calls Main: the test binary re-executes itself in a new network
// namespace (clone with CLONE_NEWNET, which needs root or CAP_SYS_ADMIN), and the child brings
// its loopback interface up, checks that the namespace is a fresh one (no interface but lo, no
// route off lo, no iptables rule, another namespace than the parent's), checks that a partition is
// silent (a connect to a port whose packets are dropped times out, it is not refused), and only
// then runs the tests. Every process a test starts inherits the namespace, so all their traffic is
// on the namespace's 127.0.0.1 and nothing can leave the machine. Where the namespace cannot be
// made (not root) or iptables is not installed, the tests run in the parent, and where iptables
// does not work in the namespace, in the namespace; Require skips them, saying why. A namespace
// that is not a fresh one fails the test binary before any test runs.
//
// Partition drops every TCP packet to and from some ports (iptables DROP in INPUT, which loopback
// traffic crosses once each way): connections being made hang in SYN retransmission, established
// ones stop in both directions, and nothing is refused or reset, as in a real network partition.
// Heal removes the rules; the connections resume as TCP retransmits.
package netns

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// insideEnv marks the re-executed child; its value is the parent's network namespace (the
// inode of /proc/self/ns/net), which the child's must differ from.
const insideEnv = "MONOLITH_FAULTS_NETNS_PARENT"

// skipReason is why the tests cannot run here ("" inside the namespace).
var skipReason string

// iptables are the paths of iptables and (when installed) ip6tables.
var iptables, ip6tables string

// Main runs m's tests in a private network namespace and returns the exit status: the
// re-executed child's, or m.Run's here when no namespace can be made (Require then skips).
// flag.Parse must have run.
func Main(m *testing.M) int {
	if parent, ok := os.LookupEnv(insideEnv); ok {
		unusable, err := setUp(parent)
		if err != nil {
			fmt.Fprintf(os.Stderr, "netns: the private network namespace is not what the fault tests need: %v\n", err)
			return 1
		}
		if unusable != nil {
			skipReason = "iptables does not work in the private network namespace: " + unusable.Error()
		}
		return m.Run()
	}
	var err error
	if iptables, err = lookTool("iptables"); err != nil {
		skipReason = "iptables is not installed (Debian: apt-get install iptables): " + err.Error()
		return m.Run()
	}
	code, err := reexec()
	if err != nil {
		skipReason = "cannot create a private network namespace (needs root or CAP_SYS_ADMIN): " + err.Error()
		return m.Run()
	}
	return code
}

// Require skips t unless it runs inside the private network namespace Main made.
func Require(t testing.TB) {
	t.Helper()
	if skipReason != "" {
		t.Skip("fault suite skipped: " + skipReason)
	}
	if os.Getenv(insideEnv) == "" {
		t.Fatal("netns.Require outside a test binary whose TestMain calls netns.Main")
	}
}

// lookTool finds a system binary: on $PATH, then in the sbin directories (Bazel's test PATH has
// none of them).
func lookTool(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range []string{"/usr/sbin", "/sbin", "/usr/local/sbin"} {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found on $PATH or in /usr/sbin, /sbin", name)
}

// netnsID is the inode of this process's network namespace.
func netnsID() (string, error) {
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/self/ns/net", &st); err != nil {
		return "", err
	}
	return strconv.FormatUint(st.Ino, 10), nil
}

// reexec runs this binary again, with its arguments, in a new network namespace, and returns its
// exit status. SIGINT and SIGTERM are passed on; the child dies with this process.
func reexec() (int, error) {
	id, err := netnsID()
	if err != nil {
		return 0, err
	}
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(exe, os.Args[1:]...)
	cmd.Env = append(os.Environ(), insideEnv+"="+id)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	err = cmd.Wait()
	close(done)
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return 1, nil
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		fmt.Fprintf(os.Stderr, "netns: the test binary in the network namespace died of %v\n", ws.Signal())
		return 1, nil
	}
	return cmd.ProcessState.ExitCode(), nil
}

// setUp runs in the child: loopback up, then the checks that this is a fresh namespace whose
// partitions are silent. An error means the namespace is not a fresh one (nothing may run in it);
// unusable, that iptables does not work in it (the tests skip).
func setUp(parent string) (unusable, err error) {
	if iptables, err = lookTool("iptables"); err != nil {
		return err, nil
	}
	ip6tables, _ = lookTool("ip6tables") // optional: every address of the tests is 127.0.0.1
	if id, err := netnsID(); err != nil {
		return nil, err
	} else if id == parent {
		return nil, fmt.Errorf("the network namespace %s is the parent's", id)
	}
	if err := loopbackUp(); err != nil {
		return nil, fmt.Errorf("bringing lo up: %w", err)
	}
	if err := checkInterfaces(); err != nil {
		return nil, err
	}
	// Where iptables works, this namespace must have no rule yet.
	if unusable, err := checkRules(); unusable != nil || err != nil {
		return unusable, err
	}
	return checkSilent(), nil
}

// loopbackUp sets IFF_UP on lo (ip link set lo up) with SIOCGIFFLAGS/SIOCSIFFLAGS.
func loopbackUp() error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	// struct ifreq: the name (IFNAMSIZ bytes), then a union whose first member here is the flags.
	var ifr [40]byte
	copy(ifr[:syscall.IFNAMSIZ], "lo")
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.SIOCGIFFLAGS, uintptr(unsafe.Pointer(&ifr[0]))); e != 0 {
		return fmt.Errorf("SIOCGIFFLAGS: %w", e)
	}
	flags := (*uint16)(unsafe.Pointer(&ifr[syscall.IFNAMSIZ]))
	*flags |= syscall.IFF_UP
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.SIOCSIFFLAGS, uintptr(unsafe.Pointer(&ifr[0]))); e != 0 {
		return fmt.Errorf("SIOCSIFFLAGS: %w", e)
	}
	return nil
}

// checkInterfaces checks that lo is the only interface and is up, and that every route is on lo.
func checkInterfaces() error {
	ifs, err := net.Interfaces()
	if err != nil {
		return err
	}
	var names []string
	for _, i := range ifs {
		names = append(names, i.Name)
	}
	if len(ifs) != 1 || ifs[0].Name != "lo" || ifs[0].Flags&net.FlagUp == 0 {
		return fmt.Errorf("interfaces %v, want lo only, up", names)
	}
	// /proc/net/route: Iface is the first field (after a header line); ipv6_route: the last.
	for file, field := range map[string]int{"/proc/net/route": 0, "/proc/net/ipv6_route": -1} {
		b, err := os.ReadFile(file)
		if errors.Is(err, os.ErrNotExist) && field == -1 {
			continue // no IPv6
		} else if err != nil {
			return err
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if field == 0 && len(lines) > 0 {
			lines = lines[1:]
		}
		for _, l := range lines {
			f := strings.Fields(l)
			if len(f) == 0 {
				continue
			}
			dev := f[0]
			if field == -1 {
				dev = f[len(f)-1]
			}
			if dev != "lo" {
				return fmt.Errorf("%s has a route on %s: %q", file, dev, l)
			}
		}
	}
	return nil
}

// checkRules checks that there is no iptables rule nor chain besides the built-in ones (err);
// unusable says iptables cannot list them. An ip6tables that does not work is not used.
func checkRules() (unusable, err error) {
	for _, tool := range []string{iptables, ip6tables} {
		if tool == "" {
			continue
		}
		out, err := exec.Command(tool, "-w", "-S").CombinedOutput()
		if err != nil && tool == ip6tables {
			ip6tables = ""
			continue
		} else if err != nil {
			return fmt.Errorf("%s -S: %v: %s", tool, err, strings.TrimSpace(string(out))), nil
		}
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if !strings.HasPrefix(l, "-P ") {
				return nil, fmt.Errorf("%s already has rules: %q", tool, l)
			}
		}
	}
	return nil, nil
}

// checkSilent checks that a partitioned port's connects time out (are not refused), and that
// they succeed again once healed.
func checkSilent() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	p, err := partition(port)
	if err != nil {
		return err
	}
	begin := time.Now()
	c, err := net.DialTimeout("tcp", ln.Addr().String(), 500*time.Millisecond)
	var ne net.Error
	switch {
	case err == nil:
		c.Close()
		p.Heal()
		return fmt.Errorf("a connect to the partitioned port %d succeeded", port)
	case !errors.As(err, &ne) || !ne.Timeout():
		p.Heal()
		return fmt.Errorf("a connect to the partitioned port %d failed after %v with %v, want a timeout (a silent partition)", port, time.Since(begin), err)
	}
	if err := p.Heal(); err != nil {
		return err
	}
	c, err = net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
	if err != nil {
		return fmt.Errorf("a connect to the healed port %d: %v", port, err)
	}
	c.Close()
	return nil
}

// Cut is a partition of some TCP ports: the iptables rules that drop their packets.
type Cut struct {
	Ports []int
	mu    sync.Mutex
	rules []rule // those added
	since time.Time
}

// Partition drops every TCP packet to or from the ports, until Heal (at the latest when t
// ends). It fails t where the rules cannot be added.
func Partition(t testing.TB, ports ...int) *Cut {
	t.Helper()
	Require(t)
	c, err := partition(ports...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Heal(); err != nil {
			t.Error(err)
		}
	})
	return c
}

func partition(ports ...int) (*Cut, error) {
	if len(ports) == 0 {
		return nil, errors.New("netns: a partition of no port")
	}
	c := &Cut{Ports: ports, since: time.Now()}
	for _, p := range ports {
		for _, dir := range []string{"--dport", "--sport"} {
			for _, tool := range []string{iptables, ip6tables} {
				if tool == "" {
					continue
				}
				r := rule{tool: tool, spec: []string{"INPUT", "-p", "tcp", dir, strconv.Itoa(p), "-j", "DROP"}}
				if err := r.apply("-I"); err != nil {
					c.Heal()
					return nil, err
				}
				c.rules = append(c.rules, r)
			}
		}
	}
	return c, nil
}

// Heal removes the partition's rules; a second Heal does nothing.
func (c *Cut) Heal() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, r := range c.rules {
		errs = append(errs, r.apply("-D"))
	}
	c.rules = nil
	return errors.Join(errs...)
}

// Since is when the partition began.
func (c *Cut) Since() time.Time { return c.since }

// rule is a rule of iptables or ip6tables.
type rule struct {
	tool string
	spec []string // the chain and the rule, without -I or -D
}

// apply adds (op -I) or deletes (-D) the rule.
func (r rule) apply(op string) error {
	args := append([]string{"-w", op}, r.spec...)
	if out, err := exec.Command(r.tool, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v: %s", r.tool, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
