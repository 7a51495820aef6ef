// Package zkconformance is one behavioural suite for zk.Client implementations. It runs against
// the in-memory fake and against a real ZooKeeper server (through zkreal), so the fake cannot drift
// from what the real client does; where the fake differs on purpose, the case says so and checks
// each backend's documented behaviour.
package zkconformance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/monolith-go/monolith/pkg/zk"
)

// Backend describes an implementation under test.
type Backend struct {
	Name string
	// Client returns a new client (a new session) on the backend's tree; the suite closes it.
	Client func(t *testing.T) zk.Client
	// Fake is true for the in-memory fake: synchronous watches, DELETED carries the old data.
	Fake bool
}

// Run runs every case against b, each under its own root node.
func Run(t *testing.T, b Backend) {
	cases := []struct {
		name string
		fn   func(t *testing.T, b Backend, root string)
	}{
		{"crud", testCRUD},
		{"empty data", testEmptyData},
		{"errors", testErrors},
		{"sequence", testSequence},
		{"ephemeral lifetime", testEphemeral},
		{"data watch", testDataWatch},
		{"children watch", testChildrenWatch},
		{"watch stop", testWatchStop},
		{"election", testElection},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := fmt.Sprintf("/conformance-%d-%d", time.Now().UnixNano(), i)
			tc.fn(t, b, root)
		})
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func newClient(t *testing.T, b Backend) zk.Client {
	c := b.Client(t)
	t.Cleanup(func() { c.Close() })
	return c
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func testCRUD(t *testing.T, b Backend, root string) {
	c, cx := newClient(t, b), ctx(t)
	p, err := c.Create(cx, root+"/a/b", []byte("v1"), zk.CreateOptions{MakePath: true})
	must(t, err)
	if p != root+"/a/b" {
		t.Fatalf("created %q", p)
	}
	data, st, err := c.Get(cx, p)
	must(t, err)
	if string(data) != "v1" || st.Version != 0 || st.DataLength != 2 {
		t.Fatalf("get: %q %+v", data, st)
	}
	st, err = c.Set(cx, p, []byte("v2"), 0)
	must(t, err)
	if st.Version != 1 {
		t.Fatalf("set version %d", st.Version)
	}
	if _, err := c.Set(cx, p, []byte("v3"), 0); !errors.Is(err, zk.ErrBadVersion) {
		t.Fatalf("stale set: %v", err)
	}
	kids, err := c.Children(cx, root+"/a")
	must(t, err)
	if len(kids) != 1 || kids[0] != "b" {
		t.Fatalf("children %v", kids)
	}
	must(t, c.EnsurePath(cx, root+"/x/y/z"))
	must(t, c.EnsurePath(cx, root+"/x/y/z")) // idempotent
	if st, err := c.Exists(cx, root+"/x/y/z"); err != nil || st == nil {
		t.Fatalf("exists after ensure: %v %v", st, err)
	}
	if err := c.Delete(cx, root+"/a", zk.DeleteOptions{}); !errors.Is(err, zk.ErrNotEmpty) {
		t.Fatalf("delete non-empty: %v", err)
	}
	must(t, c.Delete(cx, root, zk.DeleteOptions{Recursive: true}))
	if st, err := c.Exists(cx, root); err != nil || st != nil {
		t.Fatalf("exists after recursive delete: %v %v", st, err)
	}
}

// testEmptyData: a node written without data reads back as b"" (an empty, non-nil slice), as
// kazoo writes it; "no data" (nil, length -1 on the wire) is what kazoo reads as None.
func testEmptyData(t *testing.T, b Backend, root string) {
	c, cx := newClient(t, b), ctx(t)
	_, err := c.Create(cx, root+"/made/leaf", nil, zk.CreateOptions{MakePath: true})
	must(t, err)
	must(t, c.EnsurePath(cx, root+"/ensured"))
	_, err = c.Create(cx, root+"/set", []byte("v"), zk.CreateOptions{})
	must(t, err)
	_, err = c.Set(cx, root+"/set", nil, zk.AnyVersion)
	must(t, err)
	for _, p := range []string{root, root + "/made", root + "/made/leaf", root + "/ensured", root + "/set"} {
		data, st, err := c.Get(cx, p)
		must(t, err)
		if data == nil || len(data) != 0 || st.DataLength != 0 {
			t.Errorf("%s: data %#v (nil: %v), length %d; want b\"\"", p, data, data == nil, st.DataLength)
		}
	}
}

func testErrors(t *testing.T, b Backend, root string) {
	c, cx := newClient(t, b), ctx(t)
	must(t, c.EnsurePath(cx, root))
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"get missing", func() error { _, _, err := c.Get(cx, root+"/none"); return err }(), zk.ErrNoNode},
		{"create without parent", func() error { _, err := c.Create(cx, root+"/p/q", nil, zk.CreateOptions{}); return err }(), zk.ErrNoNode},
		{"create twice", func() error {
			c.Create(cx, root+"/dup", nil, zk.CreateOptions{})
			_, err := c.Create(cx, root+"/dup", nil, zk.CreateOptions{})
			return err
		}(), zk.ErrNodeExists},
		{"set missing", func() error { _, err := c.Set(cx, root+"/none", nil, zk.AnyVersion); return err }(), zk.ErrNoNode},
		{"delete missing", c.Delete(cx, root+"/none", zk.DeleteOptions{}), zk.ErrNoNode},
		{"children of missing", func() error { _, err := c.Children(cx, root+"/none"); return err }(), zk.ErrNoNode},
		{"relative path", func() error { _, _, err := c.Get(cx, "relative"); return err }(), zk.ErrInvalidPath},
		{"child of ephemeral", func() error {
			c.Create(cx, root+"/eph", nil, zk.CreateOptions{Ephemeral: true})
			_, err := c.Create(cx, root+"/eph/kid", nil, zk.CreateOptions{})
			return err
		}(), zk.ErrNoChildrenForEphemerals},
	}
	for _, tc := range tests {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
		}
		var pe *zk.PathError
		if tc.err != nil && !errors.As(tc.err, &pe) {
			t.Errorf("%s: %v is not a *zk.PathError", tc.name, tc.err)
		}
	}
	c.Close()
	if _, _, err := c.Get(context.Background(), root); !errors.Is(err, zk.ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
}

