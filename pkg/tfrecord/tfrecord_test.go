package tfrecord

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"testing/iotest"
)

// golden is testdata/golden.json, written by testdata/gen_golden.py (an independent Python
// implementation of CRC-32C and the framing).
type golden struct {
	Records []struct {
		Name         string `json:"name"`
		Data         string `json:"data"`
		CRC32C       string `json:"crc32c"`
		MaskedCRC32C string `json:"masked_crc32c"`
		Framed       string `json:"framed"`
	} `json:"records"`
	Stream string `json:"stream"`
}

func loadGolden(t *testing.T) golden {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatalf("golden.json: %v", err)
	}
	if len(g.Records) == 0 {
		t.Fatal("golden.json has no records")
	}
	return g
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("hex %q: %v", s, err)
	}
	return b
}

func TestCRC32CPublishedVectors(t *testing.T) {
	tests := []struct {
		name string
		data []byte
		want uint32
	}{
		{"check input 123456789", []byte("123456789"), 0xe3069283},
		{"RFC 3720 32 zeros", make([]byte, 32), 0x8a9136aa},
		{"RFC 3720 32 0xff", bytes.Repeat([]byte{0xff}, 32), 0x62a8ab43},
		{"RFC 3720 ascending", seq(0, 32, 1), 0x46dd794e},
		{"RFC 3720 descending", seq(31, 32, -1), 0x113fdb5c},
		{"empty", nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := CRC32C(tc.data); got != tc.want {
				t.Fatalf("CRC32C = %#08x, want %#08x", got, tc.want)
			}
			if got := Unmask(MaskedCRC32C(tc.data)); got != tc.want {
				t.Fatalf("Unmask(MaskedCRC32C) = %#08x, want %#08x", got, tc.want)
			}
		})
	}
}

func seq(start, n, step int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(start + i*step)
	}
	return b
}

// Every TensorBoard event file starts with the header of its 24-byte file_version record:
// 18 00 00 00 00 00 00 00 a3 7f 4b 22.
func TestEventFileHeaderVector(t *testing.T) {
	got := AppendRecord(nil, make([]byte, 24))[:HeaderLen]
	want := []byte{0x18, 0, 0, 0, 0, 0, 0, 0, 0xa3, 0x7f, 0x4b, 0x22}
	if !bytes.Equal(got, want) {
		t.Fatalf("header % x, want % x", got, want)
	}
}

func TestMaskUnmask(t *testing.T) {
	for _, c := range []uint32{0, 1, 0xffffffff, 0x80000000, 0x12345678, maskDelta} {
		if Mask(c) == c {
			t.Errorf("Mask(%#x) is the identity", c)
		}
		if got := Unmask(Mask(c)); got != c {
			t.Errorf("Unmask(Mask(%#x)) = %#x", c, got)
		}
	}
}

func TestGoldenFraming(t *testing.T) {
	g := loadGolden(t)
	var stream bytes.Buffer
	w := NewWriter(&stream)
	for _, rec := range g.Records {
		t.Run(rec.Name, func(t *testing.T) {
			data := unhex(t, rec.Data)
			want := unhex(t, rec.Framed)
			if got := CRC32C(data); hex.EncodeToString(binary.BigEndian.AppendUint32(nil, got)) != rec.CRC32C {
				t.Errorf("CRC32C = %08x, want %s", got, rec.CRC32C)
			}
			if got := MaskedCRC32C(data); hex.EncodeToString(binary.BigEndian.AppendUint32(nil, got)) != rec.MaskedCRC32C {
				t.Errorf("MaskedCRC32C = %08x, want %s", got, rec.MaskedCRC32C)
			}
			if got := AppendRecord(nil, data); !bytes.Equal(got, want) {
				t.Errorf("AppendRecord\n got %x\nwant %x", got, want)
			}
			var one bytes.Buffer
			if err := NewWriter(&one).Write(data); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(one.Bytes(), want) {
				t.Errorf("Writer\n got %x\nwant %x", one.Bytes(), want)
			}
		})
		if err := w.Write(unhex(t, rec.Data)); err != nil {
			t.Fatal(err)
		}
	}
	want := unhex(t, g.Stream)
	if !bytes.Equal(stream.Bytes(), want) {
		t.Fatalf("stream of %d records differs from the golden stream", len(g.Records))
	}
	if w.Written() != int64(len(want)) {
		t.Fatalf("Written() = %d, want %d", w.Written(), len(want))
	}

	// The golden stream reads back, also one byte at a time.
	for name, r := range map[string]io.Reader{
		"whole":    bytes.NewReader(want),
		"one byte": iotest.OneByteReader(bytes.NewReader(want)),
	} {
		got, err := ReadAll(r)
		if err != nil {
			t.Fatalf("%s: ReadAll: %v", name, err)
		}
		if len(got) != len(g.Records) {
			t.Fatalf("%s: read %d records, want %d", name, len(got), len(g.Records))
		}
		for i, rec := range g.Records {
			if !bytes.Equal(got[i], unhex(t, rec.Data)) {
				t.Errorf("%s: record %d (%s) = %x, want %s", name, i, rec.Name, got[i], rec.Data)
			}
		}
	}
}

