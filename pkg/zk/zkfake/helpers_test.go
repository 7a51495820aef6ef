package zkfake

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monolith-go/monolith/pkg/zk"
)

var bg = context.Background()

// newClient returns a client of a fresh server, closed when the test ends.
func newClient(t *testing.T) *Fake {
	t.Helper()
	c := New()
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func client(t *testing.T, s *Server) *Fake {
	t.Helper()
	c := s.Client()
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mustCreate(t *testing.T, c zk.Client, p, data string, opts zk.CreateOptions) string {
	t.Helper()
	got, err := c.Create(bg, p, []byte(data), opts)
	if err != nil {
		t.Fatalf("Create(%s): %v", p, err)
	}
	return got
}

func wantErr(t *testing.T, err, want error) {
	t.Helper()
	switch {
	case want == nil && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case want != nil && !errors.Is(err, want):
		t.Fatalf("error = %v, want %v", err, want)
	}
}

func evString(ev *zk.WatchEvent) string {
	if ev == nil {
		return "first"
	}
	return ev.Type.String()
}

// recorder keeps the calls of watch functions as readable lines, in call order, across all the
// watches it was given.
type recorder struct {
	mu    sync.Mutex
	calls []string
}

func (r *recorder) add(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, fmt.Sprintf(format, args...))
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := r.calls
	r.calls = nil
	return got
}

// data records "name EVENT data=... vN" (stat nil: "absent" instead of the version).
func (r *recorder) data(name string) zk.DataWatchFunc {
	return func(data []byte, st *zk.Stat, ev *zk.WatchEvent) bool {
		state := "absent"
		if st != nil {
			state = fmt.Sprintf("v%d", st.Version)
		}
		r.add("%s %s data=%q %s", name, evString(ev), data, state)
		return true
	}
}

// children records "name EVENT [a b]" ("nil" when the node does not exist).
func (r *recorder) children(name string) zk.ChildrenWatchFunc {
	return func(children []string, ev *zk.WatchEvent) bool {
		list := "nil"
		if children != nil {
			list = "[" + strings.Join(children, " ") + "]"
		}
		r.add("%s %s %s", name, evString(ev), list)
		return true
	}
}

func wantCalls(t *testing.T, r *recorder, want ...string) {
	t.Helper()
	got := r.take()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("watch calls:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// eventually polls cond for up to 2 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
