package ps

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pspb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/ps"
	hashtablepb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table"
	initializerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/initializer"
	optimizerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/optimizer"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/embedding/initializer"
	"github.com/monolith-go/monolith/pkg/errkind"
)

func TestTableConfigErrors(t *testing.T) {
	ok := sgdTable("slot_1", 8, 0.1)
	with := func(f func(c *pspb.TableConfig)) *pspb.TableConfig {
		c := proto.Clone(ok).(*pspb.TableConfig)
		f(c)
		return c
	}
	seg := func(c *pspb.TableConfig) *hashtablepb.EntryConfig_Segment { return c.Config.EntryConfig.Segments[0] }
	tests := []struct {
		name string
		cfg  *pspb.TableConfig
		want string // "" when valid
	}{
		{name: "valid", cfg: ok},
		{name: "two segments", cfg: with(func(c *pspb.TableConfig) {
			c.Config.EntryConfig.Segments = append(c.Config.EntryConfig.Segments, proto.Clone(seg(c)).(*hashtablepb.EntryConfig_Segment))
		})},
		{name: "missing", cfg: nil, want: "table config: missing"},
		{name: "empty name", cfg: with(func(c *pspb.TableConfig) { c.Name = "" }), want: `table "": a name is`},
		{name: "slash in name", cfg: with(func(c *pspb.TableConfig) { c.Name = "a/b" }), want: `table "a/b": a name is`},
		{name: "dot dot", cfg: with(func(c *pspb.TableConfig) { c.Name = ".." }), want: `table "..": a name is`},
		{name: "no config", cfg: with(func(c *pspb.TableConfig) { c.Config = nil }), want: `table "slot_1": no EmbeddingHashTableConfig`},
		{name: "zero dim", cfg: with(func(c *pspb.TableConfig) { seg(c).DimSize = proto.Int32(0) }), want: `table "slot_1": embedding table config: segment 0: dim_size 0`},
		{name: "huge dim", cfg: with(func(c *pspb.TableConfig) { seg(c).DimSize = proto.Int32(MaxDim + 1) }), want: `table "slot_1": dimension 65537, want at most 65536`},
		{name: "no optimizer", cfg: with(func(c *pspb.TableConfig) { seg(c).OptConfig = nil }), want: `table "slot_1": embedding table config: init or opt config is missing`},
		{name: "unset initializer", cfg: with(func(c *pspb.TableConfig) { seg(c).InitConfig = &initializerpb.InitializerConfig{} }), want: `table "slot_1": `},
		{name: "unknown filter", cfg: with(func(c *pspb.TableConfig) { c.Filter = &pspb.FilterConfig{Type: 9} }), want: `table "slot_1": unknown filter type 9`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newTable(tc.cfg, 1, initializer.Shared, reserveBudget{})
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || errkind.Of(err) != errkind.Value {
				t.Fatalf("newTable = %v, want a Value error with %q", err, tc.want)
			}
		})
	}
}

