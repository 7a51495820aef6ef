package cli

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

type flags struct {
	Count int `name:"count" help:"how many" default:"1"`
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		badExit  int
		code     int
		done     bool
		stderr   string
		wantHelp bool
	}{
		{"ok", []string{"--count=3"}, 2, 0, false, "", false},
		{"bad flag", []string{"--nope"}, 2, 2, true, "cmd: unknown flag --nope\n", false},
		{"bad flag, absl status", []string{"--nope"}, 1, 1, true, "cmd: unknown flag --nope\n", false},
		{"help", []string{"--help"}, 2, 0, true, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f flags
			var out, errb bytes.Buffer
			code, done := Parse("cmd", "a command", &f, tc.args, &out, &errb, tc.badExit)
			if code != tc.code || done != tc.done || errb.String() != tc.stderr {
				t.Fatalf("got %d %v %q, want %d %v %q", code, done, errb.String(), tc.code, tc.done, tc.stderr)
			}
			if tc.wantHelp != bytes.Contains(out.Bytes(), []byte("--count")) {
				t.Fatalf("help output %q", out.String())
			}
		})
	}
}

func TestExit(t *testing.T) {
	for _, tc := range []struct {
		err    error
		code   int
		stderr string
	}{
		{nil, 0, ""},
		{errors.New("boom"), 1, "cmd: boom\n"},
		{errors.New("cmd: already named"), 1, "cmd: already named\n"},
		{fmt.Errorf("read: %w", Usage(errors.New("bad file"))), 2, "cmd: read: bad file\n"},
	} {
		var errb bytes.Buffer
		if code := Exit("cmd", tc.err, &errb); code != tc.code || errb.String() != tc.stderr {
			t.Errorf("Exit(%v) = %d %q, want %d %q", tc.err, code, errb.String(), tc.code, tc.stderr)
		}
	}
}
