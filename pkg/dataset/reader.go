// Package dataset reads the training side's record files: Monolith's datasets
// (monolith/native_training/data/datasets.py) without TensorFlow. A Reader takes file patterns
// (comma lists, globs, @file lists; Match), reads the files one after the other, decompressing
// GZIP or ZLIB files, in one of two framings: TensorFlow's TFRecord (checksums verified) or
// Monolith's framed protos with their lagrangex / sort id / kafka headers (FilePBDataset). Workers
// share the input by Shard. Watch reads files as they appear. Instances, Examples and
// ExampleBatches parse the records into Monolith's protos.
//
// Every error about the input names the file and the byte offset of the bad record (*FileError).
package dataset

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/instance"
	"github.com/monolith-go/monolith/pkg/tfrecord"
)

// Framing is how the records of a file are delimited.
type Framing int

const (
	// TFRecord is TensorFlow's record framing: a length, its masked CRC-32C, the data and its
	// masked CRC-32C (tf.data.TFRecordDataset; the reference's use_tfrecord).
	TFRecord Framing = iota
	// PBFrames is Monolith's framed dump (FilePBDataset, the default of the reference's
	// datasets): the headers Options.Header says, a little-endian uint64 size and the serialized
	// proto; no checksums.
	PBFrames
)

func (f Framing) String() string {
	switch f {
	case TFRecord:
		return "tfrecord"
	case PBFrames:
		return "pb"
	}
	return fmt.Sprintf("Framing(%d)", int(f))
}

// Options say how a Reader reads its files.
type Options struct {
	// Framing delimits the records of each file.
	Framing Framing
	// Header are the headers preceding each record with Framing PBFrames (the reference's
	// lagrangex_header, kafka_dump_prefix, has_sort_id, kafka_dump).
	Header instance.Header
	// Compression is how every file is compressed.
	Compression Compression
	// Shard is this worker's part of the input.
	Shard Shard
	// Exclude, if set, drops the matched files for which it returns true before sharding (the
	// reference's exclude_fn).
	Exclude func(path string) bool
	// BufferSize is how many bytes are read from a file at a time; 0 means
	// tfrecord.DefaultScanBufferSize.
	BufferSize int
}

func (o Options) validate() error {
	if o.Framing != TFRecord && o.Framing != PBFrames {
		return errkind.New(errkind.Value, "dataset: unknown framing %d", int(o.Framing))
	}
	if _, err := ParseCompression(string(o.Compression)); err != nil {
		return err
	}
	return o.Shard.validate()
}

// Record is one record read from a file.
type Record struct {
	// File is the file the record is in.
	File string
	// Offset is the byte offset of the record's first byte (its first header byte) in File, or in
	// File's decompressed stream when it is compressed.
	Offset int64
	// Data is the record. With Framing TFRecord it is a slice of the Reader's buffer, valid until
	// the next call to Next (Clone keeps it); with PBFrames it is the caller's.
	Data []byte
	// Lagrangex is the record's lagrangex header (PBFrames with Header.Lagrangex), else 0.
	Lagrangex uint64

	// compression is File's, for errors about the record.
	compression Compression
}

// PBType is the record type in the lagrangex header's low byte.
func (r Record) PBType() uint8 { return uint8(r.Lagrangex) }

// DataSourceKey is the data source the lagrangex header names (its low 32 bits, type byte
// cleared), as the reference sets data_source_key on each parsed proto.
func (r Record) DataSourceKey() uint32 { return uint32(r.Lagrangex) >> 8 << 8 }

// Clone returns r with a copy of its data, safe to keep after the next Next (for example in a
// prefetch queue).
func (r Record) Clone() Record {
	r.Data = append([]byte(nil), r.Data...)
	return r
}

// FileError is an error reading a file: the file cannot be opened or read, or a record in it is
// corrupt or truncated. It names the file and the byte offset of the bad record (0 for a file that
// cannot be opened).
type FileError struct {
	File string
	// Offset is the offset of the bad record's first byte, in the decompressed stream when
	// Compression is set.
	Offset      int64
	Compression Compression
	// Err is the cause: it wraps tfrecord.ErrCorrupt or tfrecord.ErrTruncated for bad TFRecord
	// data, io.ErrUnexpectedEOF for a truncated frame, or the file system's error.
	Err error
	// Hint says what the file looks like when that explains the error: a compressed file read
	// without its compression.
	Hint string
}