// file builds a TFRecord stream of the given records.
func file(records ...string) []byte {
	recs := make([][]byte, len(records))
	for i, r := range records {
		recs[i] = []byte(r)
	}
	return frameAll(recs)
}

func frameAll(recs [][]byte) []byte {
	var b []byte
	for _, r := range recs {
		b = AppendRecord(b, r)
	}
	return b
}

func flip(b []byte, i int) []byte {
	c := bytes.Clone(b)
	c[i] ^= 0x01
	return c
}

func TestReaderBadInput(t *testing.T) {
	two := file("first", "second!")
	second := int64(HeaderLen + len("first") + FooterLen)
	// A checksum-valid header claiming a record far longer than the input.
	var huge [HeaderLen]byte
	putHeader(&huge, 1<<40)
	var absurd [HeaderLen]byte
	putHeader(&absurd, 1<<63)
	tests := []struct {
		name    string
		in      []byte
		records int   // records read before the error
		wantErr error // nil: clean io.EOF
		offset  int64
	}{
		{name: "empty input", in: nil},
		{name: "two good records", in: two, records: 2},
		{name: "partial header", in: two[:5], wantErr: ErrTruncated},
		{name: "header only", in: two[:HeaderLen], wantErr: ErrTruncated},
		{name: "partial data", in: two[:HeaderLen+3], wantErr: ErrTruncated},
		{name: "no footer", in: two[:HeaderLen+len("first")], wantErr: ErrTruncated},
		{name: "partial footer", in: two[:HeaderLen+len("first")+2], wantErr: ErrTruncated},
		{name: "second record truncated", in: two[:len(two)-1], records: 1, wantErr: ErrTruncated, offset: second},
		{name: "trailing garbage byte", in: append(bytes.Clone(two), 0), records: 2, wantErr: ErrTruncated, offset: int64(len(two))},
		{name: "length corrupted", in: flip(two, 0), wantErr: ErrCorrupt},
		{name: "length checksum corrupted", in: flip(two, 9), wantErr: ErrCorrupt},
		{name: "data corrupted", in: flip(two, HeaderLen+1), wantErr: ErrCorrupt},
		{name: "data checksum corrupted", in: flip(two, HeaderLen+len("first")), wantErr: ErrCorrupt},
		{name: "second record data corrupted", in: flip(two, int(second)+HeaderLen), records: 1, wantErr: ErrCorrupt, offset: second},
		{name: "huge length, short input", in: append(huge[:], "abc"...), wantErr: ErrTruncated},
		{name: "implausible length", in: absurd[:], wantErr: ErrCorrupt},
	}
	// Reader and Scanner (with a buffer small enough to refill inside a record, and the default)
	// must fail alike.
	readers := map[string]func(io.Reader) recordReader{
		"Reader":          func(r io.Reader) recordReader { return NewReader(r) },
		"Scanner":         func(r io.Reader) recordReader { return NewScanner(r, 0) },
		"Scanner/16 byte": func(r io.Reader) recordReader { return NewScanner(r, 16) },
	}
	for _, tc := range tests {
		for rname, newReader := range readers {
			t.Run(tc.name+"/"+rname, func(t *testing.T) {
				testBadInput(t, newReader(bytes.NewReader(tc.in)), tc.records, tc.wantErr, tc.offset)
			})
		}
	}
}

