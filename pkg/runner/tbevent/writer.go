// Package tbevent writes and reads TensorBoard event files: TFRecord files (pkg/tfrecord) of
// serialized tensorflow.Event messages, as TensorFlow's tf.compat.v1.summary.FileWriter writes
// them and TensorBoard reads them.
//
// A file written by Writer is named and laid out as TensorFlow's EventsWriter
// (tensorflow/core/util/events_writer.cc) lays it out:
//
//	<logdir>/events.out.tfevents.<%010d seconds>.<hostname><suffix>
//	record 0: Event{wall_time: <those seconds>, file_version: "brain.Event:2"}
//	record i: Event{wall_time: <time.time() of the add>, step, summary | ...}
//
// Unlike the Python FileWriter, writes are synchronous (no queue, no background thread): an added
// event is in the file's buffer when the call returns and on disk after the next flush, which
// happens on the first add, then at the first add after each flush interval, and on Flush / Close.
package tbevent

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	tfframework "github.com/monolith-go/monolith/gen/pb/tensorflow/core/framework"
	tfutil "github.com/monolith-go/monolith/gen/pb/tensorflow/core/util"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/tfrecord"
)

const (
	// VersionPrefix starts every file_version (EventsWriter::kVersionPrefix).
	VersionPrefix = "brain.Event:"
	// FileVersion is the file_version of the first event of a file (kVersionPrefix +
	// kCurrentVersion).
	FileVersion = VersionPrefix + "2"
	// FilePrefix is the base of every event file name: FileWriter passes <logdir>/events to
	// EventsWriter, which appends .out.tfevents.
	FilePrefix = "events.out.tfevents."
	// DefaultFlushInterval is FileWriter's default flush_secs.
	DefaultFlushInterval = 120 * time.Second
)

// ErrClosed is returned by writes to a closed Writer (the Python FileWriter drops them silently).
var ErrClosed = errors.New("tbevent: writer is closed")

// FileName is the base name EventsWriter gives a file it opens at t on host hostname:
// "events.out.tfevents.%010lld.<hostname><suffix>" with t's whole seconds since the epoch.
func FileName(t time.Time, hostname, suffix string) string {
	return fmt.Sprintf("%s%010d.%s%s", FilePrefix, fileSeconds(t), hostname, suffix)
}

// fileSeconds is EventsWriter's time_in_seconds: NowMicros() / 1000000 in integer arithmetic.
func fileSeconds(t time.Time) int64 { return t.UnixMicro() / 1_000_000 }

// WallTime is t as Python's time.time() returns it: the nanoseconds since the epoch divided by
// 1e9 in double precision (CPython's _PyTime_AsSecondsDouble), so the seconds of an event match
// the reference's to the last bit.
func WallTime(t time.Time) float64 {
	ns := t.UnixNano()
	if ns%1_000_000_000 == 0 {
		return float64(ns / 1_000_000_000)
	}
	return float64(ns) / 1e9
}

// Options are a Writer's optional settings; the zero value is FileWriter's defaults.
type Options struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Hostname goes into the file name; "" means os.Hostname() (TensorFlow's port::Hostname).
	Hostname string
	// FilenameSuffix is appended to the file name (FileWriter's filename_suffix).
	FilenameSuffix string
	// FlushInterval is how long added events may stay buffered (flush_secs); 0 means
	// DefaultFlushInterval, a negative value flushes after every event.
	FlushInterval time.Duration
}

// Writer writes one event file. It is safe for concurrent use.
type Writer struct {
	path     string
	now      func() time.Time
	interval time.Duration

	mu        sync.Mutex
	f         *os.File
	bw        *bufio.Writer
	tw        *tfrecord.Writer
	nextFlush time.Time
	seenTags  map[string]bool
	closed    bool
	buf       []byte
}

