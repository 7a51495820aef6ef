// Package fuzzseed gives fuzz targets their seeds from the recorded parity cases: the Python
// reference's goldens (parity/goldens/python) and the Go goldens' inputs (parity/goldens/go). The
// goldens are read where the test runs, so new cases seed the fuzzers without copying them; under
// Bazel the test needs "//:go.mod" and the goldens' filegroup in its data.
package fuzzseed

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/parity/goldentest"
)

// Case is one recorded Python case.
type Case struct {
	File   string
	Case   string         `json:"case"`
	Call   string         `json:"call"`
	Input  map[string]any `json:"input"`
	Output any            `json:"output"`
}

// PythonCases reads every case under parity/goldens/python/<dir> for each dir (all of them when
// none is given), in path order. No case at all fails the test: the seeds would silently be gone.
func PythonCases(tb testing.TB, dirs ...string) []Case {
	tb.Helper()
	root := filepath.Join(goldentest.RepoRoot(tb), "parity", "goldens", "python")
	if len(dirs) == 0 {
		dirs = []string{"*"}
	}
	var out []Case
	for _, d := range dirs {
		files, err := filepath.Glob(filepath.Join(root, d, "*.json"))
		if err != nil {
			tb.Fatal(err)
		}
		sort.Strings(files)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				tb.Fatal(err)
			}
			var c Case
			if err := json.Unmarshal(b, &c); err != nil {
				tb.Fatalf("fuzzseed: %s: %v", f, err)
			}
			c.File = f
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		tb.Fatalf("fuzzseed: no golden case under %s %v (under Bazel, add //parity/goldens/python:files to the test's data)", root, dirs)
	}
	return out
}

// Calls keeps the cases whose call is one of calls.
func Calls(cases []Case, calls ...string) []Case {
	var out []Case
	for _, c := range cases {
		if slices.Contains(calls, c.Call) {
			out = append(out, c)
		}
	}
	return out
}

// GoInputs reads the *.input files under parity/goldens/go/<dir>, in path order; none fails the test.
func GoInputs(tb testing.TB, dir string) [][]byte {
	tb.Helper()
	root := filepath.Join(goldentest.RepoRoot(tb), "parity", "goldens", "go", dir)
	files, err := filepath.Glob(filepath.Join(root, "*.input"))
	if err != nil {
		tb.Fatal(err)
	}
	sort.Strings(files)
	if len(files) == 0 {
		tb.Fatalf("fuzzseed: no .input file under %s (under Bazel, add //parity/goldens/go:files to the test's data)", root)
	}
	var out [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// Strings returns every string in v (a decoded JSON value), map keys included, each once, in a
// deterministic order.
func Strings(v any) []string {
	seen := map[string]bool{}
	var out []string
	var walk func(v any)
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			add(x)
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				add(k)
				walk(x[k])
			}
		}
	}
	walk(v)
	return out
}

// AllStrings is Strings over the inputs and outputs of cases.
func AllStrings(cases []Case) []string {
	var vs []any
	for _, c := range cases {
		vs = append(vs, map[string]any(c.Input), c.Output)
	}
	return Strings(vs)
}

// Matching keeps the strings for which keep is true.
func Matching(ss []string, keep func(string) bool) []string {
	var out []string
	for _, s := range ss {
		if keep(s) {
			out = append(out, s)
		}
	}
	return out
}

// Lines splits every string into its lines and returns those with the given prefix (e.g. the
// "zk_servers " lines of the agent.conf texts), with the prefix removed, each once.
func Lines(ss []string, prefix string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range ss {
		for _, l := range strings.Split(s, "\n") {
			if v, ok := strings.CutPrefix(l, prefix); ok && !seen[v] {
				seen[v] = true
				out = append(out, v)
			}
		}
	}
	return out
}
