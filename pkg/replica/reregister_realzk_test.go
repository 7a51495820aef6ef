package replica

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	agentpb "github.com/monolith-go/monolith/gen/pb/monolith/serving/agent_service"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/zk/zktest"
)

// TestNoGapWhileReregistering (issue 21 item 3): a replica this process serves AVAILABLE must not
// leave the answers while its session is replaced. Before the fix the watcher dropped the node as
// soon as its watch was re-armed on the new session (the node was not back yet), the
// re-registration wrote it UNKNOWN, and only the next status update made it AVAILABLE again:
// GetReplicas answered without it for about 11 ms each time. The answers are polled all through
// each expiry, its new session and the re-registration.
func TestNoGapWhileReregistering(t *testing.T) {
	srv := zktest.Start(t, zktest.WithTickTime(200*time.Millisecond))
	leakcheck.Check(t)
	// Status updates every 20 ms, faster than the reference's 1 s, would hide nothing: the gap
	// was the re-registration's own.
	m, client, observer, conf := startAvailable(t, srv, "/nogap")
	ctx := tctx(t)
	here := ConfDC(conf)
	own := m.Updater().Paths()
	// This host's address in the answers, per server type (the gRPC port of its role).
	addrs := map[agentpb.ServerType]string{}
	for _, p := range own {
		meta, _ := m.Updater().Meta(p)
		st := psType
		if strings.Contains(p, "/entry:") {
			st = entryType
		}
		addrs[st] = *meta.Address
	}
	queries := []struct {
		st   agentpb.ServerType
		task int
	}{{entryType, 0}, {psType, 1}, {psType, 6}, {psType, 11}, {psType, 16}}
	if len(own) != len(queries) || len(addrs) != 2 {
		t.Fatalf("own nodes %v, addresses %v: want the entry and 4 PS tasks", own, addrs)
	}
	complete := func() []string { // the queries whose answer lacks this host
		var out []string
		for _, q := range queries {
			if !slices.Contains(m.GetReplicas(q.st, q.task, here), addrs[q.st]) {
				out = append(out, fmt.Sprintf("%s:%d", q.st, q.task))
			}
		}
		return out
	}
	eventually(t, 5*time.Second, "own replicas AVAILABLE and answered", func() bool {
		return allAre(ownStats(t, observer, own), "AVAILABLE") && len(complete()) == 0
	})

	for round := range 5 {
		// The poller asks every query in a loop until told to stop, and records each answer that
		// lacks this host and how long the longest such stretch lasted.
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var misses int
		var missed []string
		var longest time.Duration
		wg.Add(1)
		go func() {
			defer wg.Done()
			var since time.Time
			for {
				select {
				case <-stop:
					return
				default:
				}
				if lack := complete(); len(lack) > 0 {
					misses++
					missed = lack
					if since.IsZero() {
						since = time.Now()
					}
					longest = max(longest, time.Since(since))
				} else {
					since = time.Time{}
				}
			}
		}()
		oldID, passwd := client.SessionID()
		if err := srv.ExpireSession(oldID, passwd); err != nil {
			close(stop)
			wg.Wait()
			t.Fatal(err)
		}
		// Re-registered: every own node back on the new session, AVAILABLE, and answered.
		eventually(t, 4*realSessionTimeout, fmt.Sprintf("round %d: re-registered", round), func() bool {
			id, _ := client.SessionID()
			if id == oldID {
				return false
			}
			for _, p := range own {
				st, err := observer.Exists(ctx, p)
				if err != nil || st == nil || st.EphemeralOwner != id {
					return false
				}
			}
			return allAre(ownStats(t, observer, own), "AVAILABLE") && len(complete()) == 0 && watched(m.Watcher(), own)
		})
		time.Sleep(50 * time.Millisecond) // and a little after
		close(stop)
		wg.Wait()
		if misses > 0 {
			t.Errorf("round %d: %d answers lacked this host (%v), for up to %v", round, misses, missed, longest)
		}
	}
}

// watched reports whether every path has a data watch of w and is cached with a stat.
func watched(w *Watcher, paths []string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range paths {
		s := w.slots[p]
		if s == nil || s.w == nil {
			return false
		}
		task, key, _ := splitReplicaPath(p)
		if r, ok := w.cache.get(task, key); !ok || r.meta.Stat != datadef.StateAvailable {
			return false
		}
	}
	return true
}
