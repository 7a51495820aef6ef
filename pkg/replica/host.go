package replica

import (
	"context"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// HostResolver finds this host's addresses when MY_HOST_IP / MY_HOST_IPV6 do not give them.
type HostResolver interface {
	// IPv4 is the address the host name resolves to (socket.gethostbyname(gethostname())).
	IPv4(ctx context.Context) (string, error)
	// IPv6 is the first IPv6 address of the host name (getaddrinfo(gethostname(), AF_INET6)).
	IPv6(ctx context.Context) (string, error)
}

// SystemResolver resolves the host name with the system resolver.
type SystemResolver struct{}

// IPv4 implements HostResolver.
func (SystemResolver) IPv4(ctx context.Context) (string, error) { return lookupHost(ctx, "ip4") }

// IPv6 implements HostResolver.
func (SystemResolver) IPv6(ctx context.Context) (string, error) { return lookupHost(ctx, "ip6") }

func lookupHost(ctx context.Context, network string) (string, error) {
	host, err := os.Hostname()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupIP(ctx, network, host)
	if err != nil {
		return "", err
	}
	if len(ips) == 0 {
		return "", errkind.New(errkind.NotFound, "host %s has no %s address", host, network)
	}
	return ips[0].String(), nil
}

// hostAddrs are the hosts a replica registers: the IPv4 host is MY_HOST_IP, else the host name's
// address, else 0.0.0.0; the IPv6 host is MY_HOST_IPV6 when not empty, else the host name's IPv6
// address, else ::, bracketed.
type hostAddrs struct{ v4, v6 string }

func resolveHost(ctx context.Context, env agentconf.LookupEnv, res HostResolver) hostAddrs {
	host, ok := env("MY_HOST_IP")
	if !ok {
		var err error
		if host, err = res.IPv4(ctx); err != nil || host == "" {
			host = "0.0.0.0"
		}
	}
	v6, _ := env("MY_HOST_IPV6")
	if v6 == "" {
		var err error
		if v6, err = res.IPv6(ctx); err != nil || v6 == "" {
			v6 = "::"
		}
	}
	return hostAddrs{v4: host, v6: "[" + v6 + "]"}
}

// meta is the ReplicaMeta a replica registers: its gRPC and archon addresses in both families,
// stat UNKNOWN.
func (h hostAddrs) meta(grpcPort, archonPort int) datadef.ReplicaMeta {
	m := datadef.NewReplicaMeta()
	m.Address = hostPort(h.v4, grpcPort)
	m.AddressIPv6 = hostPort(h.v6, grpcPort)
	m.ArchonAddress = hostPort(h.v4, archonPort)
	m.ArchonAddressIPv6 = hostPort(h.v6, archonPort)
	return m
}

// hostPort is f'{host}:{port}' (no bracketing: the IPv6 host comes bracketed).
func hostPort(host string, port int) *string {
	s := host + ":" + strconv.Itoa(port)
	return &s
}
