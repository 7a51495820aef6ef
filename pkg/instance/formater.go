package instance

import (
	"fmt"
	"os"

	"google.golang.org/protobuf/proto"

	parserpb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/parser"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pytext"
)

// WriteInstance is InstanceFormater.to_pb and to_pb_text: the instance serialized (FormatPB, as
// SerializeToString: one message, no record framing) or in Python's text format (FormatPBTxt,
// str(inst)), written to path, or to a new temporary file when path is empty. It returns the path
// written. Unlike the reference's to_pb_text, which opens a given path for reading and so cannot
// write it, a given path is created or truncated.
func WriteInstance(inst *parserpb.Instance, format Format, path string) (string, error) {
	var data []byte
	switch format {
	case FormatPB:
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(inst)
		if err != nil {
			return "", fmt.Errorf("serialize instance: %w", err)
		}
		data = b
	case FormatPBTxt:
		data = []byte(pytext.Format(inst))
	default:
		return "", errkind.New(errkind.Value, "write instance: file type %q is not one of pb, pbtxt", format)
	}
	if path == "" {
		f, err := os.CreateTemp("", "instance-")
		if err != nil {
			return "", fmt.Errorf("write instance: %w", err)
		}
		path = f.Name()
		if err := f.Close(); err != nil {
			return "", fmt.Errorf("write instance: %w", err)
		}
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return "", fmt.Errorf("write instance: %w", err)
	}
	return path, nil
}
