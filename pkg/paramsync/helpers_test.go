package paramsync

import (
	"context"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	initializerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/initializer"
	optimizerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/optimizer"
	tfframework "github.com/monolith-go/monolith/gen/pb/tensorflow/core/framework"
	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	"github.com/monolith-go/monolith/pkg/embedding"
	"github.com/monolith-go/monolith/pkg/modelserver/psshard"
	"github.com/monolith-go/monolith/pkg/modelserver/tensors"
	"github.com/monolith-go/monolith/pkg/ps"
)

func tctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// tableSource is a Source over embedding tables of this process (SGD, learning rate 1, zeros at
// creation: an apply of gradient -g adds g), with touched tracking on.
type tableSource struct {
	tables map[string]*embedding.Table
}

func newSource(t testing.TB, dims map[string]int) *tableSource {
	t.Helper()
	s := &tableSource{tables: map[string]*embedding.Table{}}
	for name, dim := range dims {
		c := ps.NewTableConfig(name, dim,
			&optimizerpb.OptimizerConfig{Type: &optimizerpb.OptimizerConfig_Sgd{Sgd: &optimizerpb.SgdOptimizerConfig{LearningRate: proto.Float32(1)}}},
			&initializerpb.InitializerConfig{Type: &initializerpb.InitializerConfig_Zeros{Zeros: &initializerpb.ZerosInitializerConfig{}}})
		cfg, _, err := embedding.FromProto(c.GetConfig())
		if err != nil {
			t.Fatal(err)
		}
		tb, err := embedding.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		tb.TrackTouched(true)
		s.tables[name] = tb
	}
	return s
}

func (s *tableSource) SyncTables() map[string]int {
	out := map[string]int{}
	for n, tb := range s.tables {
		out[n] = tb.Dim()
	}
	return out
}

func (s *tableSource) TakeTouched(table string, max int, fn func([]int64, []float32) error) (int, error) {
	return s.tables[table].TakeTouched(max, fn)
}

func (s *tableSource) Retouch(table string, ids []int64) { s.tables[table].Retouch(ids) }

// add adds v to every value of ids' embeddings in table.
func (s *tableSource) add(t testing.TB, table string, ids []int64, v float32) {
	t.Helper()
	tb := s.tables[table]
	g := make([]float32, len(ids)*tb.Dim())
	for i := range g {
		g[i] = -v
	}
	if err := tb.Apply(ids, g, []float32{1}, 1, 100); err != nil {
		t.Fatal(err)
	}
}

// embeddings is what table holds for ids, by id.
func (s *tableSource) embeddings(t testing.TB, table string, ids []int64) map[int64][]float32 {
	t.Helper()
	tb := s.tables[table]
	out := make([]float32, len(ids)*tb.Dim())
	if _, err := tb.Lookup(ids, out); err != nil {
		t.Fatal(err)
	}
	m := map[int64][]float32{}
	for k, id := range ids {
		m[id] = out[k*tb.Dim() : (k+1)*tb.Dim()]
	}
	return m
}

func (s *tableSource) pending(table string) int { return s.tables[table].TouchedPending() }

// fakeTarget is a serving PS replica on loopback: it records what the assigns set and answers as
// psshard does, or fails as the test says.
type fakeTarget struct {
	servingapis.UnimplementedPredictionServiceServer
	addr string
	gs   *grpc.Server

	mu       sync.Mutex
	got      map[string]map[int64][]float32 // table -> id -> embedding
	requests []int                          // ids per request taken
	models   map[string]bool                // "<model>/<signature>" seen
	fail     []codes.Code                   // answers of the next requests, before OK ones
	failAll  codes.Code                     // when not OK, every request fails so
	hang     chan struct{}                  // when set, requests wait until it closes (or their deadline)
	arrived  chan struct{}                  // gets a value when a request arrives, if it has room
}

func startTarget(t testing.TB) *fakeTarget {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeTarget{addr: lis.Addr().String(), gs: grpc.NewServer(), got: map[string]map[int64][]float32{}, models: map[string]bool{}, arrived: make(chan struct{}, 1)}
	servingapis.RegisterPredictionServiceServer(f.gs, f)
	go f.gs.Serve(lis)
	t.Cleanup(f.gs.Stop)
	return f
}

// downAddr is a loopback address nothing listens on.
func downAddr(t testing.TB) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

func (f *fakeTarget) Predict(ctx context.Context, req *servingapis.PredictRequest) (*servingapis.PredictResponse, error) {
	select {
	case f.arrived <- struct{}{}:
	default:
	}
	f.mu.Lock()
	f.models[req.GetModelSpec().GetName()+"/"+req.GetModelSpec().GetSignatureName()] = true
	hang := f.hang
	code := f.failAll
	if code == codes.OK && len(f.fail) > 0 {
		code, f.fail = f.fail[0], f.fail[1:]
	}
	f.mu.Unlock()
	if hang != nil {
		select {
		case <-hang:
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	if code != codes.OK {
		return nil, status.Errorf(code, "fake target fails with %v", code)
	}
	out := map[string]*tfframework.TensorProto{}
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for key, tp := range req.GetInputs() {
		table, ok := strings.CutSuffix(key, psshard.AssignIDSuffix)
		if !ok {
			continue
		}
		ids, err := tensors.Int64s(tp)
		if err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		vals, err := tensors.Float32s(req.GetInputs()[table+psshard.AssignValueSuffix])
		if err != nil || len(ids) == 0 && len(vals) != 0 || len(ids) > 0 && len(vals)%len(ids) != 0 {
			return nil, status.Errorf(codes.InvalidArgument, "values of %s: %v", table, err)
		}
		if f.got[table] == nil {
			f.got[table] = map[int64][]float32{}
		}
		for k, id := range ids {
			dim := len(vals) / len(ids)
			f.got[table][id] = slices.Clone(vals[k*dim : (k+1)*dim])
		}
		n += len(ids)
		out[table+psshard.AssignResultSuffix] = &tfframework.TensorProto{Dtype: tfframework.DataType_DT_INT32, IntVal: []int32{int32(len(ids))}}
	}
	f.requests = append(f.requests, n)
	return &servingapis.PredictResponse{Outputs: out}, nil
}

// table is a copy of what the target holds for table.
func (f *fakeTarget) table(name string) map[int64][]float32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.got[name])
}

func (f *fakeTarget) requestSizes() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.requests)
}

func (f *fakeTarget) set(fn func(f *fakeTarget)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func ids(lo, hi int64) []int64 {
	var out []int64
	for id := lo; id < hi; id++ {
		out = append(out, id)
	}
	return out
}

// newPusher returns a pusher closed when the test ends.
func newPusher(t testing.TB, cfg Config) *Pusher {
	t.Helper()
	if cfg.Model == "" {
		cfg.Model = "demo"
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// sameEmbeddings reports the first id whose embedding differs between got and want.
func sameEmbeddings(t testing.TB, what string, got, want map[int64][]float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d ids, want %d", what, len(got), len(want))
	}
	for id, w := range want {
		if g, ok := got[id]; !ok || !slices.Equal(g, w) {
			t.Errorf("%s: id %d is %v, want %v", what, id, g, w)
			return
		}
	}
}
