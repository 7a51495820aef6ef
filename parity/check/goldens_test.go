package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/parity/adapters"
	"github.com/monolith-go/monolith/parity/harness"
	"github.com/monolith-go/monolith/tools/specgen/spec"
)

// TestPythonGoldens replays parity/goldens/python with the real adapters and specs: no case may fail,
// and a case may be skipped only when every spec symbol naming its call is still pending.
func TestPythonGoldens(t *testing.T) {
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
	policy, err := policyFromSpecs(specs)
	if err != nil {
		t.Fatal(err)
	}
	landed := map[string]string{} // call -> symbol whose status is not pending
	for _, s := range specs {
		for _, sym := range s.Parity {
			for _, c := range sym.Calls {
				if sym.Status != spec.StatusPending {
					landed[c] = s.Path + ": " + sym.Symbol
				}
			}
		}
	}
	cases, err := harness.LoadDir(filepath.Join(root, "parity", "goldens", "python"))
	if err != nil {
		t.Fatal(err)
	}
	reg := harness.NewRegistry()
	adapters.RegisterAll(reg)
	for call, sym := range landed {
		if _, ok := reg.Lookup(call); !ok {
			t.Errorf("%s is not pending but no adapter handles its call %q", sym, call)
		}
	}
	var out bytes.Buffer
	sum := harness.Run(cases, reg, policy, &out)
	for _, r := range sum.Results {
		switch {
		case r.Status == harness.StatusFail:
			t.Errorf("FAIL %s/%s: %s %s", r.Module, r.Case, r.Detail, strings.Join(r.Diffs, "; "))
		case r.Status == harness.StatusSkip && landed[r.Call] != "":
			t.Errorf("SKIP %s/%s: call %q belongs to %s, which is not pending", r.Module, r.Case, r.Call, landed[r.Call])
		}
	}
	t.Logf("%d passed, %d failed, %d skipped, %d declared", sum.Passed, sum.Failed, sum.Skipped, sum.Declared)
	if sum.Passed == 0 {
		t.Fatal("no case passed: adapters are not wired")
	}
}

// TestReportUpToDate fails when parity/REPORT.md differs from what the current specs and results give.
func TestReportUpToDate(t *testing.T) {
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
	policy, err := policyFromSpecs(specs)
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
	want := renderReport(specs, harness.Run(cases, reg, policy, &out))
	got, err := os.ReadFile(filepath.Join(root, "parity", "REPORT.md"))
	if err != nil {
		t.Fatalf("%v (generate it with: %s)", err, reportCommand)
	}
	if string(got) != want {
		t.Fatalf("parity/REPORT.md is stale; regenerate it with: %s", reportCommand)
	}
}
