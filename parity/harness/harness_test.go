package harness

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

func testRegistry() *Registry {
	r := NewRegistry()
	registerTestAdapter(r)
	return r
}

// runCases writes cases to a fresh directory, loads them back and runs them.
func runCases(t *testing.T, p Policy, cases ...goldenCase) (Summary, string) {
	t.Helper()
	loaded, err := LoadDir(writeCases(t, "fake", cases...))
	if err != nil {
		t.Fatalf("LoadDir: %v", err)
	}
	var out bytes.Buffer
	s := Run(loaded, testRegistry(), p, &out)
	return s, out.String()
}

func pyErr(typ, msg string) *PyError { return &PyError{Type: typ, Message: msg} }

func raise(kind, msg string) map[string]any { return map[string]any{"kind": kind, "message": msg} }

func nestedErr(typ, msg string) map[string]any {
	return map[string]any{"error": map[string]any{"type": typ, "message": msg}}
}

func TestRunVerdicts(t *testing.T) {
	exact := Policy{ExactMessages: map[string]bool{"raise": true, "results": true}}
	declare := func(d Declaration) Policy { return Policy{Declared: map[string]Declaration{"c": d}} }
	tests := []struct {
		name       string
		c          goldenCase
		policy     Policy
		wantStatus Status
		wantDetail string // substring of the printed line
	}{
		{"echo passes", goldenCase{call: "echo", input: map[string]any{"value": map[string]any{"a": []int{1, 2}}},
			output: map[string]any{"a": []int{1, 2}}}, Policy{}, StatusPass, ""},
		{"wrong output", goldenCase{call: "echo", input: map[string]any{"value": map[string]any{"a": 1, "b": "x"}},
			output: map[string]any{"a": 2, "b": "x"}}, Policy{}, StatusFail, "$.a: expected 2, got 1"},
		{"missing and extra keys", goldenCase{call: "echo", input: map[string]any{"value": map[string]any{"b": 1}},
			output: map[string]any{"a": 1}}, Policy{}, StatusFail, "$.a: missing (expected 1); $.b: unexpected key (got 1)"},
		{"list length", goldenCase{call: "echo", input: map[string]any{"value": []int{1}},
			output: []int{1, 2}}, Policy{}, StatusFail, "$: expected 2 elements, got 1"},
		{"odd key path", goldenCase{call: "echo", input: map[string]any{"value": map[string]any{"a b": 1}},
			output: map[string]any{"a b": 2}}, Policy{}, StatusFail, `$["a b"]: expected 2, got 1`},
		{"error kind match", goldenCase{call: "raise", input: raise("Value", "go says"),
			pyErr: pyErr("ValueError", "py says")}, Policy{}, StatusPass, ""},
		{"error kind subclass", goldenCase{call: "raise", input: raise("Value", "x"),
			pyErr: pyErr("JSONDecodeError", "Expecting value")}, Policy{}, StatusPass, ""},
		{"recursion error is a runtime error", goldenCase{call: "raise", input: raise("Runtime", "x"),
			pyErr: pyErr("RecursionError", "maximum recursion depth exceeded")}, Policy{}, StatusPass, ""},
		{"error kind mismatch", goldenCase{call: "raise", input: raise("Type", "x"),
			pyErr: pyErr("ValueError", "x")}, Policy{}, StatusFail, "expected ValueError (kind Value), got error of kind Type"},
		{"unclassified go error", goldenCase{call: "raise", input: raise("Unknown", "x"),
			pyErr: pyErr("Exception", "x")}, Policy{}, StatusFail, "got error of kind Unknown"},
		{"unmapped python class", goldenCase{call: "raise", input: raise("Value", "x"),
			pyErr: pyErr("OSError", "x")}, Policy{}, StatusFail, "no errkind for Python exception OSError"},
		{"error expected, value got", goldenCase{call: "echo", input: map[string]any{"value": 1},
			pyErr: pyErr("RuntimeError", "no")}, Policy{}, StatusFail, `expected RuntimeError (kind Runtime): "no", got value 1`},
		{"value expected, error got", goldenCase{call: "raise", input: raise("Value", "bad"),
			output: 1}, Policy{}, StatusFail, "expected a value, got error of kind Value: bad"},
		{"exact message match", goldenCase{call: "raise", input: raise("Value", "same"),
			pyErr: pyErr("ValueError", "same")}, exact, StatusPass, ""},
		{"exact message mismatch", goldenCase{call: "raise", input: raise("Value", "go"),
			pyErr: pyErr("ValueError", "py")}, exact, StatusFail, `error message: expected "py", got "go"`},
		{"exact message, bare assert", goldenCase{call: "raise", input: raise("Precondition", "why"),
			pyErr: pyErr("AssertionError", "")}, exact, StatusPass, ""},
		{"kind-only messages ignored", goldenCase{call: "raise", input: raise("Value", "go"),
			pyErr: pyErr("ValueError", "py")}, Policy{}, StatusPass, ""},
		{"nested results match", goldenCase{call: "results", output: []any{
			map[string]any{"value": 1}, nestedErr("ValueError", "bad value"), nestedErr("AssertionError", ""),
			map[string]any{"value": "ok"}}}, exact, StatusPass, ""},
		{"nested error kind mismatch", goldenCase{call: "results", output: []any{
			map[string]any{"value": 1}, nestedErr("TypeError", "bad value"), nestedErr("AssertionError", ""),
			map[string]any{"value": "ok"}}}, Policy{}, StatusFail, "$[1]: expected error TypeError (kind Type), got error of kind Value: bad value"},
		{"nested error message mismatch", goldenCase{call: "results", output: []any{
			map[string]any{"value": 1}, nestedErr("ValueError", "other"), nestedErr("AssertionError", ""),
			map[string]any{"value": "ok"}}}, exact, StatusFail, `$[1]: error message: expected "other", got "bad value"`},
		{"nested error expected, value got", goldenCase{call: "results", output: []any{
			nestedErr("ValueError", ""), nestedErr("ValueError", "bad value"), nestedErr("AssertionError", ""),
			map[string]any{"value": "ok"}}}, Policy{}, StatusFail, `$[0]: expected error ValueError (kind Value), got {"value":1}`},
		{"port placeholders", goldenCase{call: "listen", input: map[string]any{"port": 8123},
			output: map[string]any{"port": "<port>", "addr": "10.0.0.1:<port>", "cmd": "srv --port=<port> --http=<port>"}},
			Policy{}, StatusPass, ""},
		{"port out of range", goldenCase{call: "listen", input: map[string]any{"port": 70000},
			output: map[string]any{"port": "<port>", "addr": "10.0.0.1:70000", "cmd": "srv --port=70000 --http=70001"}},
			Policy{}, StatusFail, `$.port: expected "<port>", got 70000`},
		{"port placeholder, wrong text", goldenCase{call: "listen", input: map[string]any{"port": 8123},
			output: map[string]any{"port": "<port>", "addr": "10.0.0.2:<port>", "cmd": "srv --port=<port> --http=<port>"}},
			Policy{}, StatusFail, `$.addr: expected "10.0.0.2:<port>", got "10.0.0.1:8123"`},
		{"tmp placeholder", goldenCase{call: "tmpfile", output: map[string]any{"path": "<tmp>/platform_config_file.cfg",
			"cmd": "tfs --platform_config_file=<tmp>/platform_config_file.cfg"}}, Policy{}, StatusPass, ""},
		{"tmp placeholder, other file", goldenCase{call: "tmpfile", output: map[string]any{"path": "<tmp>/other.cfg",
			"cmd": "tfs --platform_config_file=<tmp>/platform_config_file.cfg"}}, Policy{}, StatusFail, `$.path: expected "<tmp>/other.cfg"`},
		{"float literal", goldenCase{call: "float", input: map[string]any{"x": 0.25},
			output: map[string]any{"float": 0.25, "plain": 0.25}}, Policy{}, StatusPass, ""},
		{"int where python had a float", goldenCase{call: "float", input: map[string]any{"x": 2},
			output: map[string]any{"float": json2("2.0"), "plain": json2("2.0")}}, Policy{},
			StatusFail, "$.plain: expected float 2.0, got int 2 (use harness.Float for Python floats)"},
		{"float where python had an int", goldenCase{call: "float", input: map[string]any{"x": 2},
			output: map[string]any{"float": 2, "plain": 2}}, Policy{}, StatusFail, "$.float: expected int 2, got float 2.0"},
		{"unported call", goldenCase{call: "nobody.ported(this)"}, Policy{}, StatusSkip, "call not ported: nobody.ported(this)"},
		{"panicking adapter", goldenCase{call: "panic"}, Policy{}, StatusFail, "panic: assignment to entry in nil map"},
		{"adapter input error", goldenCase{call: "badinput", pyErr: pyErr("ValueError", "")}, Policy{},
			StatusFail, `adapter: input "nope": missing`},
		{"declared, no expectation", goldenCase{call: "echo", input: map[string]any{"value": 1}, output: 2},
			declare(Declaration{Symbol: "Echo", Why: "Go echoes faithfully"}), StatusDeclared, "DECLARED agent_service/fake/c: Go echoes faithfully"},
		{"declared, expectation met", goldenCase{call: "raise", input: raise("Value", "rejected"), output: 1},
			declare(Declaration{Symbol: "Raise", Why: "Go validates", ExpectError: "Value"}), StatusDeclared, "Go validates"},
		{"declared, expectation not met", goldenCase{call: "raise", input: raise("Type", "rejected"), output: 1},
			declare(Declaration{Symbol: "Raise", Why: "Go validates", ExpectError: "Value"}), StatusFail,
			"declaration not met: Raise declares an error of kind Value (Go validates), got error of kind Type: rejected"},
		{"declared, value instead of error", goldenCase{call: "echo", input: map[string]any{"value": 1}, output: 2},
			declare(Declaration{Symbol: "Echo", Why: "w", ExpectError: "Value"}), StatusFail, "got value 1"},
		{"declared but stale", goldenCase{call: "echo", input: map[string]any{"value": 1}, output: 1},
			declare(Declaration{Symbol: "Echo", Why: "w"}), StatusPass, "the declaration may be stale"},
		{"declared panic still fails", goldenCase{call: "panic", output: 1},
			declare(Declaration{Symbol: "P", Why: "w"}), StatusFail, "panic:"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.c.name = "c"
			s, out := runCases(t, tc.policy, tc.c)
			if len(s.Results) != 1 {
				t.Fatalf("got %d results, want 1:\n%s", len(s.Results), out)
			}
			res := s.Results[0]
			line := strings.SplitN(out, "\n", 2)[0]
			if res.Status != tc.wantStatus || !strings.HasPrefix(line, string(tc.wantStatus)+" agent_service/fake/c") {
				t.Fatalf("status %s, want %s; output:\n%s", res.Status, tc.wantStatus, out)
			}
			if !strings.Contains(line, tc.wantDetail) {
				t.Fatalf("line %q does not contain %q", line, tc.wantDetail)
			}
		})
	}
}

