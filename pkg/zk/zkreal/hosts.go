package zkreal

import (
	"context"
	"strings"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/zk"
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

// ConnectHosts is Connect for kazoo's hosts string: opts.Servers and opts.Chroot come from hosts
// (ParseHosts), the other options are kept. It returns the zk.Client interface, as its callers
// want, and a nil interface (not a nil *Client) on error.
func ConnectHosts(ctx context.Context, hosts string, opts Options) (zk.Client, error) {
	servers, chroot, err := ParseHosts(hosts)
	if err != nil {
		return nil, err
	}
	opts.Servers, opts.Chroot = servers, chroot
	c, err := Connect(ctx, opts)
	if err != nil {
		return nil, err
	}
	return c, nil
}
