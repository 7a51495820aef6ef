package zktest

import (
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// Stats is the server's answer to the srvr four-letter command.
type Stats struct {
	Version     string // "3.8.0-..., built on ..."
	Mode        string // "standalone", "leader", "follower", ...
	Zxid        int64  // the last transaction id
	Connections int
	Outstanding int
	NodeCount   int
	Received    int64
	Sent        int64
	Raw         string // the whole answer
}

// Srvr asks the server for its srvr statistics.
func (s *Server) Srvr() (Stats, error) {
	resp, err := fourLetter(s.Addr(), "srvr", 5*time.Second)
	if err != nil {
		return Stats{}, err
	}
	return parseSrvr(resp)
}

// parseSrvr parses lines "Key: value"; Version, Mode and Zxid must be present.
func parseSrvr(resp string) (Stats, error) {
	st := Stats{Raw: resp}
	seen := map[string]bool{}
	for _, line := range strings.Split(resp, "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		var err error
		switch key {
		case "Zookeeper version":
			st.Version = val
		case "Mode":
			st.Mode = val
		case "Zxid":
			st.Zxid, err = strconv.ParseInt(val, 0, 64)
		case "Connections":
			st.Connections, err = strconv.Atoi(val)
		case "Outstanding":
			st.Outstanding, err = strconv.Atoi(val)
		case "Node count":
			st.NodeCount, err = strconv.Atoi(val)
		case "Received":
			st.Received, err = strconv.ParseInt(val, 10, 64)
		case "Sent":
			st.Sent, err = strconv.ParseInt(val, 10, 64)
		default:
			continue
		}
		if err != nil {
			return st, fmt.Errorf("zktest: srvr: bad %s %q", key, val)
		}
		seen[key] = true
	}
	for _, k := range []string{"Zookeeper version", "Mode", "Zxid"} {
		if !seen[k] {
			return st, fmt.Errorf("zktest: srvr: no %q in %q", k, resp)
		}
	}
	return st, nil
}

// fourLetter sends a four-letter command and reads the answer until the server closes.
func fourLetter(addr, cmd string, timeout time.Duration) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return "", err
	}
	if _, err := conn.Write([]byte(cmd)); err != nil {
		return "", err
	}
	b, err := io.ReadAll(conn)
	if err != nil && len(b) == 0 {
		return "", err
	}
	return string(b), nil
}