func testSequence(t *testing.T, b Backend, root string) {
	c, cx := newClient(t, b), ctx(t)
	must(t, c.EnsurePath(cx, root+"/q"))
	var got []string
	for i := 0; i < 3; i++ {
		p, err := c.Create(cx, root+"/q/n-", []byte{byte(i)}, zk.CreateOptions{Sequence: true})
		must(t, err)
		got = append(got, p)
	}
	for i, p := range got {
		if want := fmt.Sprintf("%s/q/n-%010d", root, i); p != want {
			t.Errorf("sequence node %d: %s, want %s", i, p, want)
		}
	}
}

func testEphemeral(t *testing.T, b Backend, root string) {
	c1, cx := newClient(t, b), ctx(t)
	c2 := newClient(t, b)
	must(t, c1.EnsurePath(cx, root))
	_, err := c1.Create(cx, root+"/e", []byte("x"), zk.CreateOptions{Ephemeral: true})
	must(t, err)
	st, err := c2.Exists(cx, root+"/e")
	must(t, err)
	if st == nil || st.EphemeralOwner == 0 {
		t.Fatalf("ephemeral stat %+v", st)
	}
	gone := make(chan struct{})
	w, err := c2.DataWatch(root+"/e", func(data []byte, st *zk.Stat, ev *zk.WatchEvent) bool {
		if ev != nil && ev.Type == zk.EventDeleted {
			close(gone)
			return false
		}
		return true
	})
	must(t, err)
	defer w.Stop()
	must(t, c1.Close())
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("ephemeral node outlived its session")
	}
}

// recorder collects watch calls.
type recorder struct {
	mu    sync.Mutex
	calls []string
	ch    chan struct{}
}

func newRecorder() *recorder { return &recorder{ch: make(chan struct{}, 100)} }

func (r *recorder) add(s string) {
	r.mu.Lock()
	r.calls = append(r.calls, s)
	r.mu.Unlock()
	r.ch <- struct{}{}
}

func (r *recorder) waitFor(t *testing.T, n int) []string {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		r.mu.Lock()
		if len(r.calls) >= n {
			out := append([]string(nil), r.calls...)
			r.mu.Unlock()
			return out
		}
		r.mu.Unlock()
		select {
		case <-r.ch:
		case <-deadline:
			r.mu.Lock()
			defer r.mu.Unlock()
			t.Fatalf("waited for %d watch calls, got %v", n, r.calls)
		}
	}
}

func evName(ev *zk.WatchEvent) string {
	if ev == nil {
		return "first"
	}
	return ev.Type.String()
}

