package zkfake

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/monolith-go/monolith/pkg/zk"
)

func TestWatchFirstCall(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, c *Fake)
		want  []string
	}{
		{"absent", nil, []string{`d first data="" absent`, "c first nil"}},
		{"empty", func(t *testing.T, c *Fake) { mustCreate(t, c, "/w", "", zk.CreateOptions{}) },
			[]string{`d first data="" v0`, "c first []"}},
		{"with data and children", func(t *testing.T, c *Fake) {
			mustCreate(t, c, "/w/k2", "", zk.CreateOptions{MakePath: true})
			mustCreate(t, c, "/w/k1", "", zk.CreateOptions{})
			_, err := c.Set(bg, "/w", []byte("x"), zk.AnyVersion)
			must(t, err)
		}, []string{`d first data="x" v1`, "c first [k1 k2]"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t)
			if tc.setup != nil {
				tc.setup(t, c)
			}
			var r recorder
			_, err := c.DataWatch("/w", r.data("d"))
			must(t, err)
			_, err = c.ChildrenWatch("/w", r.children("c"))
			must(t, err)
			wantCalls(t, &r, tc.want...) // both made before the watch calls returned
		})
	}
}

func TestWatchAbsentData(t *testing.T) {
	c := newClient(t)
	var gotData []byte
	var gotStat *zk.Stat
	_, err := c.DataWatch("/none", func(data []byte, st *zk.Stat, _ *zk.WatchEvent) bool {
		gotData, gotStat = data, st
		return true
	})
	must(t, err)
	if gotData != nil || gotStat != nil {
		t.Fatalf("absent node: data %#v stat %v, want nil and nil", gotData, gotStat)
	}
}

// TestWatchLifecycle follows one node through create, set, delete and create again: the watches
// re-arm after every call and survive the deletion.
func TestWatchLifecycle(t *testing.T) {
	c := newClient(t)
	var r recorder
	_, err := c.DataWatch("/a/n", r.data("n"))
	must(t, err)
	_, err = c.ChildrenWatch("/a/n", r.children("n/"))
	must(t, err)
	_, err = c.ChildrenWatch("/a", r.children("a/"))
	must(t, err)
	wantCalls(t, &r, `n first data="" absent`, "n/ first nil", "a/ first nil")

	mustCreate(t, c, "/a/n", "v0", zk.CreateOptions{MakePath: true})
	wantCalls(t, &r, "a/ CREATED []", `n CREATED data="v0" v0`, "n/ CREATED []", "a/ CHILD [n]")

	for i := 1; i <= 3; i++ {
		_, err := c.Set(bg, "/a/n", fmt.Appendf(nil, "v%d", i), zk.AnyVersion)
		must(t, err)
	}
	wantCalls(t, &r, `n CHANGED data="v1" v1`, `n CHANGED data="v2" v2`, `n CHANGED data="v3" v3`)

	mustCreate(t, c, "/a/n/k", "", zk.CreateOptions{})
	wantCalls(t, &r, "n/ CHILD [k]")

	// DELETED carries the last data (reference fake) and a nil stat.
	must(t, c.Delete(bg, "/a/n", zk.DeleteOptions{Recursive: true}))
	wantCalls(t, &r, `n DELETED data="v3" absent`, "n/ DELETED nil", "a/ CHILD []")

	mustCreate(t, c, "/a/n", "again", zk.CreateOptions{})
	wantCalls(t, &r, `n CREATED data="again" v0`, "n/ CREATED []", "a/ CHILD [n]")
}

// TestRecursiveDeleteOrder: deepest first, each node's data watch then its children watch, the
// surviving parent's children watch once at the end.
func TestRecursiveDeleteOrder(t *testing.T) {
	c := newClient(t)
	for _, p := range []string{"/r/x/y/z", "/r/x/w"} {
		mustCreate(t, c, p, "", zk.CreateOptions{MakePath: true})
	}
	var r recorder
	for _, p := range []string{"/r", "/r/x", "/r/x/w", "/r/x/y", "/r/x/y/z"} {
		_, err := c.DataWatch(p, r.data("d"+p))
		must(t, err)
		_, err = c.ChildrenWatch(p, r.children("c"+p))
		must(t, err)
	}
	r.take()
	must(t, c.Delete(bg, "/r/x", zk.DeleteOptions{Recursive: true}))
	wantCalls(t, &r,
		`d/r/x/w DELETED data="" absent`, "c/r/x/w DELETED nil",
		`d/r/x/y/z DELETED data="" absent`, "c/r/x/y/z DELETED nil",
		`d/r/x/y DELETED data="" absent`, "c/r/x/y DELETED nil",
		`d/r/x DELETED data="" absent`, "c/r/x DELETED nil",
		"c/r CHILD []")
	if st, _ := c.Exists(bg, "/r"); st.CVersion != 2 || st.NumChildren != 0 {
		t.Fatalf("parent stat after recursive delete: %+v", st)
	}
}

