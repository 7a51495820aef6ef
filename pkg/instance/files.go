package instance

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	examplepb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/example"
	parserpb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/parser"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// Format is how a message is stored in a file.
type Format string

// Formats: tfs_client.py's --file_type pb and pbtxt, and JSON (protobuf's JSON mapping, as
// json_format reads it; the reference reads JSON only for Instances, InstanceFormater.from_json).
const (
	FormatPB    Format = "pb"
	FormatPBTxt Format = "pbtxt"
	FormatJSON  Format = "json"
)

// ParseFormat checks a --file_type value.
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case FormatPB, FormatPBTxt, FormatJSON:
		return f, nil
	}
	return "", errkind.New(errkind.Value, "file type %q is not one of pb, pbtxt, json", s)
}

// decodeFile reads path into m: one framed record (ReadRecord with h) for pb, the whole file
// otherwise.
func decodeFile(path string, format Format, h Header, m proto.Message) error {
	if format == FormatPB {
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		defer f.Close()
		rec, err := ReadRecord(bufio.NewReader(f), h)
		if errors.Is(err, io.EOF) {
			return errkind.New(errkind.Value, "read %s: no record in the file", path)
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		if err := proto.Unmarshal(rec, m); err != nil {
			return errkind.Wrap(errkind.Value, fmt.Errorf("parse %s as %s: %w", path, m.ProtoReflect().Descriptor().FullName(), err))
		}
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	switch format {
	case FormatPBTxt:
		err = prototext.Unmarshal(data, m)
	case FormatJSON:
		err = protojson.Unmarshal(data, m)
	default:
		return errkind.New(errkind.Value, "read %s: file type %q is not one of pb, pbtxt, json", path, format)
	}
	if err != nil {
		return errkind.Wrap(errkind.Value, fmt.Errorf("parse %s as %s (%s): %w", path, m.ProtoReflect().Descriptor().FullName(), format, err))
	}
	return nil
}

// ReadExampleBatch reads an ExampleBatch from a file: a framed record (pb, tfs_client.read_data),
// a text proto (pbtxt) or JSON.
func ReadExampleBatch(path string, format Format, h Header) (*examplepb.ExampleBatch, error) {
	eb := &examplepb.ExampleBatch{}
	if err := decodeFile(path, format, h, eb); err != nil {
		return nil, err
	}
	return eb, nil
}

// ReadInstance reads one Instance from a file: a framed record (pb), a text proto (pbtxt,
// InstanceFormater.from_pb_text) or JSON (InstanceFormater.from_json).
func ReadInstance(path string, format Format, h Header) (*parserpb.Instance, error) {
	inst := &parserpb.Instance{}
	if err := decodeFile(path, format, h, inst); err != nil {
		return nil, err
	}
	return inst, nil
}

// ReadInstanceRecords is tfs_client.get_instance_proto with a file: n framed Instance records,
// each parsed (so a corrupt one is reported) and serialized again.
func ReadInstanceRecords(path string, n int, h Header) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	r := bufio.NewReader(f)
	out := make([][]byte, 0, n)
	for i := range n {
		rec, err := ReadRecord(r, h)
		if errors.Is(err, io.EOF) {
			return nil, errkind.New(errkind.Value, "read %s: %d instances wanted, the file has %d", path, n, i)
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: instance %d: %w", path, i, err)
		}
		inst := &parserpb.Instance{}
		if err := proto.Unmarshal(rec, inst); err != nil {
			return nil, errkind.Wrap(errkind.Value, fmt.Errorf("parse %s: instance %d: %w", path, i, err))
		}
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(inst)
		if err != nil {
			return nil, fmt.Errorf("serialize %s: instance %d: %w", path, i, err)
		}
		out = append(out, b)
	}
	return out, nil
}

// RepeatInstance is InstanceFormater.to_tensor_proto: inst serialized n times.
func RepeatInstance(inst *parserpb.Instance, n int) ([][]byte, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(inst)
	if err != nil {
		return nil, fmt.Errorf("serialize instance: %w", err)
	}
	out := make([][]byte, n)
	for i := range out {
		out[i] = b
	}
	return out, nil
}
