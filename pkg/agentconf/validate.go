package agentconf

import (
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/monolith-go/monolith/gen/spec/agent_service/utils"
	"github.com/monolith-go/monolith/pkg/didyoumean"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// maxShownValue is how much of a value an error message quotes: a multi-megabyte value must not make
// a multi-megabyte log or terminal line.
const maxShownValue = 80

// clip shortens s for an error message: its first maxShownValue bytes (cut at a rune boundary), then
// "... (N bytes)".
func clip(s string) string {
	if len(s) <= maxShownValue {
		return s
	}
	cut := maxShownValue
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes)", s[:cut], len(s))
}

// quote is %q of the clipped value; the suffix stays outside the quotes so that it is not read as
// part of the value.
func quote(s string) string {
	if len(s) <= maxShownValue {
		return strconv.Quote(s)
	}
	c := clip(s)
	i := strings.LastIndex(c, "... (")
	return strconv.Quote(c[:i]) + c[i:]
}

// maxShownReason bounds a nested error message (an arithmetic parser's, which quotes the token it
// stopped at) the same way.
const maxShownReason = 240

func clipReason(s string) string {
	if len(s) <= maxShownReason {
		return s
	}
	cut := maxShownReason
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes)", s[:cut], len(s))
}

// legacyKeys are keys that earlier reference versions declared as AgentConfig fields and that real
// agent.conf files may still carry; the reference of the parity goldens ignores them, so Go accepts
// them with a warning instead of rejecting them as unknown.
var legacyKeys = map[string]string{
	"model_config_file": "the agent writes its own model server config and passes it to TF Serving",
}

// knownKeys lists every key AgentConfig reads: field names and their aliases, in declaration order.
func knownKeys() []string {
	var keys []string
	for i := range utilsspec.AgentConfigFields {
		f := &utilsspec.AgentConfigFields[i]
		keys = append(keys, f.Name)
		keys = append(keys, f.Aliases...)
	}
	return keys
}

// suggestKey returns the known key closest to key when it is close enough to be a typo (at most a
// third of key's length in edits, and at most 3), or "".
func suggestKey(key string, known []string) string {
	limit := min(3, max(1, len(key)/3))
	best, bestD := "", limit+1
	for _, k := range known {
		if abs(len(key)-len(k)) > limit {
			continue // the distance is at least the length difference
		}
		if d := didyoumean.Distance(key, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// ValidateZKNodeName checks that name can be one ZooKeeper node name (ZooKeeper's PathUtils rules):
// not empty, no '/', not "." or "..", valid UTF-8 without the characters ZooKeeper refuses.
func ValidateZKNodeName(name string) error {
	switch {
	case name == "":
		return errkind.New(errkind.Value, "empty ZooKeeper node name")
	case strings.Contains(name, "/"):
		return errkind.New(errkind.Value, "contains '/': it names one ZooKeeper node")
	case name == "." || name == "..":
		return errkind.New(errkind.Value, "%q is not a valid ZooKeeper node name", name)
	case !utf8.ValidString(name):
		return errkind.New(errkind.Value, "not valid UTF-8")
	}
	for i, r := range name {
		if r == 0 || (r > 0 && r < 0x20) || (r >= 0x7f && r <= 0x9f) || (r >= 0xd800 && r <= 0xf8ff) || (r >= 0xfff0 && r <= 0xffff) {
			return errkind.New(errkind.Value, "character %U at byte %d is not allowed in a ZooKeeper node name", r, i)
		}
	}
	return nil
}

// hostName is what a host of zk_servers may be besides an IP address.
var hostName = regexp.MustCompile(`^[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_])?$`)

// ValidateZKServers checks kazoo's hosts string "host[:port],host[:port][/chroot]" as the ZooKeeper
// client splits it (the chroot starts at the first '/'): every host is a host name or IP address
// ("[v6]:port" for IPv6 with a port), every port a number in 1..65535, the chroot a valid
// ZooKeeper path ("/" or a trailing '/' means the same as none or without it).
func ValidateZKServers(s string) error {
	hosts, chroot := strings.TrimSpace(s), ""
	if i := strings.IndexByte(hosts, '/'); i >= 0 {
		hosts, chroot = hosts[:i], hosts[i:]
	}
	for n, h := range strings.Split(hosts, ",") {
		if err := validateZKHost(strings.TrimSpace(h)); err != nil {
			return errkind.New(errkind.Value, "server %d: %w", n+1, err)
		}
	}
	if chroot = strings.TrimSuffix(chroot, "/"); chroot != "" {
		for _, node := range strings.Split(chroot[1:], "/") {
			if err := ValidateZKNodeName(node); err != nil {
				return errkind.New(errkind.Value, "chroot %s: %w", quote(chroot), err)
			}
		}
	}
	return nil
}

func validateZKHost(h string) error {
	if h == "" {
		return fmt.Errorf("empty host")
	}
	host := h
	if strings.Contains(h, ":") {
		var port string
		var err error
		host, port, err = net.SplitHostPort(h)
		if err != nil {
			return fmt.Errorf("%s is not host:port (IPv6 addresses need brackets: [::1]:2181)", quote(h))
		}
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("port %s is not a number in 1..65535", quote(port))
		}
	}
	if host == "" {
		return fmt.Errorf("empty host in %s", quote(h))
	}
	if net.ParseIP(host) == nil && !hostName.MatchString(host) {
		if ip, zone, ok := strings.Cut(host, "%"); !ok || zone == "" || net.ParseIP(ip) == nil {
			return fmt.Errorf("host %s is not a host name or IP address", quote(host))
		}
	}
	return nil
}
