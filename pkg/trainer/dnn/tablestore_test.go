package dnn

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	initializerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/initializer"
	optimizerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/optimizer"
	"github.com/monolith-go/monolith/pkg/embedding"
	"github.com/monolith-go/monolith/pkg/embedding/initializer"
	"github.com/monolith-go/monolith/pkg/embedding/optimizer"
	"github.com/monolith-go/monolith/pkg/errkind"
	"google.golang.org/protobuf/proto"
)

// newTable is an embedding table with the reference's Adagrad (initial accumulator 0.1) and
// random uniform entries in [-0.05, 0.05) drawn from a generator of its own seeded by seed; one
// worker, so that entries are created in the same order every run.
func newTable(t testing.TB, dim int, seed uint32) *embedding.Table {
	t.Helper()
	opt, err := optimizer.New(&optimizerpb.OptimizerConfig{Type: &optimizerpb.OptimizerConfig_Adagrad{
		Adagrad: &optimizerpb.AdagradOptimizerConfig{InitialAccumulatorValue: proto.Float32(0.1)}}}, dim)
	if err != nil {
		t.Fatal(err)
	}
	init, err := initializer.NewWithGenerator(&initializerpb.InitializerConfig{Type: &initializerpb.InitializerConfig_RandomUniform{
		RandomUniform: &initializerpb.RandomUniformInitializerConfig{}}}, dim, initializer.NewGenerator(seed))
	if err != nil {
		t.Fatal(err)
	}
	tab, err := embedding.New(embedding.Config{Dim: dim, Optimizer: opt, Initializer: init, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// newTableStore has a table per feature.
func newTableStore(t testing.TB, features []Feature) *TableStore {
	t.Helper()
	tables := map[string]*embedding.Table{}
	for i, f := range features {
		name := f.Table
		if name == "" {
			name = f.Name
		}
		tables[name] = newTable(t, f.Dim, uint32(i+1))
	}
	s, err := NewTableStore(tables)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The store passes lookups and applies to the named table (a twin table driven directly ends up
// the same), stamps updates with its clock, and names the table in its errors.
func TestTableStore(t *testing.T) {
	ctx := context.Background()
	s, err := NewTableStore(map[string]*embedding.Table{"t": newTable(t, 3, 7)})
	if err != nil {
		t.Fatal(err)
	}
	s.now = func() time.Time { return time.Unix(1700000000, 0) }
	twin := newTable(t, 3, 7)
	ids := []int64{5, 9, 5, 1 << 50}
	out := make([]float32, 12)
	if err := s.Lookup(ctx, "t", ids, out); err != nil || slices.ContainsFunc(out, func(v float32) bool { return v != 0 }) {
		t.Fatalf("lookup of missing ids: %v, %v; want zeros", out, err)
	}
	grads := []float32{1, 2, 3, -1, 0.5, 0, 0.25, 0.25, 0.25, 4, 4, 4}
	lr := []float32{0.1}
	for step := int64(1); step <= 3; step++ {
		if err := s.Apply(ctx, "t", ids, grads, step, lr); err != nil {
			t.Fatal(err)
		}
		if err := twin.Apply(ids, grads, lr, step, 1700000000); err != nil {
			t.Fatal(err)
		}
	}
	want := make([]float32, 12)
	if _, err := twin.Lookup(ids, want); err != nil {
		t.Fatal(err)
	}
	if err := s.Lookup(ctx, "t", ids, out); err != nil || !slices.Equal(out, want) {
		t.Errorf("after 3 applies: %v, %v; the twin table holds %v", out, err, want)
	}
	if ts := s.Table("t").MaxUpdateTsSec(); ts != 1700000000 {
		t.Errorf("update time %d, want the store clock's 1700000000", ts)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	tests := []struct {
		name string
		call func() error
		kind errkind.Kind
		want string
	}{
		{"unknown table lookup", func() error { return s.Lookup(ctx, "u", ids, out) }, errkind.Value, `no table "u"`},
		{"unknown table apply", func() error { return s.Apply(ctx, "u", ids, grads, 1, lr) }, errkind.Value, `no table "u"`},
		{"short buffer", func() error { return s.Lookup(ctx, "t", ids, out[:5]) }, errkind.Unknown, `table "t"`},
		{"short gradient", func() error { return s.Apply(ctx, "t", ids, grads[:3], 1, lr) }, errkind.Unknown, `table "t"`},
		{"canceled", func() error { return s.Apply(canceled, "t", ids, grads, 1, lr) }, errkind.Unknown, "context canceled"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if err == nil || !strings.Contains(err.Error(), tc.want) || (tc.kind != errkind.Unknown && errkind.Of(err) != tc.kind) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
	if _, err := NewTableStore(map[string]*embedding.Table{"x": nil}); err == nil {
		t.Error("NewTableStore took a nil table")
	}
}
