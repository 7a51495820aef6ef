package main

import (
	"strings"
	"testing"
)

// --export_dir and its companions are checked before anything runs: a bad one is a usage error.
func TestExportFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"logreg", withArgs(small, "--export_dir=x"), "--model=logreg cannot be exported"},
		{"every 0", []string{"--export_dir=x", "--export_every=0"}, "--export_every 0"},
		{"negative keep", []string{"--export_dir=x", "--export_keep=-1"}, "--export_keep is negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := start(t, tc.args, nil)()
			if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", r.code, r.stderr, tc.want)
			}
		})
	}
}
