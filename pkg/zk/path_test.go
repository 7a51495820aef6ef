package zk

import (
	"errors"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/pkg/errkind"
)

func TestValidatePath(t *testing.T) {
	tests := []struct {
		path   string
		seq    bool
		reason string // "" when valid
	}{
		{"/", false, ""},
		{"/a", false, ""},
		{"/a/b:c/d_0", false, ""},
		{"/a/.b/..c", false, ""},
		{"", false, "empty path"},
		{"a/b", false, "must start with /"},
		{"/a/", false, "must not end with /"},
		{"/a//b", false, "empty segment"},
		{"//", false, "must not end with /"},
		{"/a/./b", false, "relative segment ."},
		{"/a/..", false, "relative segment .."},
		{"/a\x00b", false, "NUL"},
		// A sequence prefix may end with "/": the server appends the counter.
		{"/a/", true, ""},
		{"/", true, ""},
		{"/a//", true, "empty segment"},
		{"/a/0", true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			err := ValidateCreatePath(tc.path, tc.seq)
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("ValidateCreatePath(%q, %v) = %v, want nil", tc.path, tc.seq, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ValidateCreatePath(%q, %v) = nil, want error %q", tc.path, tc.seq, tc.reason)
			}
			if !errors.Is(err, ErrInvalidPath) || errkind.Of(err) != errkind.Value {
				t.Fatalf("error %v: want ErrInvalidPath of kind Value, got kind %v", err, errkind.Of(err))
			}
			if !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("error %q does not say %q", err, tc.reason)
			}
			var pe *PathError
			if !errors.As(err, &pe) || pe.Path != tc.path {
				t.Fatalf("error %v: want a *PathError for %q", err, tc.path)
			}
		})
	}
}

func TestJoinParentBase(t *testing.T) {
	joins := []struct {
		elems []string
		want  string
	}{
		{nil, "/"},
		{[]string{"/"}, "/"},
		{[]string{"/", "a"}, "/a"},
		{[]string{"/a", "b", "c"}, "/a/b/c"},
		{[]string{"/a/", "b/"}, "/a/b"},
		{[]string{"a", "b"}, "/a/b"},
	}
	for _, tc := range joins {
		if got := Join(tc.elems...); got != tc.want {
			t.Errorf("Join(%q) = %q, want %q", tc.elems, got, tc.want)
		}
	}
	parents := []struct{ path, parent, base string }{
		{"/", "/", ""},
		{"/a", "/", "a"},
		{"/a/b", "/a", "b"},
		{"/bzid/service/m/ps:0/00000000001", "/bzid/service/m/ps:0", "00000000001"},
	}
	for _, tc := range parents {
		if got := Parent(tc.path); got != tc.parent {
			t.Errorf("Parent(%q) = %q, want %q", tc.path, got, tc.parent)
		}
		if got := Base(tc.path); got != tc.base {
			t.Errorf("Base(%q) = %q, want %q", tc.path, got, tc.base)
		}
	}
}
