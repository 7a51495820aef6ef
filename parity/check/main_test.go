package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/parity/harness"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// registerTest is a stand-in for adapters.RegisterAll.
func registerTest(r *harness.Registry) {
	r.Register("echo", func(_ *harness.Ctx, in harness.Input) (any, error) { return in.Raw("value") })
	r.Register("strict", func(_ *harness.Ctx, _ harness.Input) (any, error) {
		return nil, errkind.New(errkind.Value, "rejected")
	})
}

// writeCase writes one golden case under dir/fake/.
func writeCase(t *testing.T, dir, name, call string, value, output any) {
	t.Helper()
	b, err := json.Marshal(map[string]any{"module": "agent_service/fake", "case": name, "call": call,
		"input": map[string]any{"env": map[string]string{}, "value": value}, "output": output, "error": nil})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "fake"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "fake", name+".json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

const testSpec = `module: monolith/agent_service/fake.py
go_package: pkg/fake
parity:
  - symbol: strict
    status: different
    why: Go validates
    calls: [strict]
    declared:
      - case: strict_rejects
        why: the Go port rejects the input
        expect_error: Value
`

// fixture is a goldens directory with one case of each verdict and a specs directory declaring one.
func fixture(t *testing.T) (goldens, specs string) {
	t.Helper()
	goldens, specs = t.TempDir(), t.TempDir()
	writeCase(t, goldens, "echo_ok", "echo", 1, 1)
	writeCase(t, goldens, "echo_wrong", "echo", 1, 2)
	writeCase(t, goldens, "later", "not_ported()", nil, nil)
	writeCase(t, goldens, "strict_rejects", "strict", nil, 1)
	if err := os.WriteFile(filepath.Join(specs, "fake.yaml"), []byte(testSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	return goldens, specs
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

func TestRun(t *testing.T) {
	goldens, specs := fixture(t)
	malformed := t.TempDir()
	if err := os.WriteFile(filepath.Join(malformed, "bad.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	writeCase(t, other, "other_ok", "echo", "x", "x")
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantLast   string // last line of stdout
		wantStderr string // substring of stderr
	}{
		{"a failing case", []string{"--goldens=" + goldens, "--specs=" + specs}, 1,
			"1 passed, 1 failed, 1 skipped, 1 declared", ""},
		{"filtered to passing cases", []string{"--goldens", goldens, "--specs", specs, "--run", "ok$|strict"}, 0,
			"1 passed, 0 failed, 0 skipped, 1 declared", ""},
		{"comma-separated and repeated goldens", []string{"--goldens=" + goldens + "," + other, "--goldens=" + other,
			"--specs=" + specs, "--run=other"}, 0, "2 passed, 0 failed, 0 skipped, 0 declared", ""},
		{"verbose", []string{"-v", "--goldens=" + goldens, "--specs=" + specs}, 1,
			"1 passed, 1 failed, 1 skipped, 1 declared", ""},
		{"no specs yet", []string{"--goldens=" + goldens, "--specs=" + t.TempDir(), "--run=echo_ok"}, 0,
			"1 passed, 0 failed, 0 skipped, 0 declared", "no specs (*.yaml)"},
		{"missing --goldens", []string{"--specs=" + specs}, 2, "", "check: --goldens=DIR is required"},
		{"missing goldens dir", []string{"--goldens=" + filepath.Join(goldens, "nope"), "--specs=" + specs}, 2, "",
			"no such directory"},
		{"missing specs dir", []string{"--goldens=" + goldens, "--specs=" + filepath.Join(specs, "nope")}, 2, "",
			"--specs: "},
		{"bad flag", []string{"--goldens=" + goldens, "--frobnicate"}, 2, "", "flag provided but not defined: -frobnicate"},
		{"bad regexp", []string{"--goldens=" + goldens, "--specs=" + specs, "--run=("}, 2, "", "--run: "},
		{"stray argument", []string{"--goldens=" + goldens, "extra"}, 2, "", `unexpected argument "extra"`},
		{"malformed golden", []string{"--goldens=" + malformed, "--specs=" + specs}, 1, "",
			filepath.Join(malformed, "bad.json")},
		{"help", []string{"-h"}, 0, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runWith(tc.args, &stdout, &stderr, registerTest)
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.wantCode, stdout.String(), stderr.String())
			}
			if tc.wantLast != "" && lastLine(stdout.String()) != tc.wantLast {
				t.Fatalf("last line %q, want %q\nstdout:\n%s", lastLine(stdout.String()), tc.wantLast, stdout.String())
			}
			if !strings.Contains(stderr.String(), tc.wantStderr) {
				t.Fatalf("stderr %q does not contain %q", stderr.String(), tc.wantStderr)
			}
			if tc.wantCode == 2 && strings.Count(stderr.String(), "\n") != 1 {
				t.Fatalf("a usage error must be one line on stderr, got %q", stderr.String())
			}
		})
	}
}

func TestRunOutputLines(t *testing.T) {
	goldens, specs := fixture(t)
	var stdout, stderr bytes.Buffer
	runWith([]string{"--goldens=" + goldens, "--specs=" + specs}, &stdout, &stderr, registerTest)
	want := `PASS agent_service/fake/echo_ok
FAIL agent_service/fake/echo_wrong: $: expected 2, got 1
SKIP agent_service/fake/later: call not ported: not_ported()
DECLARED agent_service/fake/strict_rejects: the Go port rejects the input
skipped calls:
     1  not_ported()
1 passed, 1 failed, 1 skipped, 1 declared
`
	if stdout.String() != want {
		t.Fatalf("stdout:\n%s\nwant:\n%s", stdout.String(), want)
	}
}

// TestRunRealAdapters drives run itself (adapters.RegisterAll) on cases of a call no adapter ports.
func TestRunRealAdapters(t *testing.T) {
	goldens, specs := t.TempDir(), t.TempDir()
	writeCase(t, goldens, "never", "harness self-test: no such call", nil, nil)
	if err := os.WriteFile(filepath.Join(specs, "fake.yaml"), []byte(testSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"--goldens=" + goldens, "--specs=" + specs}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	if got := lastLine(stdout.String()); got != "0 passed, 0 failed, 1 skipped, 0 declared" {
		t.Fatalf("last line %q", got)
	}
	if !strings.Contains(stderr.String(), "declared case strict_rejects (declared by strict) matches no golden case") {
		t.Fatalf("stderr %q lacks the unknown-declaration warning", stderr.String())
	}
}

// TestWorkspaceDirectory checks `bazel run` resolution: relative --goldens and the default specs
// come from $BUILD_WORKSPACE_DIRECTORY, not the working directory.
func TestWorkspaceDirectory(t *testing.T) {
	ws := t.TempDir()
	writeCase(t, filepath.Join(ws, "goldens"), "strict_rejects", "strict", nil, 1)
	if err := os.WriteFile(filepath.Join(ws, "go.mod"), []byte("module x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ws, "specs", "agent_service"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "specs", "agent_service", "fake.yaml"), []byte(testSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BUILD_WORKSPACE_DIRECTORY", ws)
	var stdout, stderr bytes.Buffer
	if code := runWith([]string{"--goldens=goldens"}, &stdout, &stderr, registerTest); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	if got := lastLine(stdout.String()); got != "0 passed, 0 failed, 0 skipped, 1 declared" {
		t.Fatalf("last line %q (the declaration in the workspace's specs must apply)", got)
	}
}
