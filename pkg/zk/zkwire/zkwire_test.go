package zkwire

import (
	"encoding/binary"
	"net"
	"testing"
	"time"
)

func connectResponse(id int64, passwd []byte) []byte {
	body := binary.BigEndian.AppendUint32(nil, 0)
	body = binary.BigEndian.AppendUint32(body, 4000)
	body = binary.BigEndian.AppendUint64(body, uint64(id))
	body = binary.BigEndian.AppendUint32(body, uint32(len(passwd)))
	body = append(body, passwd...)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

func TestParseConnectResponse(t *testing.T) {
	frame := connectResponse(0x1234, []byte("secret"))
	id, pw, ok := ParseConnectResponse(frame[4:])
	if !ok || id != 0x1234 || string(pw) != "secret" {
		t.Fatalf("parse = %x %q %v", id, pw, ok)
	}
	for _, bad := range [][]byte{nil, frame[4:10], append(frame[4:24:24], 0xff)} {
		if _, _, ok := ParseConnectResponse(bad); ok && len(bad) < 20 {
			t.Fatalf("parsed a short frame %x", bad)
		}
	}
}

// TestSniffingDialer feeds a ConnectResponse in small pieces and checks that the reader sees the
// bytes unchanged and that the credentials are recorded once.
func TestSniffingDialer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	frame := append(connectResponse(42, []byte("pw")), []byte("more")...)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		for _, b := range frame {
			c.Write([]byte{b})
			time.Sleep(time.Millisecond)
		}
	}()
	var gotID int64
	var gotPW string
	calls := 0
	dial := SniffingDialer(func(id int64, pw []byte) { gotID, gotPW = id, string(pw); calls++ }, 5*time.Second)
	c, err := dial("tcp", l.Addr().String(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var read []byte
	buf := make([]byte, 3)
	for len(read) < len(frame) {
		n, err := c.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		read = append(read, buf[:n]...)
	}
	if string(read) != string(frame) || gotID != 42 || gotPW != "pw" || calls != 1 {
		t.Fatalf("read %x (want %x), recorded %d %q in %d calls", read, frame, gotID, gotPW, calls)
	}
}

// TestHandshakeDeadline: a server that accepts but never answers the handshake fails the read
// within the handshake bound, even when the caller asks for a much later deadline.
func TestHandshakeDeadline(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	c, err := SniffingDialer(func(int64, []byte) {}, 200*time.Millisecond)("tcp", l.Addr().String(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	defer func() {
		if s := <-accepted; s != nil {
			s.Close()
		}
	}()
	c.SetReadDeadline(time.Now().Add(time.Hour))
	start := time.Now()
	_, err = c.Read(make([]byte, 4))
	if ne, ok := err.(net.Error); !ok || !ne.Timeout() || time.Since(start) > 2*time.Second {
		t.Fatalf("read = %v after %v, want a timeout within the handshake bound", err, time.Since(start))
	}
}
