package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestCommandLine(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		out  string // in stdout or stderr
	}{
		{"help", []string{"--help"}, 0, "--drift_after"},
		{"version", []string{"--version"}, 0, "online "},
		{"unknown flag", []string{"--rates=3"}, 2, "--rates"},
		{"no rate", []string{"--rate=0"}, 2, "rate 0 events/s: want more than 0"},
		{"drift after the end", []string{"--duration=10s", "--drift_after=20s"}, 2, "drift after 20s"},
		{"warmup past the end", []string{"--duration=5s", "--warmup=6s"}, 2, "want 0 < warmup < duration"},
		{"tiny window", []string{"--window=3"}, 2, "window 3 (at least 10)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tc.args, &stdout, &stderr)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stdout:\n%s\nstderr:\n%s", code, tc.code, stdout.String(), stderr.String())
			}
			if !strings.Contains(stdout.String()+stderr.String(), tc.out) {
				t.Errorf("output lacks %q; stdout:\n%s\nstderr:\n%s", tc.out, stdout.String(), stderr.String())
			}
		})
	}
}