func testDataWatch(t *testing.T, b Backend, root string) {
	c, cx := newClient(t, b), ctx(t)
	must(t, c.EnsurePath(cx, root))
	r := newRecorder()
	p := root + "/d"
	w, err := c.DataWatch(p, func(data []byte, st *zk.Stat, ev *zk.WatchEvent) bool {
		exists := st != nil
		d := string(data)
		if !exists && !b.Fake {
			d = "" // a real client reads the node again and finds none
		}
		if ev != nil && ev.Type == zk.EventDeleted && b.Fake {
			d = "" // the fake passes the old data on DELETED (documented difference)
		}
		r.add(fmt.Sprintf("%s:%v:%s", evName(ev), exists, d))
		return true
	})
	must(t, err)
	defer w.Stop()
	// Each step waits for its call: a real client may coalesce changes made while it re-arms.
	r.waitFor(t, 1)
	_, err = c.Create(cx, p, []byte("a"), zk.CreateOptions{})
	must(t, err)
	r.waitFor(t, 2)
	_, err = c.Set(cx, p, []byte("b"), zk.AnyVersion)
	must(t, err)
	r.waitFor(t, 3)
	must(t, c.Delete(cx, p, zk.DeleteOptions{}))
	got := r.waitFor(t, 4)
	want := []string{"first:false:", "CREATED:true:a", "CHANGED:true:b", "DELETED:false:"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("data watch calls %v, want %v", got, want)
	}
}

func testChildrenWatch(t *testing.T, b Backend, root string) {
	c, cx := newClient(t, b), ctx(t)
	must(t, c.EnsurePath(cx, root))
	r := newRecorder()
	p := root + "/kids"
	w, err := c.ChildrenWatch(p, func(children []string, ev *zk.WatchEvent) bool {
		r.add(fmt.Sprintf("%s:%v", evName(ev), children))
		return true
	})
	must(t, err)
	defer w.Stop()
	r.waitFor(t, 1)
	must(t, c.EnsurePath(cx, p))
	r.waitFor(t, 2)
	_, err = c.Create(cx, p+"/a", nil, zk.CreateOptions{})
	must(t, err)
	r.waitFor(t, 3)
	_, err = c.Create(cx, p+"/b", nil, zk.CreateOptions{})
	must(t, err)
	r.waitFor(t, 4)
	must(t, c.Delete(cx, p+"/a", zk.DeleteOptions{}))
	got := r.waitFor(t, 5)
	want := []string{"first:[]", "CREATED:[]", "CHILD:[a]", "CHILD:[a b]", "CHILD:[b]"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("children watch calls %v, want %v", got, want)
	}
}

func testWatchStop(t *testing.T, b Backend, root string) {
	c, cx := newClient(t, b), ctx(t)
	p := root + "/s"
	_, err := c.Create(cx, p, []byte("0"), zk.CreateOptions{MakePath: true})
	must(t, err)
	r := newRecorder()
	// Returning false stops the watch after the second call.
	w, err := c.DataWatch(p, func(data []byte, st *zk.Stat, ev *zk.WatchEvent) bool {
		r.add(string(data))
		return ev == nil
	})
	must(t, err)
	_, err = c.Set(cx, p, []byte("1"), zk.AnyVersion)
	must(t, err)
	r.waitFor(t, 2)
	select {
	case <-w.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("watch not done after its function returned false")
	}
	_, err = c.Set(cx, p, []byte("2"), zk.AnyVersion)
	must(t, err)
	// Stop() on a second watch.
	r2 := newRecorder()
	w2, err := c.DataWatch(p, func(data []byte, st *zk.Stat, ev *zk.WatchEvent) bool { r2.add(string(data)); return true })
	must(t, err)
	r2.waitFor(t, 1)
	w2.Stop()
	<-w2.Done()
	_, err = c.Set(cx, p, []byte("3"), zk.AnyVersion)
	must(t, err)
	time.Sleep(200 * time.Millisecond)
	if got := r.waitFor(t, 2); len(got) != 2 {
		t.Fatalf("stopped watch called again: %v", got)
	}
	if got := r2.waitFor(t, 1); len(got) != 1 {
		t.Fatalf("Stop()ped watch called again: %v", got)
	}
}

func testElection(t *testing.T, b Backend, root string) {
	c1, cx := newClient(t, b), ctx(t)
	c2 := newClient(t, b)
	var mu sync.Mutex
	var order []string
	release := make(chan struct{})
	elected1 := make(chan struct{})
	errs := make(chan error, 2)
	go func() {
		errs <- c1.Election(root+"/election", "one").Run(cx, func(context.Context) {
			mu.Lock()
			order = append(order, "one")
			mu.Unlock()
			close(elected1)
			<-release
		})
	}()
	<-elected1
	go func() {
		errs <- c2.Election(root+"/election", "two").Run(cx, func(context.Context) {
			mu.Lock()
			order = append(order, "two")
			mu.Unlock()
		})
	}()
	time.Sleep(300 * time.Millisecond)
	mu.Lock()
	if len(order) != 1 {
		t.Fatalf("two leaders at once: %v", order)
	}
	mu.Unlock()
	close(release)
	for i := 0; i < 2; i++ {
		must(t, <-errs)
	}
	if fmt.Sprint(order) != "[one two]" {
		t.Fatalf("leaders %v", order)
	}
}
