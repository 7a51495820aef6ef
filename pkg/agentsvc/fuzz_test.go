package agentsvc

import (
	"strings"
	"testing"

	pb "github.com/monolith-go/monolith/gen/pb/monolith/serving/agent_service"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/zkmirror"
)

// FuzzServerTypeName: a server type name (agent_client's --server_type) is accepted exactly when it
// names PS, ENTRY or DENSE in any case, blanks around it ignored; a name the mirror accepts (a
// service path's form) is accepted here as the same server type. Run with
//
//	go test ./pkg/agentsvc -run='^$' -fuzz='^FuzzServerTypeName$' -fuzztime=60s
func FuzzServerTypeName(f *testing.F) {
	for _, s := range []string{"ps", "PS", " Entry ", "dense", "DENSE\n", "unknown", "", "p s", "pſ", "\u0130", "ps:0", "2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		st, err := ParseServerType(s)
		_, named := pb.ServerType_value[strings.ToUpper(strings.TrimSpace(s))]
		if (err == nil) != named {
			t.Fatalf("ParseServerType(%q) = %v, %v", s, st, err)
		}
		if err != nil {
			if errkind.Of(err) == errkind.Unknown {
				t.Fatalf("ParseServerType(%q): error without a kind: %v", s, err)
			}
		} else if pb.ServerType_name[int32(st)] != strings.ToUpper(strings.TrimSpace(s)) {
			t.Fatalf("ParseServerType(%q) = %v", s, st)
		}
		if mt, merr := zkmirror.ParseServerType(s); merr == nil {
			if err != nil {
				t.Fatalf("%q: the mirror reads %q, ParseServerType fails: %v", s, mt, err)
			}
			if back, err := zkmirror.ServerTypeFromProto(st); err != nil || back != mt {
				t.Fatalf("%q: the mirror reads %q, ParseServerType %v (%q, %v)", s, mt, st, back, err)
			}
		}
	})
}
