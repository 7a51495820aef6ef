package agentconf

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pystr"
)

// LookupEnv reads an environment variable (os.LookupEnv in production, a map in tests).
type LookupEnv func(key string) (string, bool)

// MapEnv returns a LookupEnv over m.
func MapEnv(m map[string]string) LookupEnv {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// IsAbs reports whether path is absolute, treating hdfs:/ URLs as absolute (the reference patches
// os.path.isabs process-wide; this is a plain function instead).
func IsAbs(path string) bool {
	return strings.HasPrefix(path, "hdfs:/") || strings.HasPrefix(path, "/")
}

// FindFreePort returns a TCP port that was free on localhost a moment ago.
func FindFreePort() (int, error) {
	l, err := net.Listen("tcp", "localhost:0")
	if err != nil {
		return 0, fmt.Errorf("find free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// CheckPortOpen reports whether something accepts connections on 127.0.0.1:port.
func CheckPortOpen(ctx context.Context, port int) bool {
	var d net.Dialer
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		slog.Info("port not open", "port", port)
		return false
	}
	c.Close()
	slog.Info("port opened", "port", port)
	return true
}

// WriteTempFile writes content to a new temporary file and returns its path.
func WriteTempFile(content string) (string, error) {
	f, err := os.CreateTemp("", "monolith-")
	if err != nil {
		return "", fmt.Errorf("create temp file: %w", err)
	}
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		return "", fmt.Errorf("write temp file: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("close temp file: %w", err)
	}
	return f.Name(), nil
}

// ReplicaIDFromPodName hashes MY_POD_NAME into a replica id: the integer value of hex digits 10..20
// of its MD5. Without MY_POD_NAME it is -1.
func ReplicaIDFromPodName(env LookupEnv) int {
	pod, ok := env("MY_POD_NAME")
	if !ok {
		return -1
	}
	sum := md5.Sum([]byte(pod))
	v, err := strconv.ParseInt(hex.EncodeToString(sum[:])[10:20], 16, 64)
	if err != nil {
		return -1
	}
	return int(v)
}

// LocalIP returns MY_HOST_IP, else the address the host name resolves to, else the source address of
// a UDP route to the outside, else "localhost"; loopback answers do not count.
func LocalIP(env LookupEnv) string {
	usable := func(ip string) bool { return ip != "" && ip != "localhost" && ip != "127.0.0.1" }
	ip, ok := env("MY_HOST_IP")
	if !ok {
		ip = hostIPv4()
	}
	if usable(ip) {
		return ip
	}
	// No packet is sent: connecting a UDP socket only picks the route's source address.
	c, err := net.DialTimeout("udp", "8.8.8.8:80", time.Second)
	if err == nil {
		defer c.Close()
		if a, ok := c.LocalAddr().(*net.UDPAddr); ok && usable(a.IP.String()) {
			return a.IP.String()
		}
	}
	return "localhost"
}

// IsIPv6Only reports whether the host has no IPv4 address: MY_HOST_IP (or MY_POD_IP) is empty when
// set, or the host name does not resolve when neither is set (the reference's is_ipv6_only).
func IsIPv6Only(env LookupEnv) bool {
	_, h := env("MY_HOST_IP")
	_, p := env("MY_POD_IP")
	_, h6 := env("MY_HOST_IPV6")
	if h || p || h6 {
		v, ok := env("MY_HOST_IP")
		if !ok {
			v, _ = env("MY_POD_IP")
		}
		return v == ""
	}
	return hostIPv4() == ""
}

// hostIPv4 is the first IPv4 address the host name resolves to (socket.gethostbyname), or "".
func hostIPv4() string {
	host, err := os.Hostname()
	if err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if v4 := a.IP.To4(); v4 != nil {
			return v4.String()
		}
	}
	return ""
}

// UpdateZKServers rejects IPv4 ZooKeeper addresses on an IPv6-only host. (The reference swaps in its
// built-in IPv6 server list when zk_servers equals its built-in IPv4 list; the public reference ships
// both lists empty, so any IPv4 address is an error there too.)
func UpdateZKServers(zkServers string, useIPv6 bool) (string, error) {
	if zkServers == "" || !useIPv6 {
		return zkServers, nil
	}
	for _, addr := range strings.Split(zkServers, ",") {
		i := strings.LastIndex(addr, ":")
		if i < 0 {
			continue
		}
		items := strings.Split(addr[:i], ".")
		if len(items) != 4 {
			continue
		}
		numeric := true
		for _, it := range items {
			if !pystr.IsNumeric(it) { // str.isnumeric, as the reference: "１" and "四" count
				numeric = false
			}
		}
		if numeric {
			return "", errkind.New(errkind.Generic, "the host is is ipv6 only, but zk_servers specified is ipv4")
		}
	}
	return zkServers, nil
}
