package zkreal

import (
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zktest"
)

// parallelDo runs fn(0..n-1) on a few goroutines and returns the first error.
func parallelDo(n int, fn func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := fn(i); err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// values keeps, per watch, the last value delivered and the events seen.
type values struct {
	mu     sync.Mutex
	last   []string
	events [][]zk.EventType
	first  []bool
}

func newValues(n int) *values {
	return &values{last: make([]string, n), events: make([][]zk.EventType, n), first: make([]bool, n)}
}

func (v *values) set(i int, val string, ev *zk.WatchEvent) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.last[i] = val
	if ev == nil {
		v.first[i] = true
	} else {
		v.events[i] = append(v.events[i], ev.Type)
	}
}

// missing lists the watches whose last value is not want(i).
func (v *values) missing(want func(i int) string) []int {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []int
	for i, got := range v.last {
		if got != want(i) {
			out = append(out, i)
		}
	}
	return out
}

func waitAll(t *testing.T, within time.Duration, what string, v *values, want func(i int) string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		miss := v.missing(want)
		if len(miss) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d watches not updated within %v (first: #%d)", what, len(miss), within, miss[0])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// goroutinesAtMost waits until at most n goroutines run and returns the count.
func goroutinesAtMost(n int, within time.Duration) int {
	deadline := time.Now().Add(within)
	for {
		g := runtime.NumGoroutine()
		if g <= n || time.Now().After(deadline) {
			return g
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestManyWatches: 2,000 data watches and 2,000 children watches cost no goroutine while idle;
// a change to every node reaches every watch; after a session expiry every watch delivers the
// current state (EventNone) and keeps watching; Stop and Close end them.
func TestManyWatches(t *testing.T) {
	const n = 2000
	srv := zktest.Start(t, zktest.WithTickTime(200*time.Millisecond))
	c := connect(t, srv, Options{Logger: quiet})
	writer := connect(t, srv, Options{Logger: quiet})
	ctx := tctx(t)
	node := func(i int) string { return fmt.Sprintf("/many/n%04d", i) }
	if err := parallelDo(n, func(i int) error {
		_, err := writer.Create(ctx, node(i), []byte("v0"), zk.CreateOptions{MakePath: true})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // let the creating goroutines exit
	base := runtime.NumGoroutine()

	data, kids := newValues(n), newValues(n)
	watches := make([]zk.Watch, 2*n)
	if err := parallelDo(n, func(i int) error {
		dw, err := c.DataWatch(node(i), func(d []byte, st *zk.Stat, ev *zk.WatchEvent) bool {
			data.set(i, string(d), ev)
			return true
		})
		if err != nil {
			return err
		}
		cw, err := c.ChildrenWatch(node(i), func(ch []string, ev *zk.WatchEvent) bool {
			kids.set(i, fmt.Sprint(ch), ev)
			return true
		})
		watches[2*i], watches[2*i+1] = dw, cw
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if !data.first[i] || data.last[i] != "v0" || !kids.first[i] || kids.last[i] != "[]" {
			t.Fatalf("watch %d: first calls %v %q / %v %q", i, data.first[i], data.last[i], kids.first[i], kids.last[i])
		}
	}
	// Idle watches run nothing: the count is back to the baseline (a few goroutines of slack
	// for the library's and the runtime's own).
	if g := goroutinesAtMost(base+4, 5*time.Second); g > base+4 {
		t.Fatalf("%d goroutines with %d idle watches, %d before them", g, 2*n, base)
	}

	// Every node changes, and gets a child.
	if err := parallelDo(n, func(i int) error {
		if _, err := writer.Set(ctx, node(i), []byte("v1"), zk.AnyVersion); err != nil {
			return err
		}
		_, err := writer.Create(ctx, node(i)+"/kid", nil, zk.CreateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	waitAll(t, 20*time.Second, "change", data, func(int) string { return "v1" })
	waitAll(t, 20*time.Second, "child", kids, func(int) string { return "[kid]" })
	if g := goroutinesAtMost(base+4, 5*time.Second); g > base+4 {
		t.Fatalf("%d goroutines after the events settled, %d before the watches", g, base)
	}

	// The session expires; meanwhile every node changes again.
	var mu sync.Mutex
	var reconnected time.Time
	c.AddListener(func(s zk.State) {
		mu.Lock()
		defer mu.Unlock()
		if s == zk.StateConnected {
			reconnected = time.Now()
		}
	})
	connectedAt := func() time.Time { mu.Lock(); defer mu.Unlock(); return reconnected }
	expired := time.Now()
	oldID, passwd := c.SessionID()
	if err := srv.ExpireSession(oldID, passwd); err != nil {
		t.Fatal(err)
	}
	if err := parallelDo(n, func(i int) error {
		_, err := writer.Set(ctx, node(i), []byte("v2"), zk.AnyVersion)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	waitAll(t, 4*sessionTimeout, "after expiry", data, func(int) string { return "v2" })
	t.Logf("%d data watches had the state of the new session %v after the expiry (%v after CONNECTED)",
		n, time.Since(expired), time.Since(connectedAt()))
	data.mu.Lock()
	for i, evs := range data.events {
		if !slices.Contains(evs, zk.EventNone) {
			data.mu.Unlock()
			t.Fatalf("watch %d after a new session: events %v, want a NONE", i, evs)
		}
	}
	data.mu.Unlock()
	// And they keep watching on the new session.
	if err := parallelDo(n, func(i int) error {
		return writer.Delete(ctx, node(i)+"/kid", zk.DeleteOptions{})
	}); err != nil {
		t.Fatal(err)
	}
	waitAll(t, 20*time.Second, "child removed on the new session", kids, func(int) string { return "[]" })

	// Stop half of them: their Done closes at once; the others end with Close.
	for _, w := range watches[:n] {
		w.Stop()
		select {
		case <-w.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("Done not closed after Stop of an idle watch")
		}
	}
	c.Close()
	for i, w := range watches {
		select {
		case <-w.Done():
		default:
			t.Fatalf("watch %d not done after Close", i)
		}
	}
	if g := goroutinesAtMost(base, 5*time.Second); g > base {
		t.Fatalf("%d goroutines after Close, %d before the watches", g, base)
	}
}

// TestWatchCallsSerialized: a slow function on a node changed quickly is never entered twice at
// once, sees versions in increasing order (coalescing allowed) and ends with the last one; Stop
// from inside the function ends the watch after that call.
func TestWatchCallsSerialized(t *testing.T) {
	srv := zktest.Start(t)
	c := connect(t, srv, Options{Logger: quiet})
	writer := connect(t, srv, Options{Logger: quiet})
	ctx := tctx(t)
	if _, err := writer.Create(ctx, "/fast", []byte("0"), zk.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var inside atomic.Int32
	var mu sync.Mutex
	var seen []int
	var self zk.Watch
	var selfMu sync.Mutex
	const last = 200
	stopped := make(chan struct{})
	w, err := c.DataWatch("/fast", func(d []byte, st *zk.Stat, ev *zk.WatchEvent) bool {
		if inside.Add(1) != 1 {
			t.Error("two calls of one watch at once")
		}
		defer inside.Add(-1)
		v, _ := strconv.Atoi(string(d))
		mu.Lock()
		seen = append(seen, v)
		mu.Unlock()
		time.Sleep(time.Millisecond)
		if v == last {
			selfMu.Lock()
			self.Stop() // from inside the function
			selfMu.Unlock()
			close(stopped)
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	selfMu.Lock()
	self = w
	selfMu.Unlock()
	for i := 1; i <= last; i++ {
		if _, err := writer.Set(ctx, "/fast", []byte(strconv.Itoa(i)), zk.AnyVersion); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-stopped:
	case <-time.After(20 * time.Second):
		t.Fatal("the last value never arrived")
	}
	select {
	case <-w.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Stop from inside the function did not end the watch")
	}
	if _, err := writer.Set(ctx, "/fast", []byte("999"), zk.AnyVersion); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if !slices.IsSorted(seen) || seen[len(seen)-1] != last {
		t.Fatalf("values seen out of order or past Stop: %v", seen)
	}
	t.Logf("%d changes, %d calls", last, len(seen))
}

// TestWatchesOnOnePath: several watches of one session on one node (two data, one children) each
// get the node's changes and deletion, with the right event types, and never a call that repeats
// the state it already delivered.
func TestWatchesOnOnePath(t *testing.T) {
	srv := zktest.Start(t)
	c := connect(t, srv, Options{Logger: quiet})
	writer := connect(t, srv, Options{Logger: quiet})
	ctx := tctx(t)
	type call struct {
		ev  string
		val string
	}
	var mu sync.Mutex
	calls := map[string][]call{}
	add := func(who string, ev *zk.WatchEvent, val string) {
		name := "first"
		if ev != nil {
			name = ev.Type.String()
		}
		mu.Lock()
		calls[who] = append(calls[who], call{name, val})
		mu.Unlock()
	}
	for _, who := range []string{"d1", "d2"} {
		w, err := c.DataWatch("/shared", func(d []byte, st *zk.Stat, ev *zk.WatchEvent) bool {
			add(who, ev, fmt.Sprintf("%v:%s", st != nil, d))
			return true
		})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
	}
	cw, err := c.ChildrenWatch("/shared", func(ch []string, ev *zk.WatchEvent) bool {
		add("c", ev, fmt.Sprint(ch))
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cw.Stop()
	waitCalls := func(who string, n int) []call {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			mu.Lock()
			got := slices.Clone(calls[who])
			mu.Unlock()
			if len(got) >= n || time.Now().After(deadline) {
				return got
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	steps := []struct {
		do   func() error
		data call // expected for d1 and d2
		kids call // expected for c; zero: no call
	}{
		{func() error { _, err := writer.Create(ctx, "/shared", []byte("a"), zk.CreateOptions{}); return err },
			call{"CREATED", "true:a"}, call{"CREATED", "[]"}},
		{func() error { _, err := writer.Set(ctx, "/shared", []byte("b"), zk.AnyVersion); return err },
			call{"CHANGED", "true:b"}, call{}},
		{func() error { _, err := writer.Create(ctx, "/shared/k", nil, zk.CreateOptions{}); return err },
			call{}, call{"CHILD", "[k]"}},
		{func() error { return writer.Delete(ctx, "/shared/k", zk.DeleteOptions{}) },
			call{}, call{"CHILD", "[]"}},
		{func() error { return writer.Delete(ctx, "/shared", zk.DeleteOptions{}) },
			call{"DELETED", "false:"}, call{"DELETED", "[]"}},
	}
	want := map[string][]call{"d1": {{"first", "false:"}}, "d2": {{"first", "false:"}}, "c": {{"first", "[]"}}}
	for i, s := range steps {
		if err := s.do(); err != nil {
			t.Fatal(err)
		}
		if s.data.ev != "" {
			want["d1"] = append(want["d1"], s.data)
			want["d2"] = append(want["d2"], s.data)
		}
		if s.kids.ev != "" {
			want["c"] = append(want["c"], s.kids)
		}
		for who, w := range want {
			if got := waitCalls(who, len(w)); fmt.Sprint(got) != fmt.Sprint(w) {
				t.Fatalf("step %d: %s got %v, want %v", i, who, got, w)
			}
		}
	}
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	for who, w := range want {
		if fmt.Sprint(calls[who]) != fmt.Sprint(w) {
			t.Errorf("%s: extra calls %v, want %v", who, calls[who], w)
		}
	}
}

// TestCloseEndsWatchesWhileDisconnected: a watch ends with Close while the server is down, and
// no goroutine is left.
func TestCloseEndsWatchesWhileDisconnected(t *testing.T) {
	srv := zktest.Start(t)
	time.Sleep(50 * time.Millisecond)
	base := runtime.NumGoroutine()
	c := connect(t, srv, Options{Logger: quiet, SessionTimeout: 10 * time.Second})
	writer := connect(t, srv, Options{Logger: quiet})
	ctx := tctx(t)
	if _, err := writer.Create(ctx, "/p", []byte("x"), zk.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	w, err := c.DataWatch("/p", func([]byte, *zk.Stat, *zk.WatchEvent) bool { calls.Add(1); return true })
	if err != nil {
		t.Fatal(err)
	}
	writer.Close()
	srv.Stop()
	eventually(t, 10*time.Second, "suspended", func() bool { return c.State() == zk.StateSuspended })
	c.Close()
	select {
	case <-w.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("watch not done after Close")
	}
	if g := goroutinesAtMost(base, 5*time.Second); g > base {
		t.Fatalf("%d goroutines after Close, %d before", g, base)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d calls, want the first one only", n)
	}
}

// TestWatchRearmAcrossReconnect: a watch whose re-arm fails because the server is down waits for
// the connection and then delivers the change it fired for, and keeps watching. One worker, held
// by another watch's function, makes the re-arm happen while the server is down.
func TestWatchRearmAcrossReconnect(t *testing.T) {
	srv := zktest.Start(t)
	c := connect(t, srv, Options{Logger: quiet, WatchWorkers: 1, SessionTimeout: 10 * time.Second})
	writer := connect(t, srv, Options{Logger: quiet, SessionTimeout: 10 * time.Second})
	ctx := tctx(t)
	for _, p := range []string{"/a", "/b"} {
		if _, err := writer.Create(ctx, p, []byte("0"), zk.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	entered, release := make(chan struct{}, 1), make(chan struct{})
	wa, err := c.DataWatch("/a", func(_ []byte, _ *zk.Stat, ev *zk.WatchEvent) bool {
		if ev != nil {
			entered <- struct{}{}
			<-release
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	defer wa.Stop()
	b := newValues(1)
	wb, err := c.DataWatch("/b", func(d []byte, _ *zk.Stat, ev *zk.WatchEvent) bool { b.set(0, string(d), ev); return true })
	if err != nil {
		t.Fatal(err)
	}
	defer wb.Stop()

	if _, err := writer.Set(ctx, "/a", []byte("1"), zk.AnyVersion); err != nil {
		t.Fatal(err)
	}
	<-entered // the only worker is busy
	if _, err := writer.Set(ctx, "/b", []byte("1"), zk.AnyVersion); err != nil {
		t.Fatal(err)
	}
	queued := func() bool { c.wmu.Lock(); defer c.wmu.Unlock(); return len(c.wQueue) == 1 }
	eventually(t, 5*time.Second, "/b queued", queued)
	srv.Stop()
	eventually(t, 10*time.Second, "suspended", func() bool { return c.State() == zk.StateSuspended })
	close(release)
	parked := func() bool { c.wmu.Lock(); defer c.wmu.Unlock(); return len(c.wParked) == 1 }
	eventually(t, 10*time.Second, "/b parked while the server is down", parked)
	if miss := b.missing(func(int) string { return "0" }); len(miss) != 0 {
		t.Fatal("/b delivered while the server was down")
	}
	srv.Start()
	waitAll(t, 15*time.Second, "/b after the reconnection", b, func(int) string { return "1" })
	if _, err := writer.Set(ctx, "/b", []byte("2"), zk.AnyVersion); err != nil {
		t.Fatal(err)
	}
	waitAll(t, 5*time.Second, "/b later", b, func(int) string { return "2" })
	b.mu.Lock()
	defer b.mu.Unlock()
	if fmt.Sprint(b.events[0]) != fmt.Sprint([]zk.EventType{zk.EventChanged, zk.EventChanged}) {
		t.Fatalf("/b events %v, want CHANGED twice (same session)", b.events[0])
	}
}

// TestWatchEventMapping: which watches an event takes, as go-zookeeper maps events to its watch
// kinds; a watch being armed is taken by any event on its node that may concern it, and its call
// is marked skippable if nothing changed. No server: the bookkeeping alone.
func TestWatchEventMapping(t *testing.T) {
	const (
		created  = gozk.EventNodeCreated
		changed  = gozk.EventNodeDataChanged
		children = gozk.EventNodeChildrenChanged
		deleted  = gozk.EventNodeDeleted
	)
	tests := []struct {
		name     string
		kind     uint8
		children bool // a ChildrenWatch
		busy     bool
		taken    []gozk.EventType
	}{
		{"exists watch", akExist, false, false, []gozk.EventType{created, changed, deleted}},
		{"data watch", akData, false, false, []gozk.EventType{changed, deleted}},
		{"children watch", akChild, true, false, []gozk.EventType{children, deleted}},
		{"children watch on a missing node", akExist, true, false, []gozk.EventType{created, changed, deleted}},
		{"data watch being called", akData, false, true, []gozk.EventType{changed, deleted}},
		{"data watch being armed", akArming, false, true, []gozk.EventType{created, changed, deleted}},
		{"children watch being armed", akArming, true, true, []gozk.EventType{created, children, deleted}},
	}
	codes := map[gozk.EventType]evCode{created: evCreated, changed: evChanged, children: evChild, deleted: evDeleted}
	for _, tc := range tests {
		for _, et := range []gozk.EventType{created, changed, children, deleted} {
			// A client with its one worker slot taken, so nothing runs: queued watches stay queued.
			c := &Client{opts: Options{WatchWorkers: 1}, wWorkers: 1, closing: make(chan struct{}),
				wIndex: map[string]*watch{}, wParked: map[*watch]uint64{}}
			w := &watch{c: c, full: "/n", state: wsIdle, children: tc.children}
			if tc.busy {
				w.state = wsBusy
			}
			other := &watch{c: c, full: "/n", state: wsIdle} // an exists watch on the same node
			c.indexLocked(other)
			other.kind = akExist
			c.indexLocked(w)
			w.kind = tc.kind
			c.onWatchEvent(gozk.Event{Type: et, Path: "/n"})
			c.onWatchEvent(gozk.Event{Type: et, Path: "/other"})

			want := slices.Contains(tc.taken, et)
			got := w.kind == akNone
			if got != want {
				t.Errorf("%s, %v: taken %v, want %v", tc.name, et, got, want)
				continue
			}
			inIndex := false
			for p := c.wIndex["/n"]; p != nil; p = p.next {
				inIndex = inIndex || p == w
			}
			if inIndex == got {
				t.Errorf("%s, %v: in the index %v after the event", tc.name, et, inIndex)
			}
			switch {
			case !got:
				if w.state != map[bool]uint8{true: wsBusy, false: wsIdle}[tc.busy] || w.pending != evFirst {
					t.Errorf("%s, %v: not taken but state %d pending %d", tc.name, et, w.state, w.pending)
				}
			case tc.busy:
				uncertain := w.flags&wfPendingUncertain != 0
				if w.state != wsBusy || w.pending != codes[et] || uncertain != (tc.kind == akArming) {
					t.Errorf("%s, %v: state %d pending %d uncertain %v", tc.name, et, w.state, w.pending, uncertain)
				}
			default:
				if w.state != wsQueued || w.ev != codes[et] || !slices.Contains(c.wQueue, w) {
					t.Errorf("%s, %v: state %d ev %d queue %v", tc.name, et, w.state, w.ev, c.wQueue)
				}
			}
		}
	}

	// A dropped session takes every watch on the node: idle ones wait for a new session, busy
	// ones learn it when their call ends.
	c := &Client{opts: Options{WatchWorkers: 1}, wWorkers: 1, closing: make(chan struct{}),
		wIndex: map[string]*watch{}, wParked: map[*watch]uint64{}, gen: 3}
	idle, busy := &watch{c: c, full: "/n", state: wsIdle}, &watch{c: c, full: "/n", state: wsBusy}
	c.indexLocked(idle)
	idle.kind = akChild
	c.indexLocked(busy)
	c.onWatchEvent(gozk.Event{Type: gozk.EventNotWatching, Path: "/n", Err: gozk.ErrSessionExpired})
	if _, ok := c.wParked[idle]; !ok || idle.state != wsParked || idle.ev != evSession {
		t.Errorf("idle watch after a dropped session: state %d ev %d", idle.state, idle.ev)
	}
	if busy.pending != evSession || busy.kind != akNone || c.wExpGen != 3 || len(c.wIndex) != 0 {
		t.Errorf("busy watch after a dropped session: pending %d kind %d expGen %d index %v", busy.pending, busy.kind, c.wExpGen, c.wIndex)
	}
	// Close's NotWatching events change nothing.
	c.indexLocked(idle)
	idle.state, idle.kind = wsIdle, akData
	c.onWatchEvent(gozk.Event{Type: gozk.EventNotWatching, Path: "/n", Err: gozk.ErrClosing})
	if c.wIndex["/n"] != idle || idle.state != wsIdle {
		t.Error("a NotWatching event of Close took a watch")
	}
}
