package dataset

import (
	"bufio"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/tfrecord"
)

// Compression is how a whole file is compressed: TensorFlow's TFRecord compression types.
type Compression string

// The compression types: TensorFlow's "", "ZLIB" (a zlib stream, RFC 1950) and "GZIP" (RFC
// 1952; concatenated members are read in turn).
const (
	NoCompression Compression = ""
	ZLIB          Compression = "ZLIB"
	GZIP          Compression = "GZIP"
)

// ParseCompression reads a compression type as TensorFlow and Monolith's CompressType name them,
// case-insensitively: "" (or NO, NONE), ZLIB, GZIP. SNAPPY and ZSTD (Monolith's pb dumps) are not
// supported.
func ParseCompression(s string) (Compression, error) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "", "NO", "NONE":
		return NoCompression, nil
	case "ZLIB":
		return ZLIB, nil
	case "GZIP":
		return GZIP, nil
	}
	return "", errkind.New(errkind.Value, "dataset: compression type %q is not one of \"\", ZLIB, GZIP", s)
}

// decompress returns a reader of r's decompressed stream; close releases the decompressor.
func decompress(r io.Reader, c Compression) (io.Reader, func() error, error) {
	noop := func() error { return nil }
	switch c {
	case NoCompression:
		return r, noop, nil
	case GZIP:
		z, err := gzip.NewReader(r)
		if err != nil {
			return nil, nil, fmt.Errorf("gzip header: %w", eofTruncated(err))
		}
		return z, z.Close, nil
	case ZLIB:
		z, err := zlib.NewReader(r)
		if err != nil {
			return nil, nil, fmt.Errorf("zlib header: %w", eofTruncated(err))
		}
		return z, z.Close, nil
	}
	return nil, nil, errkind.New(errkind.Value, "dataset: compression type %q is not one of \"\", ZLIB, GZIP", string(c))
}

// eofTruncated makes an empty or cut compressed header a truncation.
func eofTruncated(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: %w", tfrecord.ErrTruncated, io.ErrUnexpectedEOF)
	}
	return err
}

// FileWriter writes TFRecord records into a new file, compressed as asked: the files a Reader
// with Framing TFRecord reads (TensorFlow's TFRecordWriter with the same compression type).
type FileWriter struct {
	f  *os.File
	bw *bufio.Writer
	z  io.WriteCloser
	w  *tfrecord.Writer
}

// CreateFile creates (or truncates) path for writing records compressed with c.
func CreateFile(path string, c Compression) (*FileWriter, error) {
	if _, err := ParseCompression(string(c)); err != nil {
		return nil, err
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("dataset: create %s: %w", path, err)
	}
	fw := &FileWriter{f: f, bw: bufio.NewWriterSize(f, 256<<10)}
	var dst io.Writer = fw.bw
	switch c {
	case GZIP:
		fw.z = gzip.NewWriter(fw.bw)
		dst = fw.z
	case ZLIB:
		fw.z = zlib.NewWriter(fw.bw)
		dst = fw.z
	}
	fw.w = tfrecord.NewWriter(dst)
	return fw, nil
}

// Write appends one record.
func (w *FileWriter) Write(data []byte) error {
	if err := w.w.Write(data); err != nil {
		return fmt.Errorf("dataset: write %s: %w", w.f.Name(), err)
	}
	return nil
}

// Close finishes the compressed stream, flushes and closes the file; the file is complete only
// when Close returns nil.
func (w *FileWriter) Close() error {
	var errs []error
	if w.z != nil {
		errs = append(errs, w.z.Close())
	}
	errs = append(errs, w.bw.Flush(), w.f.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("dataset: close %s: %w", w.f.Name(), err)
	}
	return nil
}