// recordReader is what Reader and Scanner have in common.
type recordReader interface {
	Next() ([]byte, error)
}

// testBadInput reads r to its end and checks the number of good records and how it ended.
func testBadInput(t *testing.T, r recordReader, records int, wantErr error, offset int64) {
	t.Helper()
	n := 0
	var err error
	for {
		if _, err = r.Next(); err != nil {
			break
		}
		n++
	}
	if n != records {
		t.Errorf("read %d records, want %d", n, records)
	}
	if wantErr == nil {
		if err != io.EOF {
			t.Fatalf("err = %v, want io.EOF", err)
		}
		return
	}
	if !errors.Is(err, wantErr) {
		t.Fatalf("err = %v, want %v", err, wantErr)
	}
	var re *RecordError
	if !errors.As(err, &re) {
		t.Fatalf("err = %T, want *RecordError", err)
	}
	if re.Offset != offset {
		t.Errorf("offset = %d, want %d (%v)", re.Offset, offset, err)
	}
	if _, again := r.Next(); again != err {
		t.Errorf("second Next = %v, want the same error", again)
	}
}

func TestReaderPassesReadErrors(t *testing.T) {
	boom := errors.New("disk on fire")
	in := file("abc")
	r := NewReader(io.MultiReader(bytes.NewReader(in[:HeaderLen+1]), iotest.ErrReader(boom)))
	_, err := r.Next()
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want %v", err, boom)
	}
	if errors.Is(err, ErrTruncated) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("a read failure must not look like bad data: %v", err)
	}
}

func TestLargeRecordRoundTrip(t *testing.T) {
	// Larger than preallocMax, so the Reader grows its buffer as data arrives.
	data := bytes.Repeat([]byte("monolith"), 3*preallocMax/8+5)
	var b bytes.Buffer
	bw := bufio.NewWriter(&b)
	w := NewWriter(bw)
	for _, rec := range [][]byte{data, []byte("after")} {
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	got, err := ReadAll(bufio.NewReader(&b))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !bytes.Equal(got[0], data) || string(got[1]) != "after" {
		t.Fatalf("read back %d records (first %d bytes), want the 2 written", len(got), len(got[0]))
	}
}

type failWriter struct {
	budget int
	err    error
}

func (f *failWriter) Write(p []byte) (int, error) {
	if len(p) > f.budget {
		n := f.budget
		f.budget = 0
		return n, f.err
	}
	f.budget -= len(p)
	return len(p), nil
}

type shortWriter struct{}

func (shortWriter) Write(p []byte) (int, error) { return len(p) / 2, nil }

func TestWriterErrorsAreSticky(t *testing.T) {
	boom := errors.New("no space left")
	tests := []struct {
		name string
		dst  io.Writer
		want error
	}{
		{"failing writer", &failWriter{budget: HeaderLen + 2, err: boom}, boom},
		{"short writer", shortWriter{}, io.ErrShortWrite},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWriter(tc.dst)
			err := w.Write([]byte("payload"))
			if !errors.Is(err, tc.want) {
				t.Fatalf("Write = %v, want %v", err, tc.want)
			}
			if again := w.Write([]byte("x")); !errors.Is(again, tc.want) {
				t.Fatalf("second Write = %v, want the first error again", again)
			}
		})
	}
}

func TestWriterDoesNotAllocate(t *testing.T) {
	w := NewWriter(io.Discard)
	data := []byte("some record data")
	if n := testing.AllocsPerRun(100, func() {
		if err := w.Write(data); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("Write allocates %v times per record", n)
	}
}

func FuzzReader(f *testing.F) {
	f.Add(file("a", "bc"))
	f.Add([]byte{})
	f.Add(flip(file("xyz"), 3))
	f.Fuzz(func(t *testing.T, in []byte) {
		recs, err := ReadAll(bytes.NewReader(in))
		if err != nil {
			var re *RecordError
			if !errors.As(err, &re) || !(errors.Is(err, ErrCorrupt) || errors.Is(err, ErrTruncated)) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		// A stream that reads cleanly is exactly the framing of what was read.
		if got := frameAll(recs); !bytes.Equal(got, in) {
			t.Fatalf("re-framed %d records differ from the input", len(recs))
		}
	})
}
