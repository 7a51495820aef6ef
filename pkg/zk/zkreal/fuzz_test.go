package zkreal

import (
	"net"
	"slices"
	"strings"
	"testing"

	gozk "github.com/go-zookeeper/zk"

	"github.com/monolith-go/monolith/internal/fuzzseed"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/zk"
)

// FuzzParseHosts: kazoo's hosts string splits into trimmed, non-empty hosts and a chroot (never
// "/"), and the parts joined again split the same; an empty host is a Value error. A string that
// agent.conf's validation (agentconf.ValidateZKServers) accepts is one ParseHosts and the
// ZooKeeper client accept too: every server splits into host and port once the client's default
// port is added, and the chroot is a valid path. Run with
//
//	go test ./pkg/zk/zkreal -run='^$' -fuzz='^FuzzParseHosts$' -fuzztime=60s
func FuzzParseHosts(f *testing.F) {
	strs := fuzzseed.AllStrings(fuzzseed.PythonCases(f, "utils", "agent_service", "zk_mirror", "replica_manager"))
	for _, s := range fuzzseed.Lines(strs, "zk_servers ") {
		f.Add(s)
	}
	for _, s := range fuzzseed.Matching(strs, func(s string) bool { return strings.Contains(s, ":") && len(s) < 100 }) {
		f.Add(s)
	}
	for _, s := range []string{"127.0.0.1:2181", " a:1, b:2 ,c:3/monolith/zk ", "[::1]:2181/", "a:1,,b:2", "/", "h/", "h//a", "h/a/",
		"[fe80::1%eth0]:2181", "fe80::1", "h:0", "h:65536", "h:+1", "h: 1", "a_b.c-d", "[::1]", "h:1/a/./b", "h/\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		servers, chroot, err := ParseHosts(s)
		if err != nil {
			if errkind.Of(err) != errkind.Value {
				t.Fatalf("ParseHosts(%q): %v", s, err)
			}
			if agentconf.ValidateZKServers(s) == nil {
				t.Fatalf("ParseHosts(%q) refuses what agent.conf validation accepts: %v", s, err)
			}
			return
		}
		if len(servers) == 0 || chroot == "/" || (chroot != "" && chroot[0] != '/') {
			t.Fatalf("ParseHosts(%q) = %q, %q", s, servers, chroot)
		}
		for _, h := range servers {
			if h == "" || h != strings.TrimSpace(h) || strings.ContainsAny(h, ",/") {
				t.Fatalf("ParseHosts(%q): host %q", s, h)
			}
		}
		again, chroot2, err := ParseHosts(strings.Join(servers, ",") + chroot)
		if err != nil || !slices.Equal(again, servers) || chroot2 != chroot {
			t.Fatalf("ParseHosts(%q) = %q %q; joined again: %q %q %v", s, servers, chroot, again, chroot2, err)
		}
		if agentconf.ValidateZKServers(s) != nil {
			return
		}
		for _, srv := range gozk.FormatServers(servers) {
			if _, _, err := net.SplitHostPort(srv); err != nil {
				t.Fatalf("ParseHosts(%q): validated server %q does not split: %v", s, srv, err)
			}
		}
		if c := strings.TrimSuffix(chroot, "/"); c != "" {
			if err := zk.ValidatePath(c); err != nil {
				t.Fatalf("ParseHosts(%q): validated chroot %q: %v", s, c, err)
			}
		}
	})
}
