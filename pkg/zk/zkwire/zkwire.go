// Package zkwire reads the session credentials off ZooKeeper's wire protocol. go-zookeeper keeps a
// session's password private, yet addressing a session from outside (expiring it in fault tests,
// or an operator closing a stuck session) needs both its id and password.
package zkwire

import (
	"encoding/binary"
	"net"
	"time"
)

// ParseConnectResponse decodes a ConnectResponse frame body: int32 protocolVersion, int32 timeOut,
// int64 sessionId, then the password as int32 length + bytes.
func ParseConnectResponse(b []byte) (sessionID int64, passwd []byte, ok bool) {
	if len(b) < 20 {
		return 0, nil, false
	}
	sessionID = int64(binary.BigEndian.Uint64(b[8:16]))
	n := int32(binary.BigEndian.Uint32(b[16:20]))
	if n < 0 || int(n) > len(b)-20 {
		return 0, nil, false
	}
	return sessionID, append([]byte(nil), b[20:20+n]...), true
}

// SniffingDialer dials like net.DialTimeout (go-zookeeper's default) and passes every connection
// through unchanged, calling record with the session id and password of the ConnectResponse that
// the server sends first. Only that first frame is buffered; reads are never delayed.
//
// handshake (when > 0) bounds the wait for that ConnectResponse. go-zookeeper waits ten times its
// receive timeout (about 7 session timeouts); a server that accepts connections while it is still
// starting can leave a client hanging that long, so the handshake read deadline is clamped.
func SniffingDialer(record func(id int64, passwd []byte), handshake time.Duration) func(network, address string, timeout time.Duration) (net.Conn, error) {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		c, err := net.DialTimeout(network, address, timeout)
		if err != nil {
			return nil, err
		}
		sc := &sniffConn{Conn: c, record: record}
		if handshake > 0 {
			sc.deadline = time.Now().Add(handshake)
			if err := c.SetReadDeadline(sc.deadline); err != nil {
				c.Close()
				return nil, err
			}
		}
		return sc, nil
	}
}

type sniffConn struct {
	net.Conn
	record   func(id int64, passwd []byte)
	buf      []byte
	done     bool
	deadline time.Time // handshake deadline; zero when unbounded
}

// clamp keeps read deadlines within the handshake deadline until the ConnectResponse is in.
func (c *sniffConn) clamp(t time.Time) time.Time {
	if c.done || c.deadline.IsZero() || (!t.IsZero() && t.Before(c.deadline)) {
		return t
	}
	return c.deadline
}

func (c *sniffConn) SetReadDeadline(t time.Time) error { return c.Conn.SetReadDeadline(c.clamp(t)) }

func (c *sniffConn) SetDeadline(t time.Time) error {
	if err := c.Conn.SetWriteDeadline(t); err != nil {
		return err
	}
	return c.SetReadDeadline(t)
}

// maxConnectResponse bounds what is buffered; a larger first frame is not a ConnectResponse.
const maxConnectResponse = 1 << 16

func (c *sniffConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if !c.done && n > 0 {
		c.buf = append(c.buf, p[:n]...)
		if len(c.buf) >= 4 {
			size := int(binary.BigEndian.Uint32(c.buf))
			if size > maxConnectResponse {
				c.done = true
			} else if len(c.buf) >= 4+size {
				c.done = true
				if id, passwd, ok := ParseConnectResponse(c.buf[4 : 4+size]); ok && id != 0 {
					c.record(id, passwd)
				}
			}
		}
		if c.done {
			c.buf = nil
			if !c.deadline.IsZero() {
				// Hand the deadline back to the library, which sets its own before every read.
				c.Conn.SetReadDeadline(time.Time{})
			}
		}
	}
	return n, err
}
