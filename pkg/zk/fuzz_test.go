package zk

import (
	"errors"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/internal/fuzzseed"
	"github.com/monolith-go/monolith/pkg/agentconf"
)

// FuzzPath: a valid ZooKeeper path is clean (Join leaves it as it is) and is its parent joined with
// its base; the parent of a valid path is valid; an invalid one is a *PathError wrapping
// ErrInvalidPath; a sequence prefix ending in "/" is valid when it is with a counter appended; a
// node name agent.conf accepts (agentconf.ValidateZKNodeName) makes a valid path. Run with
//
//	go test ./pkg/zk -run='^$' -fuzz='^FuzzPath$' -fuzztime=60s
func FuzzPath(f *testing.F) {
	cases := fuzzseed.PythonCases(f, "zk_mirror", "replica_manager", "backends", "agent_service", "service_discovery")
	for _, s := range fuzzseed.Matching(fuzzseed.AllStrings(cases), func(s string) bool { return strings.HasPrefix(s, "/") && len(s) < 200 }) {
		f.Add(s)
	}
	for _, s := range []string{"/", "", "a", "/a/", "//", "/a//b", "/a/./b", "/a/..", "/a\x00", "/\u00e9/\U0001F600", "/a/b/c-", "/.", "/..."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		err := ValidatePath(p)
		if err != nil {
			var pe *PathError
			if !errors.As(err, &pe) || !errors.Is(err, ErrInvalidPath) || pe.Path != p {
				t.Fatalf("ValidatePath(%q): %v (%T)", p, err, err)
			}
		} else {
			if Join(p) != p {
				t.Fatalf("valid %q joins as %q", p, Join(p))
			}
			if p != "/" {
				parent, base := Parent(p), Base(p)
				if base == "" || strings.Contains(base, "/") || Join(parent, base) != p || ValidatePath(parent) != nil {
					t.Fatalf("valid %q: parent %q base %q", p, parent, base)
				}
			}
		}
		if strings.HasSuffix(p, "/") {
			if (ValidateCreatePath(p, true) == nil) != (ValidatePath(p+"0") == nil) {
				t.Fatalf("sequence prefix %q: %v, with a counter: %v", p, ValidateCreatePath(p, true), ValidatePath(p+"0"))
			}
		} else if (ValidateCreatePath(p, true) == nil) != (err == nil) {
			t.Fatalf("sequence path %q: %v, as a path: %v", p, ValidateCreatePath(p, true), err)
		}
		name := strings.TrimPrefix(p, "/")
		if agentconf.ValidateZKNodeName(name) == nil {
			if err := ValidatePath("/" + name); err != nil {
				t.Fatalf("node name %q accepted by agent.conf validation: %v", name, err)
			}
		}
	})
}
