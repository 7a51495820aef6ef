// Package fileops ports monolith/native_training/file_ops.py and the custom ops behind it
// (monolith/native_training/runtime/ops/file_ops.cc): a writable file that training code appends
// raw bytes or embedding entry dumps to, and a hook that closes such files when a run ends.
//
// Entry dumps are TFRecord-framed monolith.hash_table.EntryDump protos, one per item, byte for
// byte what the reference op writes; EntryDumpReader reads them back.
package fileops

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"google.golang.org/protobuf/proto"

	hashtablepb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/hooks/runhook"
	"github.com/monolith-go/monolith/pkg/tfrecord"
)

// ErrClosed is wrapped by the error of any operation on a closed WritableFile, Close included
// (TensorFlow's POSIX file answers a second Close with EBADF).
var ErrClosed = errors.New("file already closed")

// bufferSize is the write buffer of a WritableFile; the reference writes through stdio's buffer
// the same way, so data reaches the file at the latest on Close.
const bufferSize = 64 << 10

// WritableFile is a file opened for writing that raw bytes and entry dumps are appended to
// (file_ops.WritableFile). It is safe for concurrent use: each Append or AppendEntryDump call
// lands in the file as one contiguous piece.
type WritableFile struct {
	name string

	mu     sync.Mutex
	f      *os.File
	bw     *bufio.Writer
	rec    *tfrecord.Writer
	closed bool
	// dump, id and buf are reused across entry dumps so that appending does not allocate per item.
	dump hashtablepb.EntryDump
	id   int64
	buf  []byte
}

// NewWritableFile creates (or truncates) filename for writing, creating its missing parent
// directories first, as the MonolithWritableFile op does.
func NewWritableFile(filename string) (*WritableFile, error) {
	if filename == "" {
		return nil, errkind.New(errkind.Value, "writable file: empty file name")
	}
	if err := os.MkdirAll(filepath.Dir(filename), 0o755); err != nil {
		return nil, fmt.Errorf("writable file %s: create directory: %w", filename, err)
	}
	f, err := os.OpenFile(filename, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o666)
	if err != nil {
		return nil, fmt.Errorf("writable file: %w", err)
	}
	bw := bufio.NewWriterSize(f, bufferSize)
	return &WritableFile{name: filename, f: f, bw: bw, rec: tfrecord.NewWriter(bw)}, nil
}

// Name is the file's name as given to NewWritableFile.
func (w *WritableFile) Name() string { return w.name }

// closedErr is the error of an operation on a closed file.
func (w *WritableFile) closedErr(op string) error {
	return errkind.Wrap(errkind.Runtime, fmt.Errorf("%s %s: %w", op, w.name, ErrClosed))
}

// Append appends content to the file as it is (WritableFile.append).
func (w *WritableFile) Append(content []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return w.closedErr("append to")
	}
	if _, err := w.bw.Write(content); err != nil {
		return fmt.Errorf("append to %s: %w", w.name, err)
	}
	return nil
}

// AppendEntryDump appends one TFRecord per item (WritableFile.append_entry_dump): the serialized
// EntryDump{id: itemIDs[i], num: [bias[i], embedding row i...]}, where the embedding holds
// len(itemIDs) rows of equal length, row-major. The inputs are checked before anything is
// written: itemIDs must not be empty, bias must hold one value per item and embedding a whole
// number of rows (the reference op aborts the process, or reads past bias, instead).
func (w *WritableFile) AppendEntryDump(itemIDs []int64, bias, embedding []float32) error {
	n := len(itemIDs)
	switch {
	case n == 0:
		return errkind.New(errkind.Value, "append entry dump to %s: no item ids", w.name)
	case len(bias) != n:
		return errkind.New(errkind.Value, "append entry dump to %s: %d bias values for %d item ids", w.name, len(bias), n)
	case len(embedding)%n != 0:
		return errkind.New(errkind.Value, "append entry dump to %s: %d embedding values do not split into %d rows", w.name, len(embedding), n)
	}
	dim := len(embedding) / n

	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return w.closedErr("append entry dump to")
	}
	d := &w.dump
	d.Id = &w.id
	for i, id := range itemIDs {
		w.id = id
		d.Num = append(append(d.Num[:0], bias[i]), embedding[i*dim:(i+1)*dim]...)
		buf, err := proto.MarshalOptions{}.MarshalAppend(w.buf[:0], d)
		if err != nil {
			return fmt.Errorf("append entry dump to %s: item %d: %w", w.name, i, err)
		}
		w.buf = buf
		if err := w.rec.Write(buf); err != nil {
			return fmt.Errorf("append entry dump to %s: item %d: %w", w.name, i, err)
		}
	}
	return nil
}

// Close flushes and closes the file (WritableFile.close). The file counts as closed even when
// flushing fails, as in the reference; closing again is an error wrapping ErrClosed.
func (w *WritableFile) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return w.closedErr("close")
	}
	w.closed = true
	flushErr := w.bw.Flush()
	closeErr := w.f.Close()
	w.bw, w.rec, w.buf, w.dump.Num = nil, nil, nil, nil
	if err := errors.Join(flushErr, closeErr); err != nil {
		return fmt.Errorf("close %s: %w", w.name, err)
	}
	return nil
}

// FileCloseHook closes a list of WritableFiles when a run ends (file_ops.FileCloseHook).
type FileCloseHook struct {
	runhook.Base
	files []*WritableFile
}

var _ runhook.Hook = (*FileCloseHook)(nil)

// NewFileCloseHook returns a hook closing files (the slice is copied).
func NewFileCloseHook(files []*WritableFile) *FileCloseHook {
	return &FileCloseHook{files: append([]*WritableFile(nil), files...)}
}

// End is the run-loop hook's end step (runhook.Hook, SessionRunHook.end): it closes every file,
// whatever ended the run, going on past failures, and returns their errors joined. Closing is
// cleanup, so it also runs when ctx is already done: the context is not consulted, and closing
// local files does not block.
func (h *FileCloseHook) End(context.Context, *runhook.Session, error) error {
	var errs []error
	for i, f := range h.files {
		if f == nil {
			errs = append(errs, errkind.New(errkind.Value, "file close hook: file %d is nil", i))
			continue
		}
		if err := f.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// EntryDumpReader reads back the entry dumps of a file written with AppendEntryDump only.
type EntryDumpReader struct {
	r *tfrecord.Reader
}

// NewEntryDumpReader returns a reader of the entry dump records in r (buffer r when it is a file).
func NewEntryDumpReader(r io.Reader) *EntryDumpReader {
	return &EntryDumpReader{r: tfrecord.NewReader(r)}
}

// Next returns the next entry dump, or io.EOF after the last. A bad record is a
// *tfrecord.RecordError; a record that is not an EntryDump is an error of kind Value.
func (r *EntryDumpReader) Next() (*hashtablepb.EntryDump, error) {
	off := r.r.Offset()
	data, err := r.r.Next()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		return nil, fmt.Errorf("read entry dump: %w", err)
	}
	d := &hashtablepb.EntryDump{}
	if err := proto.Unmarshal(data, d); err != nil {
		return nil, errkind.New(errkind.Value, "entry dump record at offset %d: %w", off, err)
	}
	return d, nil
}

// ReadEntryDumps returns every entry dump in r.
func ReadEntryDumps(r io.Reader) ([]*hashtablepb.EntryDump, error) {
	er := NewEntryDumpReader(r)
	var out []*hashtablepb.EntryDump
	for {
		d, err := er.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, d)
	}
}