func (e *FileError) Error() string {
	where := fmt.Sprintf("offset %d", e.Offset)
	if e.Compression != NoCompression {
		where += fmt.Sprintf(" of the decompressed %s stream", e.Compression)
	}
	msg := fmt.Sprintf("dataset: %s at %s: %s", e.File, where, cause(e.Err))
	if e.Hint != "" {
		msg += " (" + e.Hint + ")"
	}
	return msg
}

// compressionHint says, for a corrupt first record of a file read without compression, which
// compression the file's first bytes announce: the usual cause of such an error.
func compressionHint(name string, offset int64, c Compression) string {
	if offset != 0 || c != NoCompression {
		return ""
	}
	f, err := os.Open(name)
	if err != nil {
		return ""
	}
	defer f.Close()
	var head [2]byte
	if _, err := io.ReadFull(f, head[:]); err != nil {
		return ""
	}
	switch {
	case head[0] == 0x1f && head[1] == 0x8b:
		return "the file starts with gzip's magic bytes: read it with compression GZIP (--compression=GZIP)"
	case head[0] == 0x78 && (uint16(head[0])<<8|uint16(head[1]))%31 == 0:
		return "the file starts with a zlib header: read it with compression ZLIB (--compression=ZLIB)"
	}
	return ""
}

func (e *FileError) Unwrap() error { return e.Err }

// cause words an error without repeating the file name and offset FileError gives.
func cause(err error) string {
	var re *tfrecord.RecordError
	var fe *instance.FrameError
	var pe *fs.PathError
	switch {
	case errors.As(err, &re):
		return fmt.Sprintf("%v: %s", re.Err, re.Detail)
	case errors.As(err, &fe):
		return fe.Err.Error()
	case errors.As(err, &pe):
		return fmt.Sprintf("%s: %v", pe.Op, pe.Err)
	}
	return err.Error()
}

// FileSource gives a Reader its files, in order.
type FileSource interface {
	// NextFile returns the next file to read, or io.EOF when there are no more.
	NextFile(ctx context.Context) (string, error)
}

// fileList is a FileSource of a fixed list.
type fileList []string

func (l *fileList) NextFile(context.Context) (string, error) {
	if len(*l) == 0 {
		return "", io.EOF
	}
	f := (*l)[0]
	*l = (*l)[1:]
	return f, nil
}

// Reader reads the records of a sequence of files, one file after the other. It is not safe for
// concurrent use; Close releases the open file.
type Reader struct {
	src  FileSource
	opts Options
	// byRecord: keep only the records j with j % Shard.Count == Shard.Index (see Shard).
	byRecord bool
	n        int64

	cur    *openFile
	scan   *tfrecord.Scanner
	br     *bufio.Reader
	err    error
	checks int
}

// Open reads the files patterns match (ExpandPatterns: sorted, de-duplicated; no file is an
// error), less those opts.Exclude drops, sharded by opts.Shard.
func Open(patterns []string, opts Options) (*Reader, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	files, err := ExpandPatterns(patterns...)
	if err != nil {
		return nil, err
	}
	return OpenFiles(files, opts)
}

// OpenFiles reads files in the order given, less those opts.Exclude drops, sharded by opts.Shard.
func OpenFiles(files []string, opts Options) (*Reader, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if opts.Exclude != nil {
		var kept []string
		for _, f := range files {
			if !opts.Exclude(f) {
				kept = append(kept, f)
			}
		}
		files = kept
	}
	mine, byRecord := opts.Shard.Files(files)
	l := fileList(append([]string(nil), mine...))
	r := NewReader(&l, opts)
	r.byRecord = byRecord
	return r, nil
}

// NewReader reads the files src gives, every record of each (src does any sharding; opts.Shard
// and opts.Exclude are not applied here). Options are checked by the first Next.
func NewReader(src FileSource, opts Options) *Reader {
	return &Reader{src: src, opts: opts}
}

