package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.conf")
	os.WriteFile(good, []byte("bzid b\nbase_name m\ndeploy_type entry\nagent_version 2\n"), 0o644)
	bad := filepath.Join(dir, "bad.conf")
	os.WriteFile(bad, []byte("bzid b\ndeploy_type entry\nnum_ps many\n"), 0o644)
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  []string
		wantErr  string
	}{
		{"help", []string{"--help"}, 0, []string{"--conf=PATH", "--tfs_log=PATH", "/var/log/tfs.std.log"}, ""},
		{"example", nil, 0, []string{"built-in example", "deploy_type = 'mixed'", "entry (gRPC port", "ps (gRPC port", "--log_conf=../conf/log4j_ps.properties"}, ""},
		{"conf", []string{"--conf", good}, 0, []string{"deploy_type = 'entry'", "entry (gRPC port", "--model_config_file_poll_wait_seconds=0"}, ""},
		{"bad value", []string{"--conf", bad}, 2, nil, `bad.conf:3: num_ps "many": not a number`},
		{"missing conf", []string{"--conf", filepath.Join(dir, "nope.conf")}, 2, nil, "no such file"},
		{"unknown flag", []string{"--bogus"}, 2, nil, "unknown flag --bogus"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(tc.args, &out, &errb)
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.wantCode, out.String(), errb.String())
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(out.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, out.String())
				}
			}
			if tc.wantErr != "" {
				if !strings.Contains(errb.String(), tc.wantErr) {
					t.Errorf("stderr lacks %q:\n%s", tc.wantErr, errb.String())
				}
				if strings.Count(strings.TrimSpace(errb.String()), "\n") > 0 && tc.name != "unknown flag" {
					t.Errorf("want one line on stderr, got:\n%s", errb.String())
				}
			}
		})
	}
}
