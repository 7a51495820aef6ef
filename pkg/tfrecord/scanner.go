package tfrecord

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// DefaultScanBufferSize is a Scanner's initial buffer: large reads keep the cost of system calls
// small next to the cost of checksumming.
const DefaultScanBufferSize = 1 << 20

// maxRecordLength bounds a record's length: a checksum-valid length above it cannot be a real
// record in memory, and int64 offsets must not overflow.
const maxRecordLength = 1 << 62

// Scanner reads TFRecord records from an io.Reader through one large buffer, verifying both
// checksums of each record, and returns each record's data as a slice of that buffer instead of a
// copy: the slice is valid only until the next call to Next or Reset. It reads ahead, so it must
// be the only reader of its input. Its errors are those of Reader (a *RecordError wrapping
// ErrTruncated, ErrCorrupt or the input's own error, at the record's offset), and they are sticky.
// A Scanner is not safe for concurrent use.
type Scanner struct {
	r   io.Reader
	buf []byte
	// lo and hi delimit the buffered bytes not yet returned; off is the input offset of buf[lo].
	lo, hi int
	off    int64
	recOff int64
	// eof and rerr record how the input ended; they matter only once the buffer runs dry.
	eof  bool
	rerr error
	err  error
}

// NewScanner returns a Scanner of the records in r with a buffer of bufSize bytes
// (DefaultScanBufferSize when bufSize <= 0). The buffer grows to hold a longer record, as the
// record's bytes actually arrive.
func NewScanner(r io.Reader, bufSize int) *Scanner {
	if bufSize <= 0 {
		bufSize = DefaultScanBufferSize
	}
	// The buffer must at least hold a header, or fill could not make progress.
	bufSize = max(bufSize, HeaderLen+FooterLen)
	return &Scanner{r: r, buf: make([]byte, bufSize)}
}

// Reset makes s read the records of r from the start, keeping its buffer (so that reading many
// files in turn does not allocate).
func (s *Scanner) Reset(r io.Reader) {
	*s = Scanner{r: r, buf: s.buf}
}

// Offset is the input offset of the next record.
func (s *Scanner) Offset() int64 { return s.off }

// RecordOffset is the input offset of the record Next returned last, or of the bad record when
// Next failed.
func (s *Scanner) RecordOffset() int64 { return s.recOff }

// Next returns the data of the next record as a slice of the Scanner's buffer, valid until the
// next call. It returns io.EOF when the input ends exactly at a record boundary.
func (s *Scanner) Next() ([]byte, error) {
	if s.err != nil {
		return nil, s.err
	}
	data, err := s.next()
	if err != nil {
		s.err = err
		return nil, err
	}
	return data, nil
}

func (s *Scanner) next() ([]byte, error) {
	start := s.off
	s.recOff = start
	bad := func(err error, format string, args ...any) error {
		return &RecordError{Offset: start, Detail: fmt.Sprintf(format, args...), Err: err}
	}
	// short classifies a failed fill: the input ended (a truncated record) or failed to read.
	short := func(err error, part string, got, want int64) error {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return bad(ErrTruncated, "%s: got %d of %d bytes", part, got, want)
		}
		return bad(err, "reading %s", part)
	}

	if err := s.fill(HeaderLen); err != nil {
		if s.hi == s.lo && err == io.EOF {
			return nil, io.EOF
		}
		return nil, short(err, "header", int64(s.hi-s.lo), HeaderLen)
	}
	h := s.buf[s.lo : s.lo+HeaderLen]
	if got, want := binary.LittleEndian.Uint32(h[8:]), MaskedCRC32C(h[:8]); got != want {
		return nil, bad(ErrCorrupt, "length checksum %#08x, want %#08x", got, want)
	}
	length := binary.LittleEndian.Uint64(h[:8])
	if length > maxRecordLength {
		return nil, bad(ErrCorrupt, "record length %d is not plausible", length)
	}
	n := int(length)
	total := HeaderLen + n + FooterLen
	if err := s.fill(total); err != nil {
		got := int64(s.hi - s.lo - HeaderLen)
		if got < int64(n) {
			return nil, short(err, "data", got, int64(n))
		}
		return nil, short(err, "data checksum", got-int64(n), FooterLen)
	}
	data := s.buf[s.lo+HeaderLen : s.lo+HeaderLen+n : s.lo+HeaderLen+n]
	if got, want := binary.LittleEndian.Uint32(s.buf[s.lo+HeaderLen+n:]), MaskedCRC32C(data); got != want {
		return nil, bad(ErrCorrupt, "data checksum %#08x, want %#08x (%d data bytes)", got, want, length)
	}
	s.lo += total
	s.off += int64(total)
	return data, nil
}

// maxEmptyReads is how many reads returning nothing and no error the Scanner tolerates in a row
// (bufio's limit) before it reports io.ErrNoProgress.
const maxEmptyReads = 100

// fill makes at least need bytes available in buf[lo:hi], reading as much as the buffer holds at
// a time. It returns io.EOF (or the input's error) when the input ends first.
func (s *Scanner) fill(need int) error {
	empty := 0
	for s.hi-s.lo < need {
		if s.rerr != nil {
			return s.rerr
		}
		if s.eof {
			return io.EOF
		}
		// Move the partial record to the front when it would not fit after lo, or when the room
		// left would make the next read small; it is less than one record, so the copy is cheap
		// next to the read.
		if s.lo > 0 && (s.lo+need > len(s.buf) || len(s.buf)-s.hi < len(s.buf)/4) {
			s.hi = copy(s.buf, s.buf[s.lo:s.hi])
			s.lo = 0
		}
		// Grow only a buffer full of real data, so a forged length cannot make the Scanner
		// allocate memory the input does not back.
		if need > len(s.buf) && s.hi == len(s.buf) {
			nb := make([]byte, min(2*len(s.buf), need))
			copy(nb, s.buf[:s.hi])
			s.buf = nb
		}
		n, err := s.r.Read(s.buf[s.hi:])
		s.hi += n
		switch {
		case err == io.EOF:
			s.eof = true
		case err != nil:
			s.rerr = err
		case n == 0:
			if empty++; empty >= maxEmptyReads {
				s.rerr = io.ErrNoProgress
			}
		default:
			empty = 0
		}
	}
	return nil
}
