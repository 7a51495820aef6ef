package backend

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkfake"
)

// quiet is a logger for tests that do not look at the log.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func tctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newFake returns a backend for bzid on a fresh fake ZooKeeper (closed with the test), and the
// fake client.
func newFake(t *testing.T, bzid string) (*ZKBackend, *zkfake.Fake) {
	t.Helper()
	c := zkfake.New()
	b, err := New(c, Config{Bzid: bzid, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		c.Close()
	})
	return b, c
}

// recorder keeps the calls of a layout callback.
type recorder struct {
	mu    sync.Mutex
	calls [][]LayoutEntry
	wake  chan struct{}
}

func newRecorder() *recorder { return &recorder{wake: make(chan struct{}, 1)} }

func (r *recorder) callback(entries []LayoutEntry) bool {
	r.mu.Lock()
	r.calls = append(r.calls, entries)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
	return true
}

func (r *recorder) last() []LayoutEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.calls) == 0 {
		return nil
	}
	return r.calls[len(r.calls)-1]
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

// names renders entries as "model:sub_graph=base_path/policy".
func names(entries []LayoutEntry) []string {
	out := []string{}
	for _, e := range entries {
		out = append(out, e.SavedModel.String()+"="+deref(e.DeployConfig.ModelBasePath)+"/"+deref(e.DeployConfig.VersionPolicy))
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return "<None>"
	}
	return *s
}

// tree lists every node under root as "path=data", sorted.
func tree(t testing.TB, c zk.Client, root string) []string {
	t.Helper()
	ctx := tctx(t)
	type node struct{ path, data string }
	var nodes []node
	var walk func(p string)
	walk = func(p string) {
		data, _, err := c.Get(ctx, p)
		if err != nil {
			t.Fatalf("tree: %v", err)
		}
		nodes = append(nodes, node{p, string(data)})
		kids, err := c.Children(ctx, p)
		if err != nil {
			t.Fatalf("tree: %v", err)
		}
		for _, k := range kids {
			walk(p + "/" + k)
		}
	}
	if st, err := c.Exists(ctx, root); err != nil || st == nil {
		return nil
	}
	walk(root)
	slices.SortFunc(nodes, func(a, b node) int { return strings.Compare(a.path, b.path) })
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.path + "=" + n.data
	}
	return out
}

// under keeps the entries of list that start with prefix.
func under(list []string, prefix string) []string {
	var out []string
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			out = append(out, s)
		}
	}
	return out
}

// eventually polls cond until it holds or within passes, and returns how long it took.
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		if cond() {
			return time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