func TestDefaultLearningRate(t *testing.T) {
	tests := []struct {
		name string
		cfg  *optimizerpb.OptimizerConfig
		want float32
	}{
		{name: "sgd set", cfg: &optimizerpb.OptimizerConfig{Type: &optimizerpb.OptimizerConfig_Sgd{Sgd: &optimizerpb.SgdOptimizerConfig{LearningRate: proto.Float32(0.25)}}}, want: 0.25},
		{name: "sgd default", cfg: &optimizerpb.OptimizerConfig{Type: &optimizerpb.OptimizerConfig_Sgd{Sgd: &optimizerpb.SgdOptimizerConfig{}}}, want: 0.01},
		{name: "adagrad default", cfg: &optimizerpb.OptimizerConfig{Type: &optimizerpb.OptimizerConfig_Adagrad{Adagrad: &optimizerpb.AdagradOptimizerConfig{}}}, want: 0.001},
		{name: "none set", cfg: &optimizerpb.OptimizerConfig{}, want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := defaultLearningRate(tc.cfg); got != tc.want {
				t.Fatalf("defaultLearningRate = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSegments: a table of two segments takes one learning rate per segment, each its
// optimizer's by default.
func TestSegments(t *testing.T) {
	leakcheck.Check(t)
	tb := sgdTable("emb", 2, 0.5)
	two := proto.Clone(tb.Config.EntryConfig.Segments[0]).(*hashtablepb.EntryConfig_Segment)
	two.OptConfig = sgdTable("x", 2, 0.25).Config.EntryConfig.Segments[0].OptConfig
	tb.Config.EntryConfig.Segments = append(tb.Config.EntryConfig.Segments, two)
	srv := startServers(t, 1, Config{Tables: []*pspb.TableConfig{tb}})[0]
	c := dial(t, srv.Addr(), ClientConfig{})
	ctx := context.Background()
	grad := []float32{1, 1, 1, 1}
	if err := c.ApplyGradients(ctx, "emb", 4, []int64{7}, grad, Update{GlobalStep: 1}); err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyGradients(ctx, "emb", 4, []int64{8}, grad, Update{GlobalStep: 1, LearningRates: []float32{1, 2}}); err != nil {
		t.Fatal(err)
	}
	out := make([]float32, 8)
	if _, err := c.Lookup(ctx, "emb", 4, []int64{7, 8}, out); err != nil {
		t.Fatal(err)
	}
	want := []float32{-0.5, -0.5, -0.25, -0.25, -1, -1, -2, -2}
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("embeddings %v, want %v (SGD from zeros at each segment's rate)", out, want)
	}
	err := c.ApplyGradients(ctx, "emb", 4, []int64{8}, grad, Update{LearningRates: []float32{1}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `table "emb": 1 learning rates, the table takes 2 (one per segment)`) {
		t.Fatalf("one rate for two segments: %v", err)
	}
}

func TestNewServerConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{name: "no servers", cfg: Config{NumPS: 0}, want: "num_ps 0"},
		{name: "index out of range", cfg: Config{Index: 2, NumPS: 2}, want: "index 2, want 0..1"},
		{name: "negative index", cfg: Config{Index: -1, NumPS: 2}, want: "index -1"},
		{name: "negative limit", cfg: Config{NumPS: 1, MaxIDsPerRequest: -1}, want: "negative limit"},
		{name: "message limit past gRPC's", cfg: Config{NumPS: 1, MaxMessageBytes: 1 << 40}, want: "max_message_bytes 1099511627776, want at most 4294901759 (MaxMessageBytes"},
		{name: "bad table", cfg: Config{NumPS: 1, Tables: []*pspb.TableConfig{sgdTable("a b", 4, 1)}}, want: `table "a b"`},
		{name: "bad table config", cfg: Config{NumPS: 1, Tables: []*pspb.TableConfig{sgdTable("a", 0, 1)}}, want: `table "a": embedding table config`},
		{name: "table twice", cfg: Config{NumPS: 1, Tables: []*pspb.TableConfig{sgdTable("a", 4, 1), sgdTable("a", 8, 1)}}, want: `table "a" is configured twice`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			s, err := NewServer(tc.cfg)
			if err == nil {
				s.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewServer = %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestRequestErrors checks every RPC's argument errors against a served server: the code, and a
// message naming what is wrong.
func TestRequestErrors(t *testing.T) {
	leakcheck.Check(t)
	srv := startServers(t, 1, Config{Tables: []*pspb.TableConfig{sgdTable("emb", 4, 0.1)}, MaxIDsPerRequest: 100, MaxMessageBytes: 1000})[0]
	c := dial(t, srv.Addr(), ClientConfig{})
	rpc := c.RPC()
	ids := func(n int) []byte { return int64Bytes(make([]int64, n)) }
	ctx := context.Background()
	tests := []struct {
		name string
		call func() error
		code codes.Code
		want string
	}{
		{name: "lookup unknown table", code: codes.InvalidArgument, want: `ps 0: unknown table "nope" (tables: ["emb"])`,
			call: func() error { _, err := rpc.Lookup(ctx, &pspb.LookupRequest{Table: "nope", Dim: 4}); return err }},
		{name: "lookup wrong dim", code: codes.InvalidArgument, want: `ps 0: table "emb" has dimension 4, the request says 8`,
			call: func() error { _, err := rpc.Lookup(ctx, &pspb.LookupRequest{Table: "emb", Dim: 8}); return err }},
		{name: "lookup partial id", code: codes.InvalidArgument, want: `table "emb": lookup ids: 7 bytes is not a whole number of int64 values`,
			call: func() error {
				_, err := rpc.Lookup(ctx, &pspb.LookupRequest{Table: "emb", Dim: 4, Ids: make([]byte, 7)})
				return err
			}},
		{name: "lookup too many ids", code: codes.ResourceExhausted, want: `lookup of 101 ids in table "emb" is over the limit of 100 ids per request (max_ids_per_request)`,
			call: func() error {
				_, err := rpc.Lookup(ctx, &pspb.LookupRequest{Table: "emb", Dim: 4, Ids: ids(101)})
				return err
			}},
		{name: "lookup too many bytes", code: codes.ResourceExhausted, want: `lookup of 50 ids in table "emb" is 1200 bytes, over the limit of 1000 bytes per message (max_message_bytes)`,
			call: func() error {
				_, err := rpc.Lookup(ctx, &pspb.LookupRequest{Table: "emb", Dim: 4, Ids: ids(50)})
				return err
			}},
		{name: "apply unknown table", code: codes.InvalidArgument, want: `unknown table "x"`,
			call: func() error {
				_, err := rpc.ApplyGradients(ctx, &pspb.ApplyGradientsRequest{Table: "x", Dim: 4})
				return err
			}},
		{name: "apply wrong dim", code: codes.InvalidArgument, want: `table "emb" has dimension 4, the request says 3`,
			call: func() error {
				_, err := rpc.ApplyGradients(ctx, &pspb.ApplyGradientsRequest{Table: "emb", Dim: 3})
				return err
			}},
		{name: "apply gradient count", code: codes.InvalidArgument, want: `table "emb": 4 gradient floats for 2 ids of dimension 4, want 8`,
			call: func() error {
				_, err := rpc.ApplyGradients(ctx, &pspb.ApplyGradientsRequest{Table: "emb", Dim: 4, Ids: ids(2), Grads: float32Bytes(make([]float32, 4))})
				return err
			}},
		{name: "apply learning rates", code: codes.InvalidArgument, want: `table "emb": 2 learning rates, the table takes 1 (one per segment)`,
			call: func() error {
				_, err := rpc.ApplyGradients(ctx, &pspb.ApplyGradientsRequest{Table: "emb", Dim: 4, Ids: ids(1), Grads: float32Bytes(make([]float32, 4)), LearningRates: []float32{1, 2}})
				return err
			}},
		{name: "apply too many ids", code: codes.ResourceExhausted, want: `apply of 101 ids in table "emb" is over the limit of 100 ids per request`,
			call: func() error {
				_, err := rpc.ApplyGradients(ctx, &pspb.ApplyGradientsRequest{Table: "emb", Dim: 4, Ids: ids(101), Grads: float32Bytes(make([]float32, 404))})
				return err
			}},
		{name: "create conflicting table", code: codes.FailedPrecondition, want: `table "emb" exists with another config`,
			call: func() error {
				_, err := rpc.CreateTables(ctx, &pspb.CreateTablesRequest{Tables: []*pspb.TableConfig{sgdTable("emb", 4, 0.2)}})
				return err
			}},
		{name: "create bad table", code: codes.InvalidArgument, want: `table "x": embedding table config: segment 0: dim_size -1`,
			call: func() error {
				_, err := rpc.CreateTables(ctx, &pspb.CreateTablesRequest{Tables: []*pspb.TableConfig{sgdTable("x", -1, 0.2)}})
				return err
			}},
		{name: "save unknown table", code: codes.InvalidArgument, want: `unknown table "x"`,
			call: func() error {
				_, err := rpc.Save(ctx, &pspb.SaveRequest{Dir: t.TempDir(), Tables: []string{"x"}})
				return err
			}},
		{name: "save without dir", code: codes.InvalidArgument, want: `save: no directory`,
			call: func() error { _, err := rpc.Save(ctx, &pspb.SaveRequest{}); return err }},
		{name: "restore missing dump", code: codes.NotFound, want: `no dump of table "emb"`,
			call: func() error { _, err := rpc.Restore(ctx, &pspb.RestoreRequest{Dir: t.TempDir()}); return err }},
		{name: "barrier without name", code: codes.InvalidArgument, want: `barrier: no name`,
			call: func() error { _, err := rpc.Barrier(ctx, &pspb.BarrierRequest{Count: 1}); return err }},
		{name: "barrier count", code: codes.InvalidArgument, want: `barrier "b": count 0`,
			call: func() error { _, err := rpc.Barrier(ctx, &pspb.BarrierRequest{Name: "b"}); return err }},
		{name: "arrive worker out of range", code: codes.InvalidArgument, want: `barrier "b": worker 2, want 0..1`,
			call: func() error {
				_, err := rpc.Barrier(ctx, &pspb.BarrierRequest{Name: "b", Worker: 2, Count: 2})
				return err
			}},
		{name: "wait worker out of range", code: codes.InvalidArgument, want: `Index [0] must be non-negative and less than capacity [2]`,
			call: func() error {
				_, err := rpc.Barrier(ctx, &pspb.BarrierRequest{Op: pspb.BarrierRequest_WAIT, Name: "w", Worker: 0, Count: 2})
				return err
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v\nwant code %v with %q", err, tc.code, tc.want)
			}
		})
	}
}

func TestCreateTables(t *testing.T) {
	leakcheck.Check(t)
	srv := startServers(t, 1, Config{Tables: []*pspb.TableConfig{sgdTable("a", 4, 0.1)}})[0]
	c := dial(t, srv.Addr(), ClientConfig{})
	ctx := context.Background()
	resp, err := c.RPC().CreateTables(ctx, &pspb.CreateTablesRequest{Tables: []*pspb.TableConfig{sgdTable("a", 4, 0.1), adagradTable("b", 8)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetCreated(); len(got) != 1 || got[0] != "b" {
		t.Fatalf("created %v, want [b] (a exists with the same config)", got)
	}
	h, err := c.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(h.GetTables(), ","); got != "a,b" {
		t.Fatalf("tables %q, want a,b", got)
	}
	out := make([]float32, 8)
	if _, err := c.Lookup(ctx, "b", 8, []int64{1}, out); err != nil {
		t.Fatal(err)
	}
}

// TestInitGeneratorPerTable: with a generator per table (Config.InitGenerator), a table's new
// entries start with the same values whatever the other tables drew before them, so concurrent
// updates of several tables repeat; with the process's shared generator they depend on the order.
func TestInitGeneratorPerTable(t *testing.T) {
	ids := []int64{1, 2, 3, 4, 5, 6}
	const dim = 4
	grads := make([]float32, len(ids)*dim)
	values := func(gen func(string) *initializer.Generator, order ...string) map[string][]float32 {
		s, err := NewServer(Config{NumPS: 1, Tables: []*pspb.TableConfig{adagradTable("a", dim), adagradTable("b", dim)}, InitGenerator: gen})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		out := map[string][]float32{}
		for _, name := range order {
			tb, err := s.table(name, dim)
			if err != nil {
				t.Fatal(err)
			}
			if err := tb.t.Apply(ids, grads, tb.lr, 1, 1); err != nil {
				t.Fatal(err)
			}
			out[name] = make([]float32, len(ids)*dim)
			if _, err := tb.t.Lookup(ids, out[name]); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	tests := []struct {
		name string
		gen  func(string) *initializer.Generator
		same bool
	}{
		{"a generator per table", initializer.PerTable, true},
		{"the shared generator", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ab, ba := values(tc.gen, "a", "b"), values(tc.gen, "b", "a")
			for _, name := range []string{"a", "b"} {
				if same := slices.Equal(ab[name], ba[name]); same != tc.same {
					t.Errorf("table %s: a then b %v, b then a %v: same %v, want %v", name, ab[name], ba[name], same, tc.same)
				}
			}
		})
	}
}