// json2 is a raw JSON literal inside a generated case (to write 2.0 rather than 2).
type json2 string

func (j json2) MarshalJSON() ([]byte, error) { return []byte(j), nil }

func TestRunReport(t *testing.T) {
	s, out := runCases(t, Policy{Declared: map[string]Declaration{"d": {Symbol: "Echo", Why: "on purpose"}}},
		goldenCase{name: "a_pass", call: "echo", input: map[string]any{"value": "x"}, output: "x"},
		goldenCase{name: "b_fail", call: "echo", input: map[string]any{"value": "x"}, output: "y"},
		goldenCase{name: "c_panic", call: "panic", output: nil},
		goldenCase{name: "d", call: "echo", input: map[string]any{"value": "x"}, output: "y"},
		goldenCase{name: "e_skip", call: "later()", output: nil},
		goldenCase{name: "f_skip", call: "later()", output: nil},
		goldenCase{name: "g_skip", call: "other()", output: nil},
		goldenCase{name: "h_pass_after_panic", call: "echo", input: map[string]any{"value": 1}, output: 1},
	)
	want := `PASS agent_service/fake/a_pass
FAIL agent_service/fake/b_fail: $: expected "y", got "x"
FAIL agent_service/fake/c_panic: panic: assignment to entry in nil map`
	if !strings.HasPrefix(out, want) {
		t.Fatalf("output does not start with\n%s\ngot:\n%s", want, out)
	}
	wantTail := `DECLARED agent_service/fake/d: on purpose
SKIP agent_service/fake/e_skip: call not ported: later()
SKIP agent_service/fake/f_skip: call not ported: later()
SKIP agent_service/fake/g_skip: call not ported: other()
PASS agent_service/fake/h_pass_after_panic
skipped calls:
     2  later()
     1  other()
2 passed, 2 failed, 3 skipped, 1 declared
`
	if !strings.HasSuffix(out, wantTail) {
		t.Fatalf("output does not end with\n%s\ngot:\n%s", wantTail, out)
	}
	wantCounts := Counts{Passed: 2, Failed: 2, Skipped: 3, Declared: 1}
	if s.Counts != wantCounts || s.Modules[testModule] != wantCounts {
		t.Fatalf("counts %+v, module counts %+v, want %+v", s.Counts, s.Modules[testModule], wantCounts)
	}
	if s.SkippedCalls["later()"] != 2 || s.SkippedCalls["other()"] != 1 {
		t.Fatalf("skipped calls %v", s.SkippedCalls)
	}
	if got := s.ModuleNames(); len(got) != 1 || got[0] != testModule {
		t.Fatalf("ModuleNames() = %v", got)
	}
}

