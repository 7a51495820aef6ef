package agentbase

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/pkg/errkind"
)

func mapEnv(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// TestLocateBinary: the binary comes from the option, else $MONOLITH_TFS_BINARY, else the
// default, and a missing one is an error saying what was looked for, whatever the working
// directory.
func TestLocateBinary(t *testing.T) {
	t.Chdir(t.TempDir()) // the working directory plays no part
	dir := t.TempDir()
	tfs := filepath.Join(dir, "tensorflow_model_server")
	if err := os.WriteFile(tfs, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	tests := []struct {
		name    string
		l       TFSLocator
		env     map[string]string
		want    string // the path found
		wantErr string // or the whole error message
	}{
		{name: "option", l: TFSLocator{Binary: tfs, DefaultBinary: missing}, env: map[string]string{TFSBinaryEnv: plain}, want: tfs},
		{name: "environment", l: TFSLocator{DefaultBinary: missing}, env: map[string]string{TFSBinaryEnv: tfs}, want: tfs},
		{name: "default", l: TFSLocator{DefaultBinary: tfs}, env: map[string]string{TFSBinaryEnv: ""}, want: tfs},
		{name: "a bare name is looked up in PATH", l: TFSLocator{DefaultBinary: missing}, env: map[string]string{TFSBinaryEnv: "sh"}},
		{name: "nothing set, no default", l: TFSLocator{DefaultBinary: missing},
			wantErr: "TF Serving binary not found: $MONOLITH_TFS_BINARY is unset and " + missing + " does not exist"},
		{name: "environment names a missing file", l: TFSLocator{DefaultBinary: tfs}, env: map[string]string{TFSBinaryEnv: missing},
			wantErr: "TF Serving binary not found: $MONOLITH_TFS_BINARY=" + missing + " does not exist"},
		{name: "option names a missing file", l: TFSLocator{Binary: missing, BinaryFrom: "--tfs_binary", DefaultBinary: tfs},
			wantErr: "TF Serving binary not found: --tfs_binary " + missing + " does not exist"},
		{name: "not executable", l: TFSLocator{DefaultBinary: missing}, env: map[string]string{TFSBinaryEnv: plain},
			wantErr: "TF Serving binary not found: $MONOLITH_TFS_BINARY=" + plain + " is not executable"},
		{name: "a directory", l: TFSLocator{DefaultBinary: missing}, env: map[string]string{TFSBinaryEnv: dir},
			wantErr: "TF Serving binary not found: $MONOLITH_TFS_BINARY=" + dir + " is a directory"},
		{name: "a bare name not in PATH", l: TFSLocator{DefaultBinary: missing}, env: map[string]string{TFSBinaryEnv: "no_such_tfs_binary"},
			wantErr: "TF Serving binary not found: $MONOLITH_TFS_BINARY=no_such_tfs_binary is not in $PATH"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.l.LookupEnv = mapEnv(tc.env)
			got, err := tc.l.LocateBinary()
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr || errkind.Of(err) != errkind.NotFound {
					t.Fatalf("LocateBinary = %q, %v (kind %v); want error %q (NotFound)", got, err, errkind.Of(err), tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !filepath.IsAbs(got) || (tc.want != "" && got != tc.want) {
				t.Errorf("LocateBinary = %q, want %q (absolute)", got, tc.want)
			}
		})
	}
	// A missing file is fs.ErrNotExist to errors.Is.
	if _, err := (TFSLocator{DefaultBinary: missing, LookupEnv: mapEnv(nil)}).LocateBinary(); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing binary: %v, want os.ErrNotExist", err)
	}
}

// TestLocateDir: TF Serving's working directory comes from the option, else $MONOLITH_TFS_DIR,
// else the monolith base directory, else TFS_HOME when it exists, else the binary's directory; a
// directory given that does not exist is an error naming it.
func TestLocateDir(t *testing.T) {
	t.Chdir(t.TempDir())
	given, base, home, binDir := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	missing := filepath.Join(given, "missing")
	bin := filepath.Join(binDir, "tfs")
	file := filepath.Join(given, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	found := func() (string, error) { return base, nil }
	notFound := func() (string, error) { return "", errors.New("no base directory") }
	tests := []struct {
		name    string
		l       TFSLocator
		env     map[string]string
		want    string
		source  string
		wantErr string
	}{
		{"option", TFSLocator{Dir: given, FindMain: found}, map[string]string{TFSDirEnv: home}, given, "the TF Serving directory option", ""},
		{"environment", TFSLocator{FindMain: found}, map[string]string{TFSDirEnv: given}, given, "$MONOLITH_TFS_DIR", ""},
		{"base directory", TFSLocator{FindMain: found, Home: home}, nil, base, "the monolith base directory", ""},
		{"TFS_HOME", TFSLocator{FindMain: notFound, Home: home}, nil, home, "TFS_HOME", ""},
		{"the binary's directory", TFSLocator{FindMain: notFound, Home: missing}, nil, binDir, "the binary's directory", ""},
		{"option names a missing directory", TFSLocator{Dir: missing, FindMain: found}, nil, "", "",
			"TF Serving working directory " + missing + " (the TF Serving directory option)"},
		{"environment names a file", TFSLocator{FindMain: found}, map[string]string{TFSDirEnv: file}, "", "",
			"TF Serving working directory " + file + " ($MONOLITH_TFS_DIR): not a directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.l.LookupEnv = mapEnv(tc.env)
			dir, source, err := tc.l.LocateDir(bin)
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) || errkind.Of(err) != errkind.NotFound {
					t.Fatalf("LocateDir = %q, %v; want an error starting %q", dir, err, tc.wantErr)
				}
				return
			}
			if err != nil || dir != tc.want || source != tc.source {
				t.Errorf("LocateDir = %q, %q, %v; want %q, %q", dir, source, err, tc.want, tc.source)
			}
		})
	}
}