// ctxCheckEvery is how many records Next reads between two looks at its context: often enough to
// stop promptly, rarely enough to cost nothing next to the records.
const ctxCheckEvery = 64

// Next returns the next record. It returns io.EOF after the last record of the last file, a
// *FileError when a file cannot be read or holds a bad record, and ctx's error when ctx ends
// first. Errors other than ctx's are sticky.
func (r *Reader) Next(ctx context.Context) (Record, error) {
	if r.err != nil {
		return Record{}, r.err
	}
	if r.checks++; r.checks >= ctxCheckEvery {
		r.checks = 0
		if err := ctx.Err(); err != nil {
			return Record{}, err
		}
	}
	for {
		if r.cur == nil {
			if err := r.openNext(ctx); err != nil {
				if ctx.Err() == nil || !errors.Is(err, ctx.Err()) {
					r.err = err
				}
				return Record{}, err
			}
		}
		rec, err := r.cur.next()
		if err == io.EOF {
			if err := r.closeCur(); err != nil {
				r.err = err
				return Record{}, err
			}
			continue
		}
		if err != nil {
			r.err = &FileError{File: r.cur.name, Offset: rec.Offset, Compression: r.opts.Compression, Err: err,
				Hint: compressionHint(r.cur.name, rec.Offset, r.opts.Compression)}
			r.closeCur()
			return Record{}, r.err
		}
		rec.compression = r.opts.Compression
		if r.byRecord {
			j := r.n
			r.n++
			if j%int64(r.opts.Shard.Count) != int64(r.opts.Shard.Index) {
				continue
			}
		}
		return rec, nil
	}
}

// openNext opens the source's next file.
func (r *Reader) openNext(ctx context.Context) error {
	if err := r.opts.validate(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	name, err := r.src.NextFile(ctx)
	if err != nil {
		return err
	}
	// Errors before the first record are at offset 0 of the file itself (a compressed file's
	// header is its first bytes), so they leave Compression unset.
	f, err := os.Open(name)
	if err != nil {
		return &FileError{File: name, Err: err}
	}
	in, closeZ, err := decompress(f, r.opts.Compression)
	if err != nil {
		f.Close()
		return &FileError{File: name, Err: err}
	}
	of := &openFile{name: name, f: f, closeZ: closeZ}
	switch r.opts.Framing {
	case TFRecord:
		if r.scan == nil {
			r.scan = tfrecord.NewScanner(in, r.opts.BufferSize)
		} else {
			r.scan.Reset(in)
		}
		of.scan = r.scan
	case PBFrames:
		size := r.opts.BufferSize
		if size <= 0 {
			size = tfrecord.DefaultScanBufferSize
		}
		if r.br == nil {
			r.br = bufio.NewReaderSize(in, size)
		} else {
			r.br.Reset(in)
		}
		of.frames = instance.NewFrameReader(r.br, r.opts.Header)
	}
	r.cur = of
	return nil
}

func (r *Reader) closeCur() error {
	err := r.cur.close()
	r.cur = nil
	return err
}

// Close closes the file being read. The Reader returns io.EOF afterwards.
func (r *Reader) Close() error {
	if r.err == nil {
		r.err = io.EOF
	}
	if r.cur == nil {
		return nil
	}
	return r.closeCur()
}

// openFile is the file a Reader is reading.
type openFile struct {
	name   string
	f      *os.File
	closeZ func() error
	scan   *tfrecord.Scanner
	frames *instance.FrameReader
}

// next returns the file's next record; on error, the record's Offset is where the bad one starts.
func (o *openFile) next() (Record, error) {
	if o.scan != nil {
		data, err := o.scan.Next()
		return Record{File: o.name, Offset: o.scan.RecordOffset(), Data: data}, err
	}
	start := o.frames.Offset()
	f, err := o.frames.Next()
	if err != nil {
		return Record{File: o.name, Offset: start}, err
	}
	return Record{File: o.name, Offset: f.Offset, Data: f.Data, Lagrangex: f.Lagrangex}, nil
}

func (o *openFile) close() error {
	if err := errors.Join(o.closeZ(), o.f.Close()); err != nil {
		return &FileError{File: o.name, Err: fmt.Errorf("close: %w", err)}
	}
	return nil
}
