package zk_test

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkfake"
)

// vanishing deletes path right after its parent's children are listed: a node removed while the
// tree is read.
type vanishing struct {
	zk.Client
	path string
}

func (v vanishing) Children(ctx context.Context, p string) ([]string, error) {
	kids, err := v.Client.Children(ctx, p)
	if err == nil && p == zk.Parent(v.path) {
		err = v.Client.Delete(ctx, v.path, zk.DeleteOptions{})
	}
	return kids, err
}

// failing fails every Get of path.
type failing struct {
	zk.Client
	path string
}

var errBroken = errors.New("broken")

func (f failing) Get(ctx context.Context, p string) ([]byte, zk.Stat, error) {
	if p == f.path {
		return nil, zk.Stat{}, errBroken
	}
	return f.Client.Get(ctx, p)
}

func TestReadTree(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := zkfake.NewServer().Client()
	defer c.Close()
	for p, data := range map[string]string{"/a/b": "1", "/a/c/d": "2", "/a/e": ""} {
		if _, err := c.Create(ctx, p, []byte(data), zk.CreateOptions{MakePath: true}); err != nil {
			t.Fatal(err)
		}
	}
	all := map[string]string{"/a": "", "/a/b": "1", "/a/c": "", "/a/c/d": "2", "/a/e": ""}
	for _, tc := range []struct {
		name   string
		client zk.Client
		root   string
		want   map[string]string
	}{
		{"subtree", c, "/a", all},
		{"root", c, "/", map[string]string{"/": "", "/a": "", "/a/b": "1", "/a/c": "", "/a/c/d": "2", "/a/e": ""}},
		{"leaf", c, "/a/b", map[string]string{"/a/b": "1"}},
		{"missing root", c, "/x", map[string]string{}},
		// Last: it deletes /a/e.
		{"node deleted while read", vanishing{c, "/a/e"}, "/a", map[string]string{"/a": "", "/a/b": "1", "/a/c": "", "/a/c/d": "2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := zk.ReadTree(ctx, tc.client, tc.root)
			if err != nil || !maps.Equal(got, tc.want) {
				t.Fatalf("ReadTree(%s) = %v, %v; want %v", tc.root, got, err, tc.want)
			}
		})
	}
	t.Run("error names the path", func(t *testing.T) {
		_, err := zk.ReadTree(ctx, failing{c, "/a/c"}, "/a")
		if !errors.Is(err, errBroken) || err.Error() != "read tree /a/c: broken" {
			t.Fatalf("ReadTree error %v", err)
		}
	})
}
