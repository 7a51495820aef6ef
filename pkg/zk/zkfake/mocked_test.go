package zkfake

import (
	"testing"

	"github.com/monolith-go/monolith/pkg/zk"
)

// TestMockedZKClient ports mocked_zkclient_test.py (MockedZKClientTest). The reference runs its
// cases on one shared client and logs the NoNode/NodeExists errors it provokes; here each case
// has a fresh client and asserts those errors.
func TestMockedZKClient(t *testing.T) {
	const path = "/monolith/zk/data"
	tests := []struct {
		name string
		run  func(t *testing.T, c *Fake)
	}{
		{"test_create", func(t *testing.T, c *Fake) {
			if got := mustCreate(t, c, path, "", zk.CreateOptions{MakePath: true}); got != path {
				t.Fatalf("Create = %q, want %q", got, path)
			}
			_, err := c.Create(bg, path, nil, zk.CreateOptions{MakePath: true})
			wantErr(t, err, zk.ErrNodeExists)
			_, err = c.Create(bg, "/other/zk/data", nil, zk.CreateOptions{})
			wantErr(t, err, zk.ErrNoNode)
		}},
		{"test_set_get", func(t *testing.T, c *Fake) {
			mustCreate(t, c, path, "", zk.CreateOptions{MakePath: true})
			data := []byte("hi, I am Fitz!")
			notExists := path + "/error"
			_, err := c.Set(bg, notExists, data, zk.AnyVersion)
			wantErr(t, err, zk.ErrNoNode)
			_, err = c.Set(bg, path, data, zk.AnyVersion)
			must(t, err)
			_, _, err = c.Get(bg, notExists)
			wantErr(t, err, zk.ErrNoNode)
			got, st, err := c.Get(bg, path)
			must(t, err)
			if string(got) != string(data) || st.Version != 1 || st.DataLength != int32(len(data)) {
				t.Fatalf("Get = %q %+v, want %q at version 1", got, st, data)
			}
		}},
		{"test_delete", func(t *testing.T, c *Fake) {
			mustCreate(t, c, path, "", zk.CreateOptions{MakePath: true})
			must(t, c.Delete(bg, path, zk.DeleteOptions{}))
			// The reference's delete is recursive by default; ours must be asked.
			wantErr(t, c.Delete(bg, "/monolith", zk.DeleteOptions{}), zk.ErrNotEmpty)
			must(t, c.Delete(bg, "/monolith", zk.DeleteOptions{Recursive: true}))
			st, err := c.Exists(bg, "/monolith")
			if err != nil || st != nil {
				t.Fatalf("Exists after delete = %v, %v", st, err)
			}
			wantErr(t, c.Delete(bg, "/monolith", zk.DeleteOptions{}), zk.ErrNoNode)
		}},
		{"test_data_watch", func(t *testing.T, c *Fake) {
			mustCreate(t, c, path, "", zk.CreateOptions{MakePath: true})
			var r recorder
			_, err := c.DataWatch(path, r.data("data"))
			must(t, err)
			wantCalls(t, &r, `data first data="" v0`)
		}},
		{"test_children_watch", func(t *testing.T, c *Fake) {
			var r recorder
			_, err := c.ChildrenWatch("/monolith/zk", r.children("zk"))
			must(t, err)
			wantCalls(t, &r, "zk first nil")
			mustCreate(t, c, path, "", zk.CreateOptions{MakePath: true})
			wantCalls(t, &r, "zk CREATED []", "zk CHILD [data]")
			_, err = c.DataWatch(path, r.data("data"))
			must(t, err)
			wantCalls(t, &r, `data first data="" v0`)
			mustCreate(t, c, "/monolith/zk/test", "123", zk.CreateOptions{})
			wantCalls(t, &r, "zk CHILD [data test]")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newClient(t)) })
	}
}
