package trainenv

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// hostLookupTimeout bounds the resolution of the machine's own name.
const hostLookupTimeout = 5 * time.Second

// Resolver resolves a host name to addresses (net.DefaultResolver.LookupHost).
type Resolver func(ctx context.Context, host string) ([]string, error)

// LocalHost is yarn_runtime.get_local_host: the first address of CLOUDNATIVE_INET_ADDR (a comma
// list) when set, else YARN_INET_ADDR when set, else the machine's own address (LocalIP with
// resolve). An empty result is an error of kind Precondition (the reference asserted).
func LocalHost(ctx context.Context, env Env, resolve Resolver) (string, error) {
	var host string
	if ips, ok := env.Lookup("CLOUDNATIVE_INET_ADDR"); ok {
		host, _, _ = strings.Cut(ips, ",")
	} else if yarn, ok := env.Lookup("YARN_INET_ADDR"); ok {
		host = yarn
	} else {
		ip, err := LocalIP(ctx, resolve)
		if err != nil {
			return "", err
		}
		host = ip
	}
	if host == "" {
		return "", errkind.New(errkind.Precondition, "local host is empty (CLOUDNATIVE_INET_ADDR / YARN_INET_ADDR set to nothing)")
	}
	return host, nil
}

// LocalIP is net_utils.get_local_ip: the first address the machine's host name resolves to.
func LocalIP(ctx context.Context, resolve Resolver) (string, error) {
	name, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("local ip: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, hostLookupTimeout)
	defer cancel()
	addrs, err := resolve(ctx, name)
	if err != nil {
		return "", fmt.Errorf("local ip: resolve host name %q: %w", name, err)
	}
	if len(addrs) == 0 {
		return "", errkind.New(errkind.NotFound, "local ip: host name %q resolves to no address", name)
	}
	return addrs[0], nil
}
