package export

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/pkg/tfrecord"
)

// fileSystem creates the files an export writes; tests put a failing one (a full disk) in its
// place. Directories are made, renamed and removed through the os package.
type fileSystem interface {
	// Create creates name, which must not exist.
	Create(name string) (writableFile, error)
}

// writableFile is a file being written.
type writableFile interface {
	io.Writer
	Sync() error
	Close() error
}

type osFS struct{}

func (osFS) Create(name string) (writableFile, error) {
	return os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
}

// writeFileSync writes data to the new file name and syncs it.
func writeFileSync(fsys fileSystem, name string, data []byte) (err error) {
	f, err := fsys.Create(name)
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

// syncDir makes the entries of dir (files created, renamed) durable. A file system that cannot
// sync a directory (EINVAL) is fine: there is nothing more to do on it.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	err = d.Sync()
	d.Close()
	if err != nil && !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// recordFile is a TFRecord file of EntryDump records being written.
type recordFile struct {
	name    string
	f       writableFile
	bw      *bufio.Writer
	w       *tfrecord.Writer
	buf     []byte
	entries int64
}

func createRecordFile(fsys fileSystem, name string) (*recordFile, error) {
	f, err := fsys.Create(name)
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", name, err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	return &recordFile{name: name, f: f, bw: bw, w: tfrecord.NewWriter(bw)}, nil
}

// write appends m as one record.
func (r *recordFile) write(m proto.Message) error {
	b, err := proto.MarshalOptions{}.MarshalAppend(r.buf[:0], m)
	if err != nil {
		return fmt.Errorf("write %s: %w", r.name, err)
	}
	r.buf = b
	if err := r.w.Write(b); err != nil {
		return fmt.Errorf("write %s: %w", r.name, err)
	}
	r.entries++
	return nil
}

// finish flushes, syncs and closes the file and returns its size.
func (r *recordFile) finish() (int64, error) {
	err := r.bw.Flush()
	if err == nil {
		err = r.f.Sync()
	}
	if cerr := r.f.Close(); err == nil {
		err = cerr
	}
	r.f = nil
	if err != nil {
		return 0, fmt.Errorf("write %s: %w", r.name, err)
	}
	return r.w.Written(), nil
}

// abandon closes a file whose export failed (its directory is removed).
func (r *recordFile) abandon() {
	if r.f != nil {
		r.f.Close()
		r.f = nil
	}
}
