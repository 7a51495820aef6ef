package tbevent

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"google.golang.org/protobuf/proto"

	tfframework "github.com/monolith-go/monolith/gen/pb/tensorflow/core/framework"
	tfutil "github.com/monolith-go/monolith/gen/pb/tensorflow/core/util"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/tfrecord"
)

// Reader reads the events of an event file, verifying both CRCs of every record. It is not safe
// for concurrent use.
type Reader struct {
	tr *tfrecord.Reader
}

// NewReader returns a Reader of the events in r. Give it a buffered reader when r is a file.
func NewReader(r io.Reader) *Reader { return &Reader{tr: tfrecord.NewReader(r)} }

// Next returns the next event. It returns io.EOF after the last one, a *tfrecord.RecordError
// (wrapping tfrecord.ErrCorrupt or tfrecord.ErrTruncated) for a bad record, and an error of kind
// Value for a record that is not an Event.
func (r *Reader) Next() (*tfutil.Event, error) {
	off := r.tr.Offset()
	data, err := r.tr.Next()
	if err != nil {
		return nil, err
	}
	e := &tfutil.Event{}
	if err := proto.Unmarshal(data, e); err != nil {
		return nil, errkind.New(errkind.Value, "tbevent: record at offset %d is not an Event: %w", off, err)
	}
	return e, nil
}

// ReadAll returns every event of r, stopping at the first bad record (with the events before it).
func ReadAll(r io.Reader) ([]*tfutil.Event, error) {
	er := NewReader(r)
	var out []*tfutil.Event
	for {
		e, err := er.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, e)
	}
}

// ReadFile reads the event file at path and checks that it starts as every event file does: with
// a file_version event whose version starts with "brain.Event:". A bad record, or a file that does
// not start so, is an error (of kind Value for the latter); the events read before it are returned.
func ReadFile(path string) ([]*tfutil.Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tbevent: %w", err)
	}
	defer f.Close()
	events, err := ReadAll(bufio.NewReader(f))
	if err != nil {
		return events, fmt.Errorf("tbevent: %s: %w", path, err)
	}
	if len(events) == 0 {
		return nil, errkind.New(errkind.Value, "tbevent: %s: no events, not even the file version", path)
	}
	if v, ok := events[0].GetWhat().(*tfutil.Event_FileVersion); !ok || !strings.HasPrefix(v.FileVersion, VersionPrefix) {
		return events, errkind.New(errkind.Value, "tbevent: %s: the first event is not a %q file version: %v", path, VersionPrefix, events[0])
	}
	return events, nil
}

// Files lists the event files of logdir (names containing "tfevents", as TensorBoard's directory
// loader picks them), sorted by name, which for one host and suffix is creation order.
func Files(logdir string) ([]string, error) {
	entries, err := os.ReadDir(logdir)
	if err != nil {
		return nil, fmt.Errorf("tbevent: %w", err)
	}
	var out []string
	for _, e := range entries { // os.ReadDir sorts by name
		if !e.IsDir() && strings.Contains(e.Name(), "tfevents") {
			out = append(out, filepath.Join(logdir, e.Name()))
		}
	}
	return out, nil
}

// Scalar is one simple_value of a summary event.
type Scalar struct {
	WallTime float64
	Step     int64
	Tag      string
	Value    float32
}

// Scalars returns the simple_value summary values of events, in order.
func Scalars(events []*tfutil.Event) []Scalar {
	var out []Scalar
	for _, e := range events {
		for _, v := range e.GetSummary().GetValue() {
			if sv, ok := v.GetValue().(*tfframework.Summary_Value_SimpleValue); ok {
				out = append(out, Scalar{WallTime: e.GetWallTime(), Step: e.GetStep(), Tag: v.GetTag(), Value: sv.SimpleValue})
			}
		}
	}
	return out
}
