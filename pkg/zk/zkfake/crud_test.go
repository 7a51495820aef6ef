package zkfake

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/zk"
)

// seed makes /a (data "a") with children b (data "b", child c) and an ephemeral e.
func seed(t *testing.T, c *Fake) {
	t.Helper()
	mustCreate(t, c, "/a", "a", zk.CreateOptions{})
	mustCreate(t, c, "/a/b", "b", zk.CreateOptions{})
	mustCreate(t, c, "/a/b/c", "", zk.CreateOptions{})
	mustCreate(t, c, "/a/e", "", zk.CreateOptions{Ephemeral: true})
}

func TestOperationErrors(t *testing.T) {
	tests := []struct {
		name string
		op   func(c *Fake) error
		want error
		kind errkind.Kind
	}{
		{"create exists", func(c *Fake) error { _, err := c.Create(bg, "/a/b", nil, zk.CreateOptions{}); return err }, zk.ErrNodeExists, errkind.Runtime},
		{"create root", func(c *Fake) error { _, err := c.Create(bg, "/", nil, zk.CreateOptions{}); return err }, zk.ErrNodeExists, errkind.Runtime},
		{"create no parent", func(c *Fake) error { _, err := c.Create(bg, "/x/y", nil, zk.CreateOptions{}); return err }, zk.ErrNoNode, errkind.NotFound},
		{"create under ephemeral", func(c *Fake) error { _, err := c.Create(bg, "/a/e/x", nil, zk.CreateOptions{}); return err }, zk.ErrNoChildrenForEphemerals, errkind.Precondition},
		{"makepath under ephemeral", func(c *Fake) error {
			_, err := c.Create(bg, "/a/e/x/y", nil, zk.CreateOptions{MakePath: true})
			return err
		}, zk.ErrNoChildrenForEphemerals, errkind.Precondition},
		{"create bad path", func(c *Fake) error { _, err := c.Create(bg, "a/b", nil, zk.CreateOptions{}); return err }, zk.ErrInvalidPath, errkind.Value},
		{"get missing", func(c *Fake) error { _, _, err := c.Get(bg, "/a/x"); return err }, zk.ErrNoNode, errkind.NotFound},
		{"get bad path", func(c *Fake) error { _, _, err := c.Get(bg, "/a/"); return err }, zk.ErrInvalidPath, errkind.Value},
		{"set missing", func(c *Fake) error { _, err := c.Set(bg, "/a/x", nil, zk.AnyVersion); return err }, zk.ErrNoNode, errkind.NotFound},
		{"set bad version", func(c *Fake) error { _, err := c.Set(bg, "/a", nil, 3); return err }, zk.ErrBadVersion, errkind.Precondition},
		{"delete missing", func(c *Fake) error { return c.Delete(bg, "/a/x", zk.DeleteOptions{}) }, zk.ErrNoNode, errkind.NotFound},
		{"delete not empty", func(c *Fake) error { return c.Delete(bg, "/a/b", zk.DeleteOptions{}) }, zk.ErrNotEmpty, errkind.Precondition},
		{"delete bad version", func(c *Fake) error {
			return c.Delete(bg, "/a/b/c", zk.DeleteOptions{CheckVersion: true, Version: 1})
		}, zk.ErrBadVersion, errkind.Precondition},
		{"delete recursive bad version", func(c *Fake) error {
			return c.Delete(bg, "/a", zk.DeleteOptions{Recursive: true, CheckVersion: true, Version: 2})
		}, zk.ErrBadVersion, errkind.Precondition},
		{"delete root", func(c *Fake) error { return c.Delete(bg, "/", zk.DeleteOptions{Recursive: true}) }, zk.ErrInvalidPath, errkind.Value},
		{"children missing", func(c *Fake) error { _, err := c.Children(bg, "/x"); return err }, zk.ErrNoNode, errkind.NotFound},
		{"exists bad path", func(c *Fake) error { _, err := c.Exists(bg, "/a//b"); return err }, zk.ErrInvalidPath, errkind.Value},
		{"ensure under ephemeral", func(c *Fake) error { return c.EnsurePath(bg, "/a/e/x") }, zk.ErrNoChildrenForEphemerals, errkind.Precondition},
		{"watch bad path", func(c *Fake) error {
			_, err := c.DataWatch("x", func([]byte, *zk.Stat, *zk.WatchEvent) bool { return true })
			return err
		}, zk.ErrInvalidPath, errkind.Value},
		{"watch nil func", func(c *Fake) error { _, err := c.ChildrenWatch("/a", nil); return err }, nil, errkind.Value},
		{"canceled context", func(c *Fake) error {
			ctx, cancel := context.WithCancel(bg)
			cancel()
			_, err := c.Create(ctx, "/z", nil, zk.CreateOptions{})
			return err
		}, context.Canceled, errkind.Unknown},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t)
			seed(t, c)
			err := tc.op(c)
			if err == nil {
				t.Fatal("no error")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("error = %v, want %v", err, tc.want)
			}
			if got := errkind.Of(err); got != tc.kind {
				t.Fatalf("errkind.Of(%v) = %v, want %v", err, got, tc.kind)
			}
			var pe *zk.PathError
			if !errors.As(err, &pe) || pe.Op == "" || !strings.Contains(err.Error(), pe.Path) {
				t.Fatalf("error %v is not a *zk.PathError naming op and path", err)
			}
		})
	}
}

