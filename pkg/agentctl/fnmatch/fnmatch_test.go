package fnmatch

import (
	"slices"
	"testing"
)

// names and the cases below: each pattern with what Python 3.11's fnmatch.filter(names, pattern)
// returned for it (recorded with the reference's Python).
var names = []string{"ps_0", "ps_1", "ps_10", "ps_a", "entry", "dense_0", "ps_", "ps-1", "ps/1", "PS_0", "a\nb", "[x]", "-", "!", "]", "a", "b", "z", "\\", "é", "ps_é", "^", "&", "x-y", ""}

var cases = []struct {
	pattern string
	want    []string
}{
	{"ps_*", []string{"ps_0", "ps_1", "ps_10", "ps_a", "ps_", "ps_é"}},
	{"ps_?", []string{"ps_0", "ps_1", "ps_a", "ps_é"}},
	{"*", []string{"ps_0", "ps_1", "ps_10", "ps_a", "entry", "dense_0", "ps_", "ps-1", "ps/1", "PS_0", "a\nb", "[x]", "-", "!", "]", "a", "b", "z", "\\", "é", "ps_é", "^", "&", "x-y", ""}},
	{"?", []string{"-", "!", "]", "a", "b", "z", "\\", "é", "^", "&"}},
	{"entry", []string{"entry"}},
	{"ps_[0-9]", []string{"ps_0", "ps_1"}},
	{"ps_[!0-9]", []string{"ps_a", "ps_é"}},
	{"ps_[!0]*", []string{"ps_1", "ps_10", "ps_a", "ps_é"}},
	{"[!a-z]*", []string{"PS_0", "[x]", "-", "!", "]", "\\", "é", "^", "&"}},
	{"[a-c]", []string{"a", "b"}},
	{"[z-a]", []string{}},
	{"[!z-a]", []string{"-", "!", "]", "a", "b", "z", "\\", "é", "^", "&"}},
	{"[b-ad-c]", []string{}},
	{"[-a]", []string{"-", "a"}},
	{"[a-]", []string{"-", "a"}},
	{"[!-a]", []string{"!", "]", "b", "z", "\\", "é", "^", "&"}},
	{"[]]", []string{"]"}},
	{"[!]]", []string{"-", "!", "a", "b", "z", "\\", "é", "^", "&"}},
	{"[!]", []string{}},
	{"[", []string{}},
	{"ps_[", []string{}},
	{"[a-z-9]", []string{"-", "a", "b", "z"}},
	{"[c-b-a]", []string{"-", "a"}},
	{"\\", []string{"\\"}},
	{"[\\]", []string{"\\"}},
	{"[\\-a]", []string{"]", "a", "\\", "^"}},
	{"*[0-9]", []string{"ps_0", "ps_1", "ps_10", "dense_0", "ps-1", "ps/1", "PS_0"}},
	{"**", []string{"ps_0", "ps_1", "ps_10", "ps_a", "entry", "dense_0", "ps_", "ps-1", "ps/1", "PS_0", "a\nb", "[x]", "-", "!", "]", "a", "b", "z", "\\", "é", "ps_é", "^", "&", "x-y", ""}},
	{"ps_**1", []string{"ps_1"}},
	{"[^a]", []string{"a", "^"}},
	{"[[]", []string{}},
	{"[&~|]", []string{"&"}},
	{"[a&&b]", []string{"a", "b", "&"}},
	{"ps_[1-1]*", []string{"ps_1", "ps_10"}},
	{"[é-ê]", []string{"é"}},
	{"*/*", []string{"ps/1"}},
	{"a?b", []string{"a\nb"}},
	{"[!!]", []string{"-", "]", "a", "b", "z", "\\", "é", "^", "&"}},
	{"[x-xz-z]", []string{"z"}},
	{"[--0]", []string{"-"}},
	{"[+--]", []string{"-"}},
	{"[ --]", []string{"-", "!", "&"}},
}

func TestFilterLikePython(t *testing.T) {
	for _, tc := range cases {
		got, err := Filter(names, tc.pattern)
		if err != nil {
			t.Errorf("Filter(%q): %v (regexp %s)", tc.pattern, err, Translate(tc.pattern))
			continue
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("Filter(%q) = %q, want %q (regexp %s)", tc.pattern, got, tc.want, Translate(tc.pattern))
		}
	}
}

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		name, pattern string
		want          bool
	}{
		{"ps_0", "ps_*", true},
		{"entry", "ps_*", false},
		{"ps/0", "ps*", true}, // unlike path.Match, "*" crosses "/"
		{`a\b`, `a\b`, true},  // no escapes: "\" is literal
	} {
		got, err := Match(tc.name, tc.pattern)
		if err != nil || got != tc.want {
			t.Errorf("Match(%q, %q) = %v, %v; want %v", tc.name, tc.pattern, got, err, tc.want)
		}
	}
}