func TestWatchStop(t *testing.T) {
	tests := []struct {
		name      string
		watch     func(c *Fake, calls *int) zk.Watch
		wantCalls int
	}{
		{"return false on the first call", func(c *Fake, calls *int) zk.Watch {
			w, _ := c.DataWatch("/s", func([]byte, *zk.Stat, *zk.WatchEvent) bool { *calls++; return false })
			return w
		}, 1},
		{"return false on the third call", func(c *Fake, calls *int) zk.Watch {
			w, _ := c.DataWatch("/s", func([]byte, *zk.Stat, *zk.WatchEvent) bool { *calls++; return *calls < 3 })
			return w
		}, 3},
		{"children watch returns false", func(c *Fake, calls *int) zk.Watch {
			w, _ := c.ChildrenWatch("/", func([]string, *zk.WatchEvent) bool { *calls++; return *calls < 2 })
			return w
		}, 2},
		{"Stop from inside the function", func(c *Fake, calls *int) zk.Watch {
			var w zk.Watch
			w, _ = c.DataWatch("/s", func([]byte, *zk.Stat, *zk.WatchEvent) bool {
				*calls++
				if *calls == 2 {
					w.Stop()
					w.Stop() // idempotent
				}
				return true
			})
			return w
		}, 2},
		{"Stop after the first call", func(c *Fake, calls *int) zk.Watch {
			w, _ := c.DataWatch("/s", func([]byte, *zk.Stat, *zk.WatchEvent) bool { *calls++; return true })
			w.Stop()
			return w
		}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t)
			calls := 0
			w := tc.watch(c, &calls)
			mustCreate(t, c, "/s", "", zk.CreateOptions{})
			for range 3 {
				_, err := c.Set(bg, "/s", []byte("x"), zk.AnyVersion)
				must(t, err)
			}
			must(t, c.Delete(bg, "/s", zk.DeleteOptions{}))
			if calls != tc.wantCalls {
				t.Fatalf("calls = %d, want %d", calls, tc.wantCalls)
			}
			select {
			case <-w.Done():
			default:
				t.Fatal("Done not closed after the watch stopped")
			}
			c.server.mu.Lock()
			left := len(c.server.dataWatches) + len(c.server.childWatches)
			c.server.mu.Unlock()
			if left != 0 {
				t.Fatalf("%d watched paths still registered", left)
			}
		})
	}
}

// TestWatchReentrant: watch functions may call the client, as zk_mirror's children watch does
// when it adds a data watch per new child, and a change a function makes to its own node is
// delivered after it returns, in order.
func TestWatchReentrant(t *testing.T) {
	c := newClient(t)
	var r recorder
	seen := map[string]bool{}
	_, err := c.ChildrenWatch("/portal", func(children []string, ev *zk.WatchEvent) bool {
		for _, ch := range children {
			if !seen[ch] {
				seen[ch] = true
				_, err := c.DataWatch("/portal/"+ch, r.data(ch))
				must(t, err)
			}
		}
		return true
	})
	must(t, err)
	mustCreate(t, c, "/portal/m1", "one", zk.CreateOptions{MakePath: true})
	mustCreate(t, c, "/portal/m2", "two", zk.CreateOptions{})
	wantCalls(t, &r, `m1 first data="one" v0`, `m2 first data="two" v0`)

	// The function bumps its own node twice; the calls stay in order and never nest.
	depth := 0
	_, err = c.DataWatch("/counter", func(data []byte, st *zk.Stat, ev *zk.WatchEvent) bool {
		depth++
		defer func() { depth-- }()
		if depth > 1 {
			t.Error("watch function calls overlap")
		}
		r.add("%s %s", evString(ev), data)
		if st != nil && st.Version < 2 {
			_, err := c.Set(bg, "/counter", fmt.Appendf(nil, "%d", st.Version+1), zk.AnyVersion)
			must(t, err)
			r.add("set returned")
		}
		return true
	})
	must(t, err)
	mustCreate(t, c, "/counter", "0", zk.CreateOptions{})
	wantCalls(t, &r, "first ", "CREATED 0", "set returned", "CHANGED 1", "set returned", "CHANGED 2")
}

// TestWatchConcurrent: many goroutines change one node; each watch sees every version once, in
// order, with calls that never overlap (run with -race).
func TestWatchConcurrent(t *testing.T) {
	srv := NewServer()
	c := client(t, srv)
	mustCreate(t, c, "/hot", "", zk.CreateOptions{})
	var inFlight atomic.Int32
	var mu sync.Mutex
	var versions []int32
	_, err := c.DataWatch("/hot", func(_ []byte, st *zk.Stat, _ *zk.WatchEvent) bool {
		if inFlight.Add(1) != 1 {
			t.Error("overlapping calls")
		}
		defer inFlight.Add(-1)
		time.Sleep(10 * time.Microsecond)
		mu.Lock()
		versions = append(versions, st.Version)
		mu.Unlock()
		return true
	})
	must(t, err)
	const writers, sets = 8, 50
	var wg sync.WaitGroup
	for range writers {
		w := client(t, srv)
		wg.Go(func() {
			for range sets {
				if _, err := w.Set(bg, "/hot", []byte("x"), zk.AnyVersion); err != nil {
					t.Error(err)
				}
				_, _ = w.Children(bg, "/")
			}
		})
	}
	wg.Wait()
	eventually(t, "all versions", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(versions) == writers*sets+1
	})
	mu.Lock()
	defer mu.Unlock()
	for i, v := range versions {
		if v != int32(i) {
			t.Fatalf("call %d saw version %d: calls out of order", i, v)
		}
	}
}

func TestWatchesOfOtherClients(t *testing.T) {
	srv := NewServer()
	a, b := client(t, srv), client(t, srv)
	var r recorder
	_, err := a.ChildrenWatch("/shared", r.children("a"))
	must(t, err)
	_, err = b.ChildrenWatch("/shared", r.children("b"))
	must(t, err)
	r.take()
	mustCreate(t, b, "/shared/x", "", zk.CreateOptions{MakePath: true})
	// Registration order within one path.
	wantCalls(t, &r, "a CREATED []", "b CREATED []", "a CHILD [x]", "b CHILD [x]")
}
