package ps

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	pspb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/ps"
	"github.com/monolith-go/monolith/internal/leakcheck"
)

// The store passes a model's lookups and applies to the router, the dimension taken from the
// buffers, the update stamped with its clock; empty batches send nothing; buffers that are not a
// whole number of rows are refused, naming the table.
func TestRouterStore(t *testing.T) {
	leakcheck.Check(t)
	servers := startServers(t, 2, Config{Tables: []*pspb.TableConfig{sgdTable("t", 2, 1)}})
	stamp := time.Unix(1700000000, 0)
	s := RouterStore{Router: newRouter(t, servers, RouterConfig{}), Now: func() time.Time { return stamp }}
	ctx := context.Background()

	// SGD at rate 1 from zeros: an entry is minus its summed gradients.
	if err := s.Apply(ctx, "t", []int64{3, -2, 3}, []float32{1, 2, 3, 4, 5, 6}, 1, nil); err != nil {
		t.Fatal(err)
	}
	out := make([]float32, 6)
	if err := s.Lookup(ctx, "t", []int64{3, -2, 7}, out); err != nil {
		t.Fatal(err)
	}
	if want := []float32{-6, -8, -3, -4, 0, 0}; !slices.Equal(out, want) {
		t.Fatalf("lookup %v, want %v", out, want)
	}
	stats, err := s.Router.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range stats {
		if got := st.GetTables()[0].GetMaxUpdateTsSec(); got != stamp.Unix() {
			t.Errorf("ps %d: update time %d, want %d", i, got, stamp.Unix())
		}
	}

	// Nothing is sent for an empty batch: a store over a server that is gone still answers.
	gone, err := NewRouter(RouterConfig{Addrs: []string{"127.0.0.1:1"}, CallTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer gone.Close()
	empty := RouterStore{Router: gone}
	if err := empty.Lookup(ctx, "t", nil, nil); err != nil {
		t.Errorf("empty lookup: %v", err)
	}
	if err := empty.Apply(ctx, "t", nil, nil, 1, nil); err != nil {
		t.Errorf("empty apply: %v", err)
	}

	tests := []struct {
		name string
		call func() error
		msg  string
	}{
		{"lookup", func() error { return s.Lookup(ctx, "t", []int64{1, 2}, make([]float32, 3)) }, `lookup in table "t": 3 output floats for 2 ids`},
		{"apply", func() error { return s.Apply(ctx, "t", []int64{1, 2}, make([]float32, 5), 1, nil) }, `apply to table "t": 5 gradient floats for 2 ids`},
		{"unknown table", func() error { return s.Lookup(ctx, "nope", []int64{1}, make([]float32, 2)) }, `unknown table "nope"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v, want an error containing %q", err, tc.msg)
			}
		})
	}
}
