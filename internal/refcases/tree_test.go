package refcases

import "testing"

func TestDiffTrees(t *testing.T) {
	for _, tc := range []struct {
		name      string
		got, want map[string]string
		diff      string
	}{
		{"equal", map[string]string{"/a": "1", "/a/b": ""}, map[string]string{"/a": "1", "/a/b": ""}, ""},
		{"both empty", nil, map[string]string{}, ""},
		{"missing", map[string]string{"/a": "1"}, map[string]string{"/a": "1", "/a/b": "x"}, "missing /a/b = \"x\"\n"},
		{"extra", map[string]string{"/a": "1", "/z": ""}, map[string]string{"/a": "1"}, "extra /z = \"\"\n"},
		{"differs, in path order", map[string]string{"/b": "2", "/a": "0"}, map[string]string{"/a": "1", "/b": "3"},
			"/a: got \"0\", want \"1\"\n/b: got \"2\", want \"3\"\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := DiffTrees(tc.got, tc.want); got != tc.diff {
				t.Errorf("DiffTrees = %q, want %q", got, tc.diff)
			}
		})
	}
}