func TestNoChangeOnError(t *testing.T) {
	c := newClient(t)
	seed(t, c)
	before, _, err := c.Get(bg, "/a")
	must(t, err)
	_ = c.Delete(bg, "/a", zk.DeleteOptions{Recursive: true, CheckVersion: true, Version: 7})
	if kids, _ := c.Children(bg, "/a/b"); !slices.Equal(kids, []string{"c"}) {
		t.Fatalf("failed recursive delete changed the tree: children of /a/b = %v", kids)
	}
	after, _, _ := c.Get(bg, "/a")
	if string(before) != string(after) {
		t.Fatal("data changed")
	}
}

func TestStat(t *testing.T) {
	c := newClient(t)
	mustCreate(t, c, "/p", "12345", zk.CreateOptions{})
	_, st0, err := c.Get(bg, "/p")
	must(t, err)
	if st0.Version != 0 || st0.CVersion != 0 || st0.DataLength != 5 || st0.NumChildren != 0 || st0.EphemeralOwner != 0 ||
		st0.Czxid == 0 || st0.Czxid != st0.Mzxid || st0.Ctime == 0 || st0.Ctime != st0.Mtime {
		t.Fatalf("new node stat = %+v", st0)
	}
	st1, err := c.Set(bg, "/p", []byte("ab"), 0)
	must(t, err)
	if st1.Version != 1 || st1.DataLength != 2 || st1.Mzxid <= st0.Mzxid || st1.Czxid != st0.Czxid {
		t.Fatalf("stat after set = %+v", st1)
	}
	st2, err := c.Set(bg, "/p", nil, zk.AnyVersion)
	must(t, err)
	if st2.Version != 2 || st2.DataLength != 0 {
		t.Fatalf("stat after second set = %+v", st2)
	}
	mustCreate(t, c, "/p/x", "", zk.CreateOptions{})
	mustCreate(t, c, "/p/y", "", zk.CreateOptions{})
	must(t, c.Delete(bg, "/p/x", zk.DeleteOptions{CheckVersion: true, Version: 0}))
	st3, err := c.Exists(bg, "/p")
	must(t, err)
	if st3 == nil || st3.CVersion != 3 || st3.NumChildren != 1 || st3.Version != 2 || st3.Pzxid <= st2.Mzxid {
		t.Fatalf("stat after child changes = %+v", st3)
	}
	// Empty data is an empty slice, not nil: nil means "no node" to watches.
	data, _, err := c.Get(bg, "/p")
	if err != nil || data == nil || len(data) != 0 {
		t.Fatalf("Get of empty node = %#v, %v", data, err)
	}
	must(t, c.Delete(bg, "/p", zk.DeleteOptions{Recursive: true, CheckVersion: true, Version: 2}))
}

