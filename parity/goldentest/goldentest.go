// Package goldentest is what the parity adapters' tests share: loading one Python module's golden
// cases with the policy its spec declares, and requiring that every case passes or is declared.
package goldentest

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/monolith-go/monolith/parity/harness"
	"github.com/monolith-go/monolith/parity/policy"
	"github.com/monolith-go/monolith/tools/specgen/spec"
)

// RepoRoot is the nearest directory above the working directory holding go.mod (under Bazel the
// test's data dependencies include //:go.mod, so the runfiles tree has one).
func RepoRoot(t testing.TB) string {
	t.Helper()
	d, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			t.Fatal("no go.mod above the test's directory (under Bazel, add //:go.mod to the test's data)")
		}
		d = parent
	}
}

// Load returns the golden cases of parity/goldens/python/<module> and the policy declared by the
// spec specs/<specPath> (e.g. "agent_service/zk_mirror.yaml"). It fails t when either is missing.
func Load(t testing.TB, module, specPath string) ([]harness.Case, harness.Policy) {
	t.Helper()
	root := RepoRoot(t)
	cases, err := harness.LoadDir(filepath.Join(root, "parity", "goldens", "python", module))
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatalf("no %s cases", module)
	}
	data, err := os.ReadFile(filepath.Join(root, "specs", filepath.FromSlash(specPath)))
	if err != nil {
		t.Fatalf("no spec %s: %v", specPath, err)
	}
	s, err := spec.Parse("specs/"+specPath, data) // named as spec.LoadDir names it
	if err != nil {
		t.Fatal(err)
	}
	s.Path = specPath
	p, err := policy.FromSpecs([]*spec.Spec{s})
	if err != nil {
		t.Fatal(err)
	}
	return cases, p
}

// RequireAll runs cases and fails t unless every case passes or is declared, no case is skipped
// or carries a note, and every declaration of the policy is used.
func RequireAll(t testing.TB, cases []harness.Case, r *harness.Registry, p harness.Policy) harness.Summary {
	t.Helper()
	var out bytes.Buffer
	s := harness.RunWithOptions(cases, r, p, &out, harness.Options{Verbose: true})
	t.Logf("\n%s", out.String())
	if s.Failed > 0 || s.Skipped > 0 {
		t.Fatalf("%d failed, %d skipped", s.Failed, s.Skipped)
	}
	for _, res := range s.Results {
		if res.Note != "" {
			t.Errorf("%s: %s", res.Case, res.Note)
		}
	}
	// Cases a rule declares are counted apart: a rule may cover any number of cases.
	byCase := 0
	for _, res := range s.Results {
		if res.Status == harness.StatusDeclared && res.Rule == "" {
			byCase++
		}
	}
	if byCase != len(p.Declared) {
		t.Errorf("%d cases declared by case, the spec declares %d", byCase, len(p.Declared))
	}
	return s
}
