package main

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/monolith-go/monolith/parity/paritytest"
)

// replay runs every Python golden once for both tests (a run starts a real ZooKeeper per
// realzk case and takes most of a minute), with the first caller's t reporting a load failure.
func replay(t *testing.T) paritytest.Replay {
	t.Helper()
	replayMu.Lock()
	defer replayMu.Unlock()
	if replayed == nil {
		r := paritytest.Run(t, "")
		replayed = &r
	}
	return *replayed
}

var (
	replayMu sync.Mutex
	replayed *paritytest.Replay
)

// TestPythonGoldens: no case of any module may fail, a case may be skipped only when every spec
// symbol naming its call is still pending, and every landed symbol's call has an adapter.
func TestPythonGoldens(t *testing.T) {
	r := replay(t)
	for call, sym := range paritytest.Landed(r.Specs) {
		if _, ok := r.Registry.Lookup(call); !ok {
			t.Errorf("%s is not pending but no adapter handles its call %q", sym, call)
		}
	}
	paritytest.Check(t, r)
	if r.Summary.Passed == 0 {
		t.Fatal("no case passed: adapters are not wired")
	}
}

// TestReportUpToDate fails when parity/REPORT.md differs from what the current specs and results give.
func TestReportUpToDate(t *testing.T) {
	r := replay(t)
	got, err := os.ReadFile(filepath.Join(r.Root, "parity", "REPORT.md"))
	if err != nil {
		t.Fatalf("%v (generate it with: %s)", err, reportCommand)
	}
	if string(got) != renderReport(r.Specs, r.Summary) {
		t.Fatalf("parity/REPORT.md is stale; regenerate it with: %s", reportCommand)
	}
}
