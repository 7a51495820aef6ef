package zkreal

import (
	"context"
	"testing"

	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zktest"
)

// TestEmptyNodesHoldEmptyData: every node the client writes without data holds b"" (length 0 in
// the GetData reply), as kazoo writes it, never "no data" (length -1, which kazoo reads as None).
// The reading side is a plain go-zookeeper connection, which decodes length -1 as a nil slice and
// length 0 as an empty, non-nil one.
func TestEmptyNodesHoldEmptyData(t *testing.T) {
	srv := zktest.Start(t)
	c := connect(t, srv, Options{})
	raw, _ := srv.Connect(t, sessionTimeout)
	ctx := tctx(t)

	tests := []struct {
		name  string
		write func(ctx context.Context) error
		read  []string // nodes that must hold b""
	}{
		{"create nil", func(ctx context.Context) error {
			_, err := c.Create(ctx, "/create_nil", nil, zk.CreateOptions{})
			return err
		}, []string{"/create_nil"}},
		{"create empty", func(ctx context.Context) error {
			_, err := c.Create(ctx, "/create_empty", []byte{}, zk.CreateOptions{})
			return err
		}, []string{"/create_empty"}},
		{"create makepath parents", func(ctx context.Context) error {
			_, err := c.Create(ctx, "/mk/a/b/leaf", []byte("x"), zk.CreateOptions{MakePath: true})
			return err
		}, []string{"/mk", "/mk/a", "/mk/a/b"}},
		{"ephemeral sequence nil", func(ctx context.Context) error {
			_, err := c.Create(ctx, "/seq/n-", nil, zk.CreateOptions{MakePath: true, Ephemeral: true, Sequence: true})
			return err
		}, []string{"/seq", "/seq/n-0000000000"}},
		{"ensure path", func(ctx context.Context) error {
			return c.EnsurePath(ctx, "/ensure/x/y")
		}, []string{"/ensure", "/ensure/x", "/ensure/x/y"}},
		{"set nil", func(ctx context.Context) error {
			if _, err := c.Create(ctx, "/set_nil", []byte("full"), zk.CreateOptions{}); err != nil {
				return err
			}
			_, err := c.Set(ctx, "/set_nil", nil, zk.AnyVersion)
			return err
		}, []string{"/set_nil"}},
		{"register ephemeral nil", func(ctx context.Context) error {
			return c.RegisterEphemeral(ctx, "/reg/a", nil)
		}, []string{"/reg", "/reg/a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.write(ctx); err != nil {
				t.Fatal(err)
			}
			for _, p := range tt.read {
				data, st, err := raw.Get(p)
				if err != nil {
					t.Fatalf("get %s: %v", p, err)
				}
				if data == nil || len(data) != 0 || st.DataLength != 0 {
					t.Errorf("%s holds %#v (nil: %v, stat length %d), want b\"\" (length 0)", p, data, data == nil, st.DataLength)
				}
			}
		})
	}
	// What the client reads back through its own Get is b"" too.
	data, _, err := c.Get(ctx, "/ensure/x")
	if err != nil || data == nil {
		t.Fatalf("Get of an ensured node: %#v, %v", data, err)
	}
}
