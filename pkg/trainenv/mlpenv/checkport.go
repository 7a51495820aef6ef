package mlpenv

import (
	"context"
	"net"
	"strconv"
	"strings"
	"time"
)

// retryPause spaces CheckPort's connection attempts after a refusal.
const retryPause = 50 * time.Millisecond

// CheckPort is mlp_utils.check_port: whether a TCP connection to host:port succeeds within timeout
// (and before ctx ends). A refused connection is tried again until the time is up; the reference
// retried at once, in a busy loop, and counted the time in whole seconds. host may be an IPv6
// address, bracketed or not.
func CheckPort(ctx context.Context, host string, port int, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	addr := net.JoinHostPort(strings.Trim(host, "[]"), strconv.Itoa(port))
	var d net.Dialer
	for {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			conn.Close()
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(retryPause):
		}
	}
}
