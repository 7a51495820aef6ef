package instance

import (
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	parserpb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/parser"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// The expected bytes are what the reference's InstanceFormater.to_pb / to_pb_text wrote for the
// instance of its test_data/inst.dump.
func TestWriteInstance(t *testing.T) {
	inst := &parserpb.Instance{}
	if err := prototext.Unmarshal([]byte(`label: 0 label: 1 line_id { actions: 1 } feature { name: "fc_a" fid: 1 } feature { name: "fc_b" fid: 2 } feature { fid: 3 fid: 4 }`), inst); err != nil {
		t.Fatal(err)
	}
	wantText := "label: 0.0\nlabel: 1.0\nline_id {\n  actions: 1\n}\nfeature {\n  name: \"fc_a\"\n  fid: 1\n}\nfeature {\n  name: \"fc_b\"\n  fid: 2\n}\nfeature {\n  fid: 3\n  fid: 4\n}\n"
	given := filepath.Join(t.TempDir(), "inst.txt")
	for _, tc := range []struct {
		name   string
		format Format
		path   string
		want   string
	}{
		{"pb to a temporary file", FormatPB, "", "\x1a\x08\x00\x00\x00\x00\x00\x00\x80?*\x032\x01\x01J\x10\n\x04fc_a\x12\x08\x01\x00\x00\x00\x00\x00\x00\x00J\x10\n\x04fc_b\x12\x08\x02\x00\x00\x00\x00\x00\x00\x00J\x12\x12\x10\x03\x00\x00\x00\x00\x00\x00\x00\x04\x00\x00\x00\x00\x00\x00\x00"},
		{"text to a temporary file", FormatPBTxt, "", wantText},
		{"text to a given file", FormatPBTxt, given, wantText},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := WriteInstance(inst, tc.format, tc.path)
			if err != nil {
				t.Fatal(err)
			}
			if tc.path == "" {
				defer os.Remove(p)
			} else if p != tc.path {
				t.Fatalf("wrote %s, want %s", p, tc.path)
			}
			got, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("wrote %q, want %q", got, tc.want)
			}
			if tc.format == FormatPB {
				back := &parserpb.Instance{}
				if err := proto.Unmarshal(got, back); err != nil || !proto.Equal(back, inst) {
					t.Fatalf("read back %v (%v), want %v", back, err, inst)
				}
			}
		})
	}
	if _, err := WriteInstance(inst, FormatJSON, ""); errkind.Of(err) != errkind.Value {
		t.Fatalf("JSON: %v, want a Value error (to_json is not ported)", err)
	}
}
