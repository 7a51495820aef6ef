package tfrecord

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
	"testing/iotest"
)

// scanAll returns copies of every record a Scanner with a buffer of bufSize bytes reads from r.
func scanAll(r io.Reader, bufSize int) ([][]byte, error) {
	s := NewScanner(r, bufSize)
	var out [][]byte
	for {
		data, err := s.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, bytes.Clone(data))
	}
}

func TestScannerReadsWhatWasWritten(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 5000) // 80000 bytes: many times a small buffer
	recs := [][]byte{[]byte("first"), {}, big, []byte("x"), bytes.Repeat([]byte{0}, 4096), {}}
	in := frameAll(recs)
	tests := []struct {
		name    string
		bufSize int
		wrap    func(io.Reader) io.Reader
	}{
		{"default buffer", 0, nil},
		{"smallest buffer", 1, nil},
		{"buffer splits headers", 17, nil},
		{"buffer of one record", HeaderLen + 5 + FooterLen, nil},
		{"buffer larger than the input", 10 * len(in), nil},
		{"one byte reads", 64, iotest.OneByteReader},
		{"half reads", 1000, iotest.HalfReader},
		{"data with EOF", 0, iotest.DataErrReader},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r io.Reader = bytes.NewReader(in)
			if tc.wrap != nil {
				r = tc.wrap(r)
			}
			got, err := scanAll(r, tc.bufSize)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(recs) {
				t.Fatalf("read %d records, want %d", len(got), len(recs))
			}
			for i := range recs {
				if !bytes.Equal(got[i], recs[i]) {
					t.Errorf("record %d: %d bytes, want %d", i, len(got[i]), len(recs[i]))
				}
			}
		})
	}
}

func TestScannerOffsets(t *testing.T) {
	recs := []string{"a", "", "bcd"}
	s := NewScanner(bytes.NewReader(file(recs...)), 0)
	var want int64
	for _, r := range recs {
		data, err := s.Next()
		if err != nil || string(data) != r {
			t.Fatalf("Next = %q, %v; want %q", data, err, r)
		}
		if s.RecordOffset() != want {
			t.Errorf("record %q at %d, want %d", r, s.RecordOffset(), want)
		}
		want += int64(HeaderLen + len(r) + FooterLen)
		if s.Offset() != want {
			t.Errorf("after %q Offset = %d, want %d", r, s.Offset(), want)
		}
	}
	if _, err := s.Next(); err != io.EOF {
		t.Fatalf("Next at the end = %v, want io.EOF", err)
	}
}

func TestScannerReadErrors(t *testing.T) {
	boom := errors.New("disk on fire")
	in := file("abc", "defg")
	second := int64(HeaderLen + 3 + FooterLen)
	tests := []struct {
		name    string
		r       io.Reader
		records int
		want    error
		offset  int64
	}{
		{"fails inside the first record", io.MultiReader(bytes.NewReader(in[:HeaderLen+1]), iotest.ErrReader(boom)), 0, boom, 0},
		{"fails after the first record", io.MultiReader(bytes.NewReader(in[:second]), iotest.ErrReader(boom)), 1, boom, second},
		{"fails at once", iotest.ErrReader(boom), 0, boom, 0},
		{"makes no progress", zeroReader{}, 0, io.ErrNoProgress, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewScanner(tc.r, 0)
			n := 0
			var err error
			for {
				if _, err = s.Next(); err != nil {
					break
				}
				n++
			}
			if n != tc.records {
				t.Errorf("read %d records, want %d", n, tc.records)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if errors.Is(err, ErrTruncated) || errors.Is(err, ErrCorrupt) {
				t.Fatalf("a read failure must not look like bad data: %v", err)
			}
			var re *RecordError
			if !errors.As(err, &re) || re.Offset != tc.offset {
				t.Fatalf("err = %v, want a *RecordError at offset %d", err, tc.offset)
			}
		})
	}
}

// zeroReader returns nothing and no error, forever.
type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

func TestScannerResetKeepsTheBuffer(t *testing.T) {
	s := NewScanner(bytes.NewReader(file("one", "two")), 64)
	if _, err := scanAllWith(s); err != nil {
		t.Fatal(err)
	}
	buf := &s.buf[0]
	s.Reset(bytes.NewReader(file("three")))
	got, err := scanAllWith(s)
	if err != nil || len(got) != 1 || string(got[0]) != "three" {
		t.Fatalf("after Reset read %q, %v; want [three]", got, err)
	}
	if s.Offset() != int64(HeaderLen+5+FooterLen) {
		t.Errorf("Offset after Reset = %d, want it counted from the new input", s.Offset())
	}
	if &s.buf[0] != buf {
		t.Error("Reset replaced the buffer")
	}
}

func scanAllWith(s *Scanner) ([][]byte, error) {
	var out [][]byte
	for {
		data, err := s.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, bytes.Clone(data))
	}
}

func TestScannerDoesNotAllocate(t *testing.T) {
	in := frameAll([][]byte{bytes.Repeat([]byte{7}, 3000), []byte("y")})
	r := bytes.NewReader(in)
	s := NewScanner(r, 1<<12)
	if n := testing.AllocsPerRun(100, func() {
		r.Reset(in)
		s.Reset(r)
		for {
			if _, err := s.Next(); err != nil {
				if err != io.EOF {
					t.Fatal(err)
				}
				return
			}
		}
	}); n != 0 {
		t.Fatalf("scanning allocates %v times per input", n)
	}
}

// FuzzScanner checks the Scanner against the Reader: for any input and buffer size, both read the
// same records and fail alike, at the same offset.
func FuzzScanner(f *testing.F) {
	f.Add(file("a", "bc"), uint16(0))
	f.Add(file("hello", "", "world"), uint16(13))
	f.Add(frameAll([][]byte{bytes.Repeat([]byte("z"), 300)}), uint16(40))
	f.Add([]byte{}, uint16(1))
	f.Add(flip(file("xyz"), 3), uint16(0))
	f.Add(file("abc")[:HeaderLen+2], uint16(0))
	f.Fuzz(func(t *testing.T, in []byte, bufSize uint16) {
		want, wantErr := ReadAll(bytes.NewReader(in))
		got, gotErr := scanAll(bytes.NewReader(in), int(bufSize))
		if len(got) != len(want) {
			t.Fatalf("Scanner read %d records, Reader %d", len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("record %d differs", i)
			}
		}
		if (wantErr == nil) != (gotErr == nil) {
			t.Fatalf("Scanner error %v, Reader error %v", gotErr, wantErr)
		}
		if wantErr == nil {
			return
		}
		var gre, wre *RecordError
		if !errors.As(gotErr, &gre) || !errors.As(wantErr, &wre) {
			t.Fatalf("errors are not *RecordError: %v / %v", gotErr, wantErr)
		}
		if gre.Offset != wre.Offset || !errors.Is(gre.Err, wre.Err) || fmt.Sprint(gre.Err) != fmt.Sprint(wre.Err) {
			t.Fatalf("Scanner error %v, Reader error %v", gotErr, wantErr)
		}
	})
}