func TestRunVerbose(t *testing.T) {
	dir := writeCases(t, "fake", goldenCase{name: "many", call: "echo",
		input:  map[string]any{"value": []int{1, 2, 3, 4, 5}},
		output: []int{0, 0, 0, 0, 0}})
	cases, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var quiet, verbose bytes.Buffer
	Run(cases, testRegistry(), Policy{}, &quiet)
	RunWithOptions(cases, testRegistry(), Policy{}, &verbose, Options{Verbose: true})
	if !strings.Contains(quiet.String(), "$[2]: expected 0, got 3; and 2 more (-v lists them)") {
		t.Fatalf("quiet output:\n%s", quiet.String())
	}
	for _, want := range []string{"    call: echo", "    $[4]: expected 0, got 5", "    file: " + filepath.Join(dir, "fake", "many.json")} {
		if !strings.Contains(verbose.String(), want) {
			t.Fatalf("verbose output lacks %q:\n%s", want, verbose.String())
		}
	}
}

func TestRunLongStringDiff(t *testing.T) {
	long := strings.Repeat("--flag=value ", 10)
	_, out := runCases(t, Policy{}, goldenCase{name: "c", call: "echo",
		input: map[string]any{"value": long + "--port=1"}, output: long + "--port=2"})
	if !strings.Contains(out, "strings differ at byte 137") {
		t.Fatalf("output:\n%s", out)
	}
}