// NewWriter creates logdir when it does not exist, creates a new event file in it and writes the
// file_version event, flushed, as FileWriter(logdir) with EventsWriter does. It never overwrites a
// file: when the name is taken (another writer opened a file in logdir in the same second) it fails
// with an error of kind Runtime, where TensorFlow truncates the other writer's file.
func NewWriter(logdir string, opts Options) (*Writer, error) {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	host := opts.Hostname
	if host == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("tbevent: hostname: %w", err)
		}
		host = h
	}
	interval := opts.FlushInterval
	if interval == 0 {
		interval = DefaultFlushInterval
	}
	if err := os.MkdirAll(logdir, 0o755); err != nil {
		return nil, fmt.Errorf("tbevent: create log dir: %w", err)
	}
	t := now()
	path := filepath.Join(logdir, FileName(t, host, opts.FilenameSuffix))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return nil, errkind.New(errkind.Runtime, "tbevent: event file %s exists already (a writer opened it in the same second); give a FilenameSuffix", path)
	}
	if err != nil {
		return nil, fmt.Errorf("tbevent: create event file: %w", err)
	}
	bw := bufio.NewWriter(f)
	w := &Writer{
		path:     path,
		now:      now,
		interval: interval,
		f:        f,
		bw:       bw,
		tw:       tfrecord.NewWriter(bw),
		seenTags: map[string]bool{},
	}
	first := &tfutil.Event{
		WallTime: float64(fileSeconds(t)),
		What:     &tfutil.Event_FileVersion{FileVersion: FileVersion},
	}
	if err := w.write(first); err == nil {
		err = w.flush()
	}
	if err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("tbevent: write file version: %w", err)
	}
	return w, nil
}

// Path is the event file's path.
func (w *Writer) Path() string { return w.path }

// AddEvent writes e as it is (FileWriter.add_event).
func (w *Writer) AddEvent(e *tfutil.Event) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	return w.add(e)
}

// AddSummary writes s as an event of the given step, stamped with the clock's time
// (FileWriter.add_summary). As FileWriter does to save space, a value's metadata is kept only on
// the first value of its tag this Writer writes; s itself is not modified (Python strips the
// caller's message in place).
func (w *Writer) AddSummary(s *tfframework.Summary, step int64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	if s == nil {
		return errkind.New(errkind.Attribute, "tbevent: AddSummary of a nil summary (step %d)", step)
	}
	var stripped *tfframework.Summary
	for i, v := range s.GetValue() {
		if v.GetMetadata() == nil {
			continue
		}
		if !w.seenTags[v.GetTag()] {
			w.seenTags[v.GetTag()] = true
			continue
		}
		if stripped == nil {
			stripped = proto.Clone(s).(*tfframework.Summary)
		}
		stripped.Value[i].Metadata = nil
	}
	if stripped != nil {
		s = stripped
	}
	return w.add(&tfutil.Event{
		WallTime: WallTime(w.now()),
		Step:     step,
		What:     &tfutil.Event_Summary{Summary: s},
	})
}

// add writes e and flushes when the flush interval has passed (the Python writer thread's rule:
// the first event is flushed at once). w.mu is held.
func (w *Writer) add(e *tfutil.Event) error {
	if err := w.write(e); err != nil {
		return err
	}
	if now := w.now(); !now.Before(w.nextFlush) {
		w.nextFlush = now.Add(w.interval)
		return w.flush()
	}
	return nil
}

// write appends e to the buffer.
func (w *Writer) write(e *tfutil.Event) error {
	var err error
	w.buf, err = marshalCanonical(w.buf[:0], e.ProtoReflect())
	if err != nil {
		return fmt.Errorf("tbevent: encode event: %w", err)
	}
	if err := w.tw.Write(w.buf); err != nil {
		return fmt.Errorf("tbevent: %s: %w", w.path, err)
	}
	return nil
}

// Flush writes buffered events to the file and syncs it (EventsWriter::Flush).
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	return w.flush()
}

func (w *Writer) flush() error {
	if err := w.bw.Flush(); err != nil {
		return fmt.Errorf("tbevent: flush %s: %w", w.path, err)
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("tbevent: sync %s: %w", w.path, err)
	}
	// EventsWriter checks this too: a sync can succeed on a file someone deleted.
	if _, err := os.Stat(w.path); err != nil {
		return fmt.Errorf("tbevent: event file %s has disappeared: %w", w.path, err)
	}
	return nil
}

// Close flushes and closes the file. Closing again does nothing.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	err := w.flush()
	if cerr := w.f.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("tbevent: close %s: %w", w.path, cerr)
	}
	return err
}
