// Package paritytest replays every Python golden (or one module's) with the real adapters and the whole policy:
// the generated test of every spec with Python cases (gen/spec/<module>/parity_test.go) runs its
// module's cases this way, so a parity break fails that module's own test target; parity/check's
// test runs them all.
package paritytest

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/parity/adapters"
	"github.com/monolith-go/monolith/parity/goldentest"
	"github.com/monolith-go/monolith/parity/harness"
	"github.com/monolith-go/monolith/parity/policy"
	"github.com/monolith-go/monolith/tools/specgen/spec"
)

// GoldensDir is where the Python goldens live, relative to the repository root.
const GoldensDir = "parity/goldens/python"

// Replay is one replay of the Python goldens with the real adapters and the repository's specs.
type Replay struct {
	Root     string
	Specs    []*spec.Spec
	Registry *harness.Registry
	Summary  harness.Summary
	// Output is what the checker printed (one line per case).
	Output string
}

// Run replays the cases of module (a case's `module`, e.g. agent_service/data_def; "" for every
// case) and fails t when the goldens, the specs or the policy cannot be loaded.
func Run(t testing.TB, module string) Replay {
	t.Helper()
	root := goldentest.RepoRoot(t)
	specs, err := spec.LoadDir(filepath.Join(root, "specs"))
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.FromSpecs(specs)
	if err != nil {
		t.Fatal(err)
	}
	all, err := harness.LoadDir(filepath.Join(root, filepath.FromSlash(GoldensDir)))
	if err != nil {
		t.Fatal(err)
	}
	var cases []harness.Case
	for _, c := range all {
		if module == "" || c.Module == module {
			cases = append(cases, c)
		}
	}
	reg := harness.NewRegistry()
	adapters.RegisterAll(reg)
	var out bytes.Buffer
	sum := harness.Run(cases, reg, pol, &out)
	return Replay{Root: root, Specs: specs, Registry: reg, Summary: sum, Output: out.String()}
}

// Check fails t for every failing case, and for every skipped case whose call belongs to a spec
// symbol that is not pending (only pending symbols may have unrun cases).
func Check(t testing.TB, r Replay) {
	t.Helper()
	landed := Landed(r.Specs)
	for _, res := range r.Summary.Results {
		switch {
		case res.Status == harness.StatusFail:
			t.Errorf("FAIL %s/%s: %s %s", res.Module, res.Case, res.Detail, strings.Join(res.Diffs, "; "))
		case res.Status == harness.StatusSkip && landed[res.Call] != "":
			t.Errorf("SKIP %s/%s: call %q belongs to %s, which is not pending", res.Module, res.Case, res.Call, landed[res.Call])
		}
	}
	t.Logf("%d passed, %d failed, %d skipped, %d declared", r.Summary.Passed, r.Summary.Failed, r.Summary.Skipped, r.Summary.Declared)
}

// Landed maps every call of a spec symbol that is not pending to "<spec path>: <symbol>".
func Landed(specs []*spec.Spec) map[string]string {
	landed := map[string]string{}
	for _, s := range specs {
		for _, sym := range s.Parity {
			for _, c := range sym.Calls {
				if sym.Status != spec.StatusPending {
					landed[c] = s.Path + ": " + sym.Symbol
				}
			}
		}
	}
	return landed
}

// Module is the generated parity test of one module: every Python case of module passes or is a
// declared difference, and there is at least one case.
func Module(t *testing.T, module string) {
	t.Helper()
	r := Run(t, module)
	if len(r.Summary.Results) == 0 {
		t.Fatalf("no Python golden case has module %q under %s", module, GoldensDir)
	}
	Check(t, r)
}
