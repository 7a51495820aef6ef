// Package tfrecord writes and reads TFRecord files, TensorFlow's record framing (the format of
// tensorflow/core/lib/io/record_writer.cc, also used by TensorBoard event files). Each record is
//
//	uint64 length          little endian
//	uint32 masked_crc32c   of the 8 length bytes, little endian
//	byte   data[length]
//	uint32 masked_crc32c   of data, little endian
//
// where masked_crc32c(b) = ((c >> 15) | (c << 17)) + 0xa282ead8 and c is the CRC-32C (Castagnoli)
// of b. The mask keeps a CRC computed over data that itself holds CRCs well distributed.
//
// Reader returns each record in a slice of its own; Scanner reads through one large buffer and
// returns slices of it (no copy), for bulk reading such as training datasets. This package frames
// records only: pkg/dataset reads GZIP and ZLIB compressed files by giving these a decompressing
// reader.
package tfrecord

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

const (
	// HeaderLen is the size of a record's header: the length and its masked CRC.
	HeaderLen = 8 + 4
	// FooterLen is the size of a record's footer: the masked CRC of its data.
	FooterLen = 4
	// maskDelta is TensorFlow's kMaskDelta (tensorflow/core/lib/hash/crc32c.h).
	maskDelta = 0xa282ead8
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CRC32C is the CRC-32C (Castagnoli) checksum of b.
func CRC32C(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// Mask returns TensorFlow's masked form of a CRC (crc32c::Mask).
func Mask(crc uint32) uint32 { return ((crc >> 15) | (crc << 17)) + maskDelta }

// Unmask inverts Mask (crc32c::Unmask).
func Unmask(masked uint32) uint32 {
	rot := masked - maskDelta
	return (rot >> 17) | (rot << 15)
}

// MaskedCRC32C is Mask(CRC32C(b)), the checksum TFRecord stores.
func MaskedCRC32C(b []byte) uint32 { return Mask(CRC32C(b)) }

// putHeader fills h with the header of a record of n data bytes.
func putHeader(h *[HeaderLen]byte, n uint64) {
	binary.LittleEndian.PutUint64(h[:8], n)
	binary.LittleEndian.PutUint32(h[8:], MaskedCRC32C(h[:8]))
}

// AppendRecord appends the framed record of data to dst and returns the extended slice.
func AppendRecord(dst, data []byte) []byte {
	var h [HeaderLen]byte
	putHeader(&h, uint64(len(data)))
	dst = append(dst, h[:]...)
	dst = append(dst, data...)
	return binary.LittleEndian.AppendUint32(dst, MaskedCRC32C(data))
}

// Writer writes TFRecord records to an io.Writer. Each record costs three Write calls (header,
// data, footer), as TensorFlow's RecordWriter makes three Appends: give it a buffered writer
// (bufio.Writer) when the destination is a file. A Writer is not safe for concurrent use.
type Writer struct {
	w   io.Writer
	n   int64
	err error
	// hdr and ftr live in the Writer so that writing does not allocate.
	hdr [HeaderLen]byte
	ftr [FooterLen]byte
}

// NewWriter returns a Writer appending records to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write appends one record holding data. After a failed write the Writer keeps returning that
// error: the destination may hold a partial record, so further records would not be readable.
func (w *Writer) Write(data []byte) error {
	if w.err != nil {
		return w.err
	}
	putHeader(&w.hdr, uint64(len(data)))
	binary.LittleEndian.PutUint32(w.ftr[:], MaskedCRC32C(data))
	for _, part := range [...][]byte{w.hdr[:], data, w.ftr[:]} {
		if len(part) == 0 {
			continue
		}
		n, err := w.w.Write(part)
		w.n += int64(n)
		if err == nil && n < len(part) {
			err = io.ErrShortWrite
		}
		if err != nil {
			w.err = fmt.Errorf("tfrecord: write record at offset %d: %w", w.n-int64(n), err)
			return w.err
		}
	}
	return nil
}

// Written is the number of bytes written so far (the offset of the next record when the
// destination started empty).
func (w *Writer) Written() int64 { return w.n }

// ErrCorrupt is the error a checksum mismatch wraps (TensorFlow's DataLoss "corrupted record").
var ErrCorrupt = errors.New("corrupted record")

// ErrTruncated is the error a record cut short by the end of the input wraps (TensorFlow's
// OutOfRange "truncated record").
var ErrTruncated = errors.New("truncated record")

// RecordError reports a bad record and where it starts. Err is ErrCorrupt or ErrTruncated, or the
// underlying read error.
type RecordError struct {
	// Offset is the input offset of the bad record's first header byte.
	Offset int64
	// Detail says which part of the record is bad.
	Detail string
	Err    error
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("tfrecord: %v at offset %d: %s", e.Err, e.Offset, e.Detail)
}

func (e *RecordError) Unwrap() error { return e.Err }

// preallocMax bounds how much a Reader allocates up front for one record; a longer record grows
// its buffer as data actually arrives, so a forged length cannot make the Reader allocate
// memory the input does not back.
const preallocMax = 1 << 20

// Reader reads TFRecord records from an io.Reader, verifying both checksums of each record.
// A Reader is not safe for concurrent use.
type Reader struct {
	r   io.Reader
	off int64
	err error
	hdr [HeaderLen]byte
}

// NewReader returns a Reader of the records in r. Give it a buffered reader (bufio.Reader) when r
// is a file: each record costs three reads.
func NewReader(r io.Reader) *Reader { return &Reader{r: r} }

// Offset is the input offset of the next record.
func (r *Reader) Offset() int64 { return r.off }

// Next returns the data of the next record, in a new slice the caller owns. It returns io.EOF
// when the input ends exactly at a record boundary, and a *RecordError wrapping ErrTruncated
// (input ends inside a record) or ErrCorrupt (a checksum does not match) otherwise. Errors are
// sticky: after one, every call returns it.
func (r *Reader) Next() ([]byte, error) {
	if r.err != nil {
		return nil, r.err
	}
	data, err := r.next()
	if err != nil {
		r.err = err
		return nil, err
	}
	return data, nil
}

func (r *Reader) next() ([]byte, error) {
	start := r.off
	bad := func(err error, format string, args ...any) error {
		return &RecordError{Offset: start, Detail: fmt.Sprintf(format, args...), Err: err}
	}
	// readErr classifies a failed ReadFull of part: a short input is a truncation, anything else
	// is the reader's own failure.
	readErr := func(part string, got int, want int64, err error) error {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return bad(ErrTruncated, "%s: got %d of %d bytes", part, got, want)
		}
		return bad(err, "reading %s", part)
	}

	n, err := io.ReadFull(r.r, r.hdr[:])
	r.off += int64(n)
	if err != nil {
		if n == 0 && errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		return nil, readErr("header", n, HeaderLen, err)
	}
	if got, want := binary.LittleEndian.Uint32(r.hdr[8:]), MaskedCRC32C(r.hdr[:8]); got != want {
		return nil, bad(ErrCorrupt, "length checksum %#08x, want %#08x", got, want)
	}
	length := binary.LittleEndian.Uint64(r.hdr[:8])
	// The checksum held, so a huge length was written as such; it still cannot be a real record
	// in memory, and int64 offsets must not overflow.
	if length > 1<<62 {
		return nil, bad(ErrCorrupt, "record length %d is not plausible", length)
	}
	data, err := r.readData(int64(length))
	if err != nil {
		return nil, readErr("data", len(data), int64(length), err)
	}
	var ftr [FooterLen]byte
	n, err = io.ReadFull(r.r, ftr[:])
	r.off += int64(n)
	if err != nil {
		return nil, readErr("data checksum", n, FooterLen, err)
	}
	if got, want := binary.LittleEndian.Uint32(ftr[:]), MaskedCRC32C(data); got != want {
		return nil, bad(ErrCorrupt, "data checksum %#08x, want %#08x (%d data bytes)", got, want, length)
	}
	return data, nil
}

// readData reads length bytes; on failure it returns what it got with the error.
func (r *Reader) readData(length int64) ([]byte, error) {
	if length <= preallocMax {
		data := make([]byte, length)
		n, err := io.ReadFull(r.r, data)
		r.off += int64(n)
		return data[:n], err
	}
	data := make([]byte, 0, preallocMax)
	for int64(len(data)) < length {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		end := min(int64(cap(data)), length)
		n, err := io.ReadFull(r.r, data[len(data):end])
		r.off += int64(n)
		data = data[:len(data)+n]
		if err != nil {
			return data, err
		}
	}
	return data, nil
}

// ReadAll returns the data of every record of r, stopping at the first bad record.
func ReadAll(r io.Reader) ([][]byte, error) {
	tr := NewReader(r)
	var out [][]byte
	for {
		data, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, data)
	}
}