func TestEnvSetUnsetRestore(t *testing.T) {
	t.Setenv("MY_HOST_IP", "192.0.2.7")
	t.Setenv("PORT", "9999")
	t.Setenv("SHARD_ID", "")
	os.Unsetenv("SHARD_ID") // t.Setenv above restores whatever was there before the test
	t.Setenv("PARITY_TEST_ADAPTER_LEAK", "")
	os.Unsetenv("PARITY_TEST_ADAPTER_LEAK")
	before := sortedEnviron()

	env := map[string]string{"SHARD_ID": "3", "MY_POD_NAME": "pod-1"}
	s, out := runCases(t, Policy{}, goldenCase{name: "c", call: "env", input: map[string]any{"env": env},
		output: map[string]any{"env": env, "ctx_env": env}})
	if s.Passed != 1 {
		t.Fatalf("the case must see exactly input.env among the managed variables:\n%s", out)
	}
	if got := os.Getenv("MY_HOST_IP"); got != "192.0.2.7" {
		t.Fatalf("MY_HOST_IP = %q after the case, want it restored", got)
	}
	for _, k := range []string{"SHARD_ID", "MY_POD_NAME", "PARITY_TEST_ADAPTER_LEAK"} {
		if v, ok := os.LookupEnv(k); ok {
			t.Fatalf("%s=%q survived the case", k, v)
		}
	}
	if after := sortedEnviron(); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatalf("environment not restored exactly:\nbefore %v\nafter  %v", before, after)
	}
}

// sortedEnviron is the environment as a set (Setenv may reorder it).
func sortedEnviron() []string {
	env := os.Environ()
	sort.Strings(env)
	return env
}

func TestTempDirPerCase(t *testing.T) {
	var dirs []string
	r := NewRegistry()
	r.Register("dir", func(c *Ctx, _ Input) (any, error) {
		if st, err := os.Stat(c.TempDir()); err != nil || !st.IsDir() {
			return nil, err
		}
		dirs = append(dirs, c.TempDir())
		return nil, nil
	})
	cases, err := LoadDir(writeCases(t, "x", goldenCase{name: "a", call: "dir"}, goldenCase{name: "b", call: "dir"}))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if s := Run(cases, r, Policy{}, &out); s.Passed != 2 {
		t.Fatalf("output:\n%s", out.String())
	}
	if len(dirs) != 2 || dirs[0] == dirs[1] {
		t.Fatalf("want two distinct temp dirs, got %v", dirs)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Fatalf("temp dir %s not removed (%v)", d, err)
		}
	}
}

func TestFloat(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0.0"}, {0.25, "0.25"}, {60000000, "60000000.0"}, {1e-05, "1e-05"}, {-1.5, "-1.5"},
		{0.0001, "0.0001"}, {1e16, "1e+16"}, {1234567890123456, "1234567890123456.0"},
		{123456789012345678, "1.2345678901234568e+17"}, {1.5e-7, "1.5e-07"}, {5.6, "5.6"}, {-1, "-1.0"},
		{3e20, "3e+20"}, {0.1, "0.1"},
	}
	for _, tc := range tests {
		got, err := Float(tc.in).MarshalJSON()
		if err != nil || string(got) != tc.want {
			t.Errorf("Float(%v) = %s, %v; want %s (Python repr)", tc.in, got, err, tc.want)
		}
	}
	if _, err := Float(posInf()).MarshalJSON(); err == nil {
		t.Error("Float(+Inf) must not marshal")
	}
}

func posInf() float64 {
	zero := 0.0
	return 1 / zero
}
