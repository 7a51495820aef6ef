package zkmirror

import (
	"slices"
	"testing"
)

func TestCacheOrder(t *testing.T) {
	c := newCache()
	for _, p := range []string{"/a/x", "/a/y", "/a/z"} {
		c.set(p, []byte(p), nil)
	}
	if c.set("/a/x", []byte("/a/x"), nil) {
		t.Error("setting the same value reported a change")
	}
	c.set("/a/x", []byte("new"), nil) // keeps its place
	c.del("/a/y")
	c.set("/a/y", []byte("again"), nil) // moves to the end
	if got, want := c.paths(), []string{"/a/x", "/a/z", "/a/y"}; !slices.Equal(got, want) {
		t.Fatalf("paths %v, want %v", got, want)
	}
	if d, ok := c.get("/a/x"); !ok || string(d) != "new" {
		t.Fatalf("get = %q %v", d, ok)
	}
	if c.del("/nope") {
		t.Error("deleting a missing path reported a change")
	}
	for _, p := range []string{"/a/x", "/a/z", "/a/y"} {
		c.del(p)
	}
	if c.len() != 0 || c.head != nil || c.tail != nil {
		t.Fatalf("not empty: %d %v %v", c.len(), c.head, c.tail)
	}
}

func TestCacheChildren(t *testing.T) {
	c := newCache()
	for _, p := range []string{
		"/s/model/ps:0/2", "/s/model/entry:0/2", "/s/model/ps:0/3", // ps:0 twice: listed once
		"/s/modelx/ps:0/1", // a sibling whose name starts with "model"
		"/s/model",         // the parent itself is not a child
	} {
		c.set(p, nil, nil)
	}
	tests := []struct {
		parent string
		want   []string
	}{
		{"/s", []string{"model", "modelx"}},
		{"/s/model", []string{"ps:0", "entry:0"}},
		{"/s/model/ps:0", []string{"2", "3"}},
		{"/s/mod", nil},
		{"/none", nil},
	}
	for _, tc := range tests {
		if got := c.children(tc.parent); !slices.Equal(got, tc.want) {
			t.Errorf("children(%s) = %v, want %v", tc.parent, got, tc.want)
		}
	}
}
