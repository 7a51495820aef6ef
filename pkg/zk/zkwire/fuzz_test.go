package zkwire

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"
)

// FuzzParseConnectResponse: a ConnectResponse body parses exactly when it holds the fixed fields
// and the whole password its length announces; the id and password are the body's, the password a
// copy; a response written from parts parses back to them. Run with
//
//	go test ./pkg/zk/zkwire -run='^$' -fuzz='^FuzzParseConnectResponse$' -fuzztime=60s
func FuzzParseConnectResponse(f *testing.F) {
	f.Add(connectResponse(0x1234, []byte("secret"))[4:], int64(7), []byte("pw"))
	f.Add([]byte{}, int64(0), []byte{})
	f.Add(append(connectResponse(-1, nil)[4:], 1), int64(-1), make([]byte, 16))
	f.Add([]byte("\x00\x00\x00\x00\x00\x00\x0f\xa0\x00\x00\x00\x00\x00\x00\x00\x01\xff\xff\xff\xff"), int64(1<<62), []byte{0})
	f.Fuzz(func(t *testing.T, b []byte, id int64, pw []byte) {
		gotID, gotPW, ok := ParseConnectResponse(b)
		var n int64 = -1
		if len(b) >= 20 {
			n = int64(int32(binary.BigEndian.Uint32(b[16:20])))
		}
		want := len(b) >= 20 && n >= 0 && n <= int64(len(b)-20)
		if ok != want {
			t.Fatalf("ParseConnectResponse(%x) ok = %v", b, ok)
		}
		if ok {
			if gotID != int64(binary.BigEndian.Uint64(b[8:16])) || !bytes.Equal(gotPW, b[20:20+n]) {
				t.Fatalf("ParseConnectResponse(%x) = %x %x", b, gotID, gotPW)
			}
			if len(gotPW) > 0 {
				gotPW[0]++
				if b[20] == gotPW[0] {
					t.Fatalf("password aliases the frame")
				}
			}
		}
		frame := connectResponse(id, pw)
		if gotID, gotPW, ok := ParseConnectResponse(frame[4:]); !ok || gotID != id || !bytes.Equal(gotPW, pw) {
			t.Fatalf("response of %x %x parsed as %x %x %v", id, pw, gotID, gotPW, ok)
		}
	})
}

// chunkConn serves data in reads no longer than the chunk sizes it cycles through.
type chunkConn struct {
	net.Conn
	data   []byte
	chunks []byte
	i      int
}

func (c *chunkConn) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := len(p)
	if len(c.chunks) > 0 {
		n = min(n, int(c.chunks[c.i%len(c.chunks)])+1)
		c.i++
	}
	n = copy(p, c.data[:min(n, len(c.data))])
	c.data = c.data[n:]
	return n, nil
}

func (c *chunkConn) SetReadDeadline(time.Time) error { return nil }

// FuzzSniffConn: whatever the server sends, in whatever pieces and read sizes, the client reads it
// unchanged, and the credentials are recorded once when the first frame is a complete
// ConnectResponse of a non-zero session (of at most 64 KiB), never otherwise.
func FuzzSniffConn(f *testing.F) {
	f.Add(append(connectResponse(42, []byte("pw")), "more"...), []byte{0, 2}, uint8(3))
	f.Add(connectResponse(0, []byte("pw")), []byte{}, uint8(0))
	f.Add([]byte{0, 1, 0, 1, 9}, []byte{255}, uint8(255))
	f.Add(connectResponse(1, make([]byte, 100))[:50], []byte{1}, uint8(7))
	f.Fuzz(func(t *testing.T, stream, chunks []byte, readSize uint8) {
		var recID int64
		var recPW []byte
		calls := 0
		c := &sniffConn{Conn: &chunkConn{data: stream, chunks: chunks}, record: func(id int64, pw []byte) {
			recID, recPW = id, pw
			calls++
		}}
		var got []byte
		buf := make([]byte, int(readSize)+1)
		for {
			n, err := c.Read(buf)
			got = append(got, buf[:n]...)
			if err != nil {
				break
			}
		}
		if !bytes.Equal(got, stream) {
			t.Fatalf("read %x, sent %x", got, stream)
		}
		wantCall := false
		if len(stream) >= 4 {
			size := int(binary.BigEndian.Uint32(stream))
			if size <= maxConnectResponse && len(stream) >= 4+size {
				id, pw, ok := ParseConnectResponse(stream[4 : 4+size])
				if wantCall = ok && id != 0; wantCall && (recID != id || !bytes.Equal(recPW, pw)) {
					t.Fatalf("recorded %x %x, frame holds %x %x", recID, recPW, id, pw)
				}
			}
		}
		if (calls == 1) != wantCall || calls > 1 {
			t.Fatalf("%d record calls for %x, want one: %v", calls, stream, wantCall)
		}
	})
}
