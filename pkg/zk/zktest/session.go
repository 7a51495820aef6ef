package zktest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/monolith-go/monolith/pkg/zk/zkwire"
)

// ErrSessionInvalid is returned by ExpireSession when the server refuses the session: it has
// already expired or been closed, or the password is wrong.
var ErrSessionInvalid = errors.New("zktest: session expired, closed or wrong password")

// ErrUnknownSession is returned by ExpireConn for a connection whose handshake did not go
// through s.Dialer, so its session password is unknown.
var ErrUnknownSession = errors.New("zktest: no password recorded for this session (connect with s.Dialer or s.Connect)")

// Dialer returns a go-zookeeper dialer (zk.WithDialer) that records the session id and password
// of every handshake made through it, so ExpireConn can expire the session: go-zookeeper does
// not expose a session's password.
func (s *Server) Dialer() zk.Dialer { return zkwire.SniffingDialer(s.recordSession, 2*time.Second) }

func (s *Server) recordSession(id int64, passwd []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sessions[id] = passwd
}

// Passwd returns the password of a session established through s.Dialer.
func (s *Server) Passwd(sessionID int64) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.sessions[sessionID]
	return append([]byte(nil), p...), ok
}

// Connect opens a go-zookeeper client to s (through s.Dialer, logging to t) and waits until it
// has a session; t.Cleanup closes it. opts are go-zookeeper options (zk.WithEventCallback, ...).
// The events channel is returned unread.
func (s *Server) Connect(t testing.TB, sessionTimeout time.Duration, opts ...func(*zk.Conn)) (*zk.Conn, <-chan zk.Event) {
	t.Helper()
	logger := &testLogger{t: t}
	all := func(c *zk.Conn) {
		for _, o := range opts {
			o(c)
		}
	}
	c, events, err := zk.Connect([]string{s.Addr()}, sessionTimeout,
		zk.WithDialer(s.Dialer()), zk.WithLogger(logger), all)
	if err != nil {
		t.Fatalf("zktest: connect to %s: %v", s.Addr(), err)
	}
	t.Cleanup(func() {
		c.Close()
		logger.stop()
	})
	began := time.Now()
	for c.State() != zk.StateHasSession {
		if waited := time.Since(began); waited > sessionTimeout+10*time.Second {
			t.Fatalf("zktest: no session with %s after %v (state %v)", s.Addr(), waited, c.State())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return c, events
}

// ExpireConn expires the session of a client connected through s.Dialer (or s.Connect).
func (s *Server) ExpireConn(c *zk.Conn) error {
	id := c.SessionID()
	passwd, ok := s.Passwd(id)
	if !ok {
		return fmt.Errorf("%w: session 0x%x", ErrUnknownSession, id)
	}
	return s.ExpireSession(id, passwd)
}

// ExpireSession expires a client's session the way ZooKeeper's own tests do: it opens a second
// connection that takes over the session (ConnectRequest with its id and password; the server
// drops the client's connection) and closes the session on it (a closeSession request, opcode
// -11). The server deletes the session's ephemeral nodes and fires their watches at once, and the
// client, reconnecting, is told its session has expired (zk.StateExpired). Merely closing the
// socket after the handshake would leave the session alive: the client would reconnect to it.
//
// It returns ErrSessionInvalid when the server refuses the session id and password. Even then
// ZooKeeper (3.8) has already dropped the connection of a client holding that session id: such a
// client reconnects to its still valid session after about a second.
func (s *Server) ExpireSession(sessionID int64, passwd []byte) error {
	var closeSent bool
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		var sent bool
		sent, err = closeSession(s.Addr(), sessionID, passwd)
		closeSent = closeSent || sent
		switch {
		case err == nil:
			return nil
		case errors.Is(err, ErrSessionInvalid):
			if closeSent {
				// An earlier attempt closed it but lost the reply.
				return nil
			}
			return fmt.Errorf("expire session 0x%x: %w", sessionID, err)
		}
		// The client reconnected and took its session back before the close got through.
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("zktest: expire session 0x%x: %v", sessionID, err)
}

const opCloseSession int32 = -11

// closeSession connects with the given session and closes it; sent says whether the
// closeSession request was written.
func closeSession(addr string, sessionID int64, passwd []byte) (sent bool, err error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return false, err
	}
	// ConnectRequest: protocolVersion, lastZxidSeen, timeOut (ms), sessionId, passwd (buffer).
	req := binary.BigEndian.AppendUint32(nil, 0)
	req = binary.BigEndian.AppendUint64(req, 0)
	req = binary.BigEndian.AppendUint32(req, 30000)
	req = binary.BigEndian.AppendUint64(req, uint64(sessionID))
	req = binary.BigEndian.AppendUint32(req, uint32(len(passwd)))
	req = append(req, passwd...)
	if err := writeFrame(conn, req); err != nil {
		return false, err
	}
	resp, err := readFrame(conn)
	if err != nil {
		return false, err
	}
	id, _, ok := zkwire.ParseConnectResponse(resp)
	if !ok {
		return false, fmt.Errorf("bad connect response %x", resp)
	}
	if id == 0 {
		return false, ErrSessionInvalid
	}
	// RequestHeader: xid, type.
	hdr := appendInt32(nil, 1)
	hdr = appendInt32(hdr, opCloseSession)
	if err := writeFrame(conn, hdr); err != nil {
		return false, err
	}
	// ReplyHeader: xid, zxid, err.
	reply, err := readFrame(conn)
	if err != nil {
		return true, err
	}
	if len(reply) < 16 {
		return true, fmt.Errorf("short closeSession reply %x", reply)
	}
	if code := int32(binary.BigEndian.Uint32(reply[12:16])); code != 0 {
		return true, fmt.Errorf("closeSession failed with error code %d", code)
	}
	return true, nil
}

func appendInt32(b []byte, v int32) []byte { return binary.BigEndian.AppendUint32(b, uint32(v)) }

func writeFrame(w io.Writer, body []byte) error {
	_, err := w.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...))
	return err
}

func readFrame(r io.Reader) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > 1<<20 {
		return nil, fmt.Errorf("frame of %d bytes", size)
	}
	body := make([]byte, size)
	_, err := io.ReadFull(r, body)
	return body, err
}

// testLogger sends go-zookeeper's log to t until the test's cleanup has closed the client: its
// goroutines may still log afterwards, which t.Logf does not allow.
type testLogger struct {
	mu      sync.Mutex
	t       testing.TB
	stopped bool
}

func (l *testLogger) Printf(format string, args ...interface{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.stopped {
		l.t.Logf("go-zookeeper: "+format, args...)
	}
}

func (l *testLogger) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
}
