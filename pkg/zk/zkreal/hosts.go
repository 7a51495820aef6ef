package zkreal

import (
	"strings"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// ParseHosts splits kazoo's hosts string "host:port,host:port/chroot" (agent.conf's zk_servers)
// into Options.Servers and Options.Chroot. Blanks around hosts are ignored; an empty host is an
// error of kind Value naming the string; a chroot of "/" is no chroot.
func ParseHosts(s string) (servers []string, chroot string, err error) {
	hosts := strings.TrimSpace(s)
	if i := strings.IndexByte(hosts, '/'); i >= 0 {
		hosts, chroot = hosts[:i], hosts[i:]
	}
	if chroot == "/" {
		chroot = ""
	}
	for _, h := range strings.Split(hosts, ",") {
		if h = strings.TrimSpace(h); h == "" {
			return nil, "", errkind.New(errkind.Value, "zk_servers %q: empty host", s)
		}
		servers = append(servers, h)
	}
	return servers, chroot, nil
}
