package agentconf

import (
	"testing"
)

// The expected groups are what the reference's ZKPath.PAT.match gave on Python 3.11 for the same
// paths; these are the cases where Python's re and RE2 read the pattern differently.
func TestParseZKPathPythonClasses(t *testing.T) {
	type groups struct{ serverType, index, replica string } // "" for None
	tests := []struct {
		name string
		path string
		want *groups // nil: no match
	}{
		{"ascii", "/a/service/m/ps:0/1", &groups{"ps", "0", "1"}},
		{"final newline after replica", "/a/service/m/ps:0/1\n", &groups{"ps", "0", "1"}},
		{"final newline after index", "/a/service/m/ps:0\n", &groups{"ps", "0", ""}},
		{"two final newlines", "/a/service/m/ps:0/1\n\n", nil},
		{"newline inside", "/a/service/m/ps:0\n/1", nil},
		{"arabic-indic digits", "/a/service/m/ps:\u0661\u0662/\u0663", &groups{"ps", "\u0661\u0662", "\u0663"}},
		{"fullwidth replica digit", "/a/service/m/ps:0/\uff11", &groups{"ps", "0", "\uff11"}},
		{"letters outside ascii", "/a/service/m/\u00e9t\u00e9_2:0", &groups{"\u00e9t\u00e9_2", "0", ""}},
		{"letter number", "/a/service/m/\u2167:0", &groups{"\u2167", "0", ""}},
		{"combining mark is not a word char", "/a/service/m/ps\u0301:0", nil},
		{"superscript is not a decimal digit", "/a/service/m/ps:\u00b2", nil},
	}
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			z := ParseZKPath(tt.path)
			if tt.want == nil {
				if z.ServerType != nil || z.Index != nil || z.Replica != nil || z.Bzid != nil {
					t.Fatalf("ParseZKPath(%q) matched: %+v", tt.path, z)
				}
				return
			}
			got := groups{str(z.ServerType), str(z.Index), str(z.Replica)}
			if got != *tt.want {
				t.Fatalf("ParseZKPath(%q) = %+v, want %+v", tt.path, got, *tt.want)
			}
			if str(z.Bzid) != "a" || str(z.BaseName) != "m" {
				t.Fatalf("ParseZKPath(%q): bzid %q base_name %q", tt.path, str(z.Bzid), str(z.BaseName))
			}
		})
	}
}
