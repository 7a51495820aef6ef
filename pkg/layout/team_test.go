//go:build linux && cgo

package layout

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// felWorkers lists the native kernel's worker threads (named "fel-worker") of this process: their
// thread ids and blocked-signal masks.
func felWorkers(t *testing.T) (tids []int, blocked []uint64) {
	t.Helper()
	dirs, err := filepath.Glob("/proc/self/task/*")
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range dirs {
		comm, err := os.ReadFile(filepath.Join(dir, "comm"))
		if err != nil || strings.TrimSpace(string(comm)) != "fel-worker" {
			continue // a thread that has exited since the glob, or not a worker
		}
		tid, err := strconv.Atoi(filepath.Base(dir))
		if err != nil {
			t.Fatalf("task %s: %v", dir, err)
		}
		status, err := os.ReadFile(filepath.Join(dir, "status"))
		if err != nil {
			t.Fatalf("task %d status: %v", tid, err)
		}
		var mask uint64
		found := false
		for line := range strings.Lines(string(status)) {
			if v, ok := strings.CutPrefix(line, "SigBlk:"); ok {
				mask, err = strconv.ParseUint(strings.TrimSpace(v), 16, 64)
				if err != nil {
					t.Fatalf("task %d SigBlk %q: %v", tid, v, err)
				}
				found = true
			}
		}
		if !found {
			t.Fatalf("task %d: no SigBlk in its status", tid)
		}
		tids = append(tids, tid)
		blocked = append(blocked, mask)
	}
	slices.Sort(tids)
	return tids, blocked
}

// TestWorkerTeam: the native kernel's worker threads outlive a call and serve the next ones (the
// same threads), and block the signals sent to the process (the Go runtime's threads take them).
func TestWorkerTeam(t *testing.T) {
	c := randomCase(rand.New(rand.NewPCG(31, 31)), randomSpec{version: 3, tables: 2, psNum: 2, features: 6, batch: 200, unique: true})
	p := compile(t, c, 3)
	if _, err := p.ForwardWith(Native, c.in, nil); err != nil {
		t.Fatal(err)
	}
	before, blocked := felWorkers(t)
	if len(before) < 2 {
		t.Fatalf("%d worker threads after a 3-thread call, want at least 2 kept", len(before))
	}
	// SIGINT, SIGTERM, SIGURG (Go's preemption) and SIGPROF, numbered from 1 in the mask.
	for _, sig := range []uint{2, 15, 23, 27} {
		for i, mask := range blocked {
			if mask&(1<<(sig-1)) == 0 {
				t.Errorf("worker %d does not block signal %d (SigBlk %016x)", before[i], sig, mask)
			}
		}
	}
	for range 3 {
		if _, err := p.ForwardWith(Native, c.in, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := p.BackwardWith(Native, c.in, ones(p, c.in.BatchSize), nil); err != nil {
			t.Fatal(err)
		}
	}
	if after, _ := felWorkers(t); !slices.Equal(after, before) {
		t.Fatalf("worker threads %v after more calls, want the same %v", after, before)
	}
}
