package dataset

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"

	examplepb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/example"
	parserpb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/parser"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// Kind is what a record holds: the reference's PbType.
type Kind int

// The kinds, numbered as PbType.
const (
	KindInstance     Kind = 1
	KindExampleBatch Kind = 2
	KindExample      Kind = 3
	KindPlainText    Kind = 4
)

// String is PbType.to_name: the lower-case name ("examplebatch").
func (k Kind) String() string {
	switch k {
	case KindInstance:
		return "instance"
	case KindExampleBatch:
		return "examplebatch"
	case KindExample:
		return "example"
	case KindPlainText:
		return "plaintext"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// ParseKind reads a kind as the reference's data_type flag names it, case-insensitively:
// instance, example, examplebatch (also example_batch), plaintext.
func ParseKind(s string) (Kind, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "instance":
		return KindInstance, nil
	case "examplebatch", "example_batch":
		return KindExampleBatch, nil
	case "example":
		return KindExample, nil
	case "plaintext":
		return KindPlainText, nil
	}
	return 0, errkind.New(errkind.Value, "dataset: data type %q is not one of instance, example, examplebatch, plaintext", s)
}

// NewMessage returns an empty message of kind k (an error for KindPlainText, which is not a proto).
func NewMessage(k Kind) (proto.Message, error) {
	switch k {
	case KindInstance:
		return &parserpb.Instance{}, nil
	case KindExampleBatch:
		return &examplepb.ExampleBatch{}, nil
	case KindExample:
		return &examplepb.Example{}, nil
	}
	return nil, errkind.New(errkind.Value, "dataset: %v records are not protos", k)
}

// Parse parses rec into m. With a lagrangex header, the header's data source key is set on m as
// the reference's reader does. An unparsable record is a *FileError naming its file and offset.
func Parse(rec Record, m proto.Message, lagrangex bool) error {
	if err := proto.Unmarshal(rec.Data, m); err != nil {
		return &FileError{File: rec.File, Offset: rec.Offset, Compression: rec.compression, Err: errkind.Wrap(errkind.Value,
			fmt.Errorf("parse %s: %w", m.ProtoReflect().Descriptor().FullName(), err))}
	}
	if lagrangex {
		key := rec.DataSourceKey()
		switch m := m.(type) {
		case *parserpb.Instance:
			m.DataSourceKey = proto.Uint32(key)
		case *examplepb.Example:
			m.DataSourceKey = key
		case *examplepb.ExampleBatch:
			m.DataSourceKey = key
		}
	}
	return nil
}

// Messages yields the records of a Reader parsed as protos of one type.
type Messages[M proto.Message] struct {
	r      *Reader
	newMsg func() M
}

// Instances parses r's records as Instances.
func Instances(r *Reader) *Messages[*parserpb.Instance] {
	return &Messages[*parserpb.Instance]{r: r, newMsg: func() *parserpb.Instance { return &parserpb.Instance{} }}
}

// Examples parses r's records as Examples.
func Examples(r *Reader) *Messages[*examplepb.Example] {
	return &Messages[*examplepb.Example]{r: r, newMsg: func() *examplepb.Example { return &examplepb.Example{} }}
}

// ExampleBatches parses r's records as ExampleBatches.
func ExampleBatches(r *Reader) *Messages[*examplepb.ExampleBatch] {
	return &Messages[*examplepb.ExampleBatch]{r: r, newMsg: func() *examplepb.ExampleBatch { return &examplepb.ExampleBatch{} }}
}

// Next returns the next record, parsed; errors are the Reader's, or a *FileError for a record
// that does not parse.
func (m *Messages[M]) Next(ctx context.Context) (M, error) {
	var zero M
	rec, err := m.r.Next(ctx)
	if err != nil {
		return zero, err
	}
	msg := m.newMsg()
	lagrangex := m.r.opts.Framing == PBFrames && m.r.opts.Header.Lagrangex
	if err := Parse(rec, msg, lagrangex); err != nil {
		return zero, err
	}
	return msg, nil
}

// Reader is the Reader the messages come from (to Close it).
func (m *Messages[M]) Reader() *Reader { return m.r }