func TestDataIsCopied(t *testing.T) {
	c := newClient(t)
	in := []byte("abc")
	mustCreate(t, c, "/n", string(in), zk.CreateOptions{})
	in[0] = 'X'
	out, _, _ := c.Get(bg, "/n")
	out[1] = 'Y'
	again, _, _ := c.Get(bg, "/n")
	if string(again) != "abc" {
		t.Fatalf("stored data changed through caller slices: %q", again)
	}
}

func TestSequenceNodes(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, c *Fake)
		path  string
		want  []string
	}{
		{"counter per parent from 0", nil, "/q/n-", []string{"/q/n-0000000000", "/q/n-0000000001", "/q/n-0000000002"}},
		// replica_manager registers entries as ".../entry:0/0" + counter, read back as 11 digits.
		{"entry replica id", nil, "/m/entry:0/0", []string{"/m/entry:0/00000000000", "/m/entry:0/00000000001"}},
		{"prefix ending with slash", nil, "/s/", []string{"/s/0000000000", "/s/0000000001"}},
		{"advanced by other children", func(t *testing.T, c *Fake) {
			mustCreate(t, c, "/q/plain", "", zk.CreateOptions{MakePath: true})
			must(t, c.Delete(bg, "/q/plain", zk.DeleteOptions{}))
		}, "/q/n-", []string{"/q/n-0000000002", "/q/n-0000000003"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t)
			if tc.setup != nil {
				tc.setup(t, c)
			}
			for _, want := range tc.want {
				got := mustCreate(t, c, tc.path, "", zk.CreateOptions{Sequence: true, MakePath: true})
				if got != want {
					t.Fatalf("Create(%q, sequence) = %q, want %q", tc.path, got, want)
				}
				if st, _ := c.Exists(bg, got); st == nil {
					t.Fatalf("%s was not created", got)
				}
			}
		})
	}
	t.Run("two prefixes in one parent", func(t *testing.T) {
		c := newClient(t)
		a := mustCreate(t, c, "/q/a-", "", zk.CreateOptions{Sequence: true, MakePath: true})
		b := mustCreate(t, c, "/q/b-", "", zk.CreateOptions{Sequence: true})
		if a != "/q/a-0000000000" || b != "/q/b-0000000001" {
			t.Fatalf("got %s, %s: one counter per parent", a, b)
		}
	})
}

func TestEnsurePathAndMakePath(t *testing.T) {
	c := newClient(t)
	must(t, c.EnsurePath(bg, "/x/y/z"))
	must(t, c.EnsurePath(bg, "/x/y/z")) // existing: no error
	must(t, c.EnsurePath(bg, "/"))
	mustCreate(t, c, "/x/y/z/w", "w", zk.CreateOptions{MakePath: true})
	root, err := c.Children(bg, "/")
	must(t, err)
	if !slices.Equal(root, []string{"x"}) {
		t.Fatalf("Children(/) = %v", root)
	}
	data, st, err := c.Get(bg, "/x/y")
	if err != nil || len(data) != 0 || st.EphemeralOwner != 0 {
		t.Fatalf("intermediate node: %q %+v %v", data, st, err)
	}
	// Ephemeral + MakePath: only the leaf is ephemeral.
	mustCreate(t, c, "/e1/e2/leaf", "", zk.CreateOptions{MakePath: true, Ephemeral: true})
	stLeaf, _ := c.Exists(bg, "/e1/e2/leaf")
	stMid, _ := c.Exists(bg, "/e1/e2")
	if stLeaf.EphemeralOwner != c.SessionID() || stMid.EphemeralOwner != 0 {
		t.Fatalf("owners: leaf %#x, parent %#x", stLeaf.EphemeralOwner, stMid.EphemeralOwner)
	}
}

func TestChildrenSorted(t *testing.T) {
	c := newClient(t)
	for _, n := range []string{"b", "c", "a"} {
		mustCreate(t, c, "/r/"+n, "", zk.CreateOptions{MakePath: true})
	}
	got, err := c.Children(bg, "/r")
	if err != nil || !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("Children = %v, %v", got, err)
	}
}
