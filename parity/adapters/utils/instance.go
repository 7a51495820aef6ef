package utils

import (
	"os"
	"strings"

	"google.golang.org/protobuf/encoding/prototext"

	parserpb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/parser"
	"github.com/monolith-go/monolith/parity/harness"
	"github.com/monolith-go/monolith/pkg/instance"
)

func registerInstanceFormater(r *harness.Registry) {
	r.Register("InstanceFormater(inst).to_pb(fname)", func(c *harness.Ctx, in harness.Input) (any, error) {
		b, err := writeInstance(c, in, instance.FormatPB)
		if err != nil {
			return nil, err
		}
		return PyBytes(b), nil
	})
	r.Register("InstanceFormater(inst).to_pb_text(fname)", func(c *harness.Ctx, in harness.Input) (any, error) {
		b, err := writeInstance(c, in, instance.FormatPBTxt)
		return string(b), err
	})
}

// writeInstance writes the case's instance (input instance_pbtxt) to fname ("<tmp>/..." or null
// for a temporary file) and returns what was written.
func writeInstance(c *harness.Ctx, in harness.Input, format instance.Format) ([]byte, error) {
	text, err := in.Str("instance_pbtxt")
	if err != nil {
		return nil, err
	}
	inst := &parserpb.Instance{}
	if err := prototext.Unmarshal([]byte(text), inst); err != nil {
		return nil, &harness.InputError{Key: "instance_pbtxt", Msg: err.Error()}
	}
	fname, err := in.OptStr("fname")
	if err != nil {
		return nil, err
	}
	path := ""
	if fname != nil {
		path = strings.ReplaceAll(*fname, "<tmp>", c.TempDir())
	}
	written, err := instance.WriteInstance(inst, format, path)
	if err != nil {
		return nil, err
	}
	if path == "" {
		defer os.Remove(written)
	}
	return os.ReadFile(written)
}
