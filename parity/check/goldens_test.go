package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/parity/adapters"
	"github.com/monolith-go/monolith/parity/harness"
	"github.com/monolith-go/monolith/parity/policy"
	"github.com/monolith-go/monolith/tools/specgen/spec"
)

// pythonRun replays parity/goldens/python with the real adapters and the repository's specs.
type pythonRun struct {
	root  string
	specs []*spec.Spec
	reg   *harness.Registry
	sum   harness.Summary
}

func runPythonGoldens(t *testing.T) pythonRun {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := repoRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	specs, err := spec.LoadDir(filepath.Join(root, "specs"))
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.FromSpecs(specs)
	if err != nil {
		t.Fatal(err)
	}
	cases, err := harness.LoadDir(filepath.Join(root, "parity", "goldens", "python"))
	if err != nil {
		t.Fatal(err)
	}
	reg := harness.NewRegistry()
	adapters.RegisterAll(reg)
	var out bytes.Buffer
	return pythonRun{root: root, specs: specs, reg: reg, sum: harness.Run(cases, reg, pol, &out)}
}

// TestPythonGoldens: no case may fail, and a case may be skipped only when every spec symbol naming
// its call is still pending.
func TestPythonGoldens(t *testing.T) {
	r := runPythonGoldens(t)
	landed := map[string]string{} // call -> symbol whose status is not pending
	for _, s := range r.specs {
		for _, sym := range s.Parity {
			for _, c := range sym.Calls {
				if sym.Status != spec.StatusPending {
					landed[c] = s.Path + ": " + sym.Symbol
				}
			}
		}
	}
	for call, sym := range landed {
		if _, ok := r.reg.Lookup(call); !ok {
			t.Errorf("%s is not pending but no adapter handles its call %q", sym, call)
		}
	}
	for _, res := range r.sum.Results {
		switch {
		case res.Status == harness.StatusFail:
			t.Errorf("FAIL %s/%s: %s %s", res.Module, res.Case, res.Detail, strings.Join(res.Diffs, "; "))
		case res.Status == harness.StatusSkip && landed[res.Call] != "":
			t.Errorf("SKIP %s/%s: call %q belongs to %s, which is not pending", res.Module, res.Case, res.Call, landed[res.Call])
		}
	}
	t.Logf("%d passed, %d failed, %d skipped, %d declared", r.sum.Passed, r.sum.Failed, r.sum.Skipped, r.sum.Declared)
	if r.sum.Passed == 0 {
		t.Fatal("no case passed: adapters are not wired")
	}
}

// TestReportUpToDate fails when parity/REPORT.md differs from what the current specs and results give.
func TestReportUpToDate(t *testing.T) {
	r := runPythonGoldens(t)
	got, err := os.ReadFile(filepath.Join(r.root, "parity", "REPORT.md"))
	if err != nil {
		t.Fatalf("%v (generate it with: %s)", err, reportCommand)
	}
	if string(got) != renderReport(r.specs, r.sum) {
		t.Fatalf("parity/REPORT.md is stale; regenerate it with: %s", reportCommand)
	}
}
