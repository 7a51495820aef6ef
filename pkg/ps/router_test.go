package ps

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pspb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/ps"
	initializerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/initializer"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/embedding"
	"github.com/monolith-go/monolith/pkg/embedding/initializer"
)

// constTable is an Adagrad table whose entries start at 0.5 (deterministic, unlike random uniform).
func constTable(name string, dim int) *pspb.TableConfig {
	c := adagradTable(name, dim)
	c.Config.EntryConfig.Segments[0].InitConfig = &initializerpb.InitializerConfig{Type: &initializerpb.InitializerConfig_Constants{Constants: &initializerpb.ConstantsInitializerConfig{Constant: proto.Float32(0.5)}}}
	return c
}

// batch is a batch of n ids drawn from a pool of distinct ones (so ids repeat), negative ones
// included, with random gradients.
func batch(rng *rand.Rand, pool []int64, n, dim int) ([]int64, []float32) {
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = pool[rng.IntN(len(pool))]
	}
	grads := make([]float32, n*dim)
	for i := range grads {
		grads[i] = rng.Float32() - 0.5
	}
	return ids, grads
}

func idPool(rng *rand.Rand, n int) []int64 {
	pool := make([]int64, n)
	for i := range pool {
		pool[i] = int64(rng.Uint64()) // half of them negative
	}
	pool[0], pool[1] = -1, -7 // floormod, not Go's %, routes these
	return pool
}

// TestRouterMatchesOneTable runs the same batches through a Router over several servers and
// through one local table: every lookup agrees bit for bit, each id lives on server
// floormod(id, n) and nowhere else, and the servers' stats count the traffic.
func TestRouterMatchesOneTable(t *testing.T) {
	tests := []struct {
		name    string
		servers int
		table   *pspb.TableConfig
		chunk   int // the router's MaxIDsPerCall (0: default)
	}{
		{name: "2 servers sgd", servers: 2, table: sgdTable("emb", 8, 0.1)},
		{name: "3 servers adagrad", servers: 3, table: constTable("emb", 4)},
		{name: "2 servers small calls", servers: 2, table: constTable("emb", 4), chunk: 7},
		{name: "1 server", servers: 1, table: sgdTable("emb", 2, 0.5)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			ctx := context.Background()
			dim := dimOf(tc.table)
			servers := startServers(t, tc.servers, Config{Tables: []*pspb.TableConfig{tc.table}, Workers: 2})
			r := newRouter(t, servers, RouterConfig{MaxIDsPerCall: tc.chunk})
			local, err := newTable(tc.table, 1, initializer.Shared, reserveBudget{})
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			pool := idPool(rng, 300)
			for step := int64(1); step <= 5; step++ {
				ids, grads := batch(rng, pool, 500, dim)
				u := Update{GlobalStep: step, UpdateTimeSec: 1000 + step}
				if err := r.ApplyGradients(ctx, "emb", dim, ids, grads, u); err != nil {
					t.Fatal(err)
				}
				if err := local.t.Apply(ids, grads, local.lr, u.GlobalStep, u.UpdateTimeSec); err != nil {
					t.Fatal(err)
				}
				got := make([]float32, len(ids)*dim)
				want := make([]float32, len(ids)*dim)
				if _, err := r.Lookup(ctx, "emb", dim, ids, got); err != nil {
					t.Fatal(err)
				}
				if _, err := local.t.Lookup(ids, want); err != nil {
					t.Fatal(err)
				}
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("step %d: float %d (id %d) = %v through the router, %v in one table", step, i, ids[i/dim], got[i], want[i])
					}
				}
			}
			// Ids never updated read as zeros and are not inserted.
			unseen := []int64{123456789, -123456789}
			out := make([]float32, 2*dim)
			for i := range out {
				out[i] = 9
			}
			found, err := r.Lookup(ctx, "emb", dim, unseen, out)
			if err != nil || found != 0 {
				t.Fatalf("lookup of unseen ids: found %d, %v", found, err)
			}
			for _, v := range out {
				if v != 0 {
					t.Fatalf("unseen ids read %v, want zeros", out)
				}
			}
			// Each server holds exactly the ids floormod routes to it.
			perServer := make([]int, tc.servers)
			for _, id := range pool {
				if local.t.Contains(id) {
					perServer[embedding.Shard(id, tc.servers)]++
				}
			}
			stats, err := r.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for s, st := range stats {
				tb := st.GetTables()[0]
				if int(tb.GetEntries()) != perServer[s] {
					t.Errorf("ps %d holds %d entries, floormod routes %d to it", s, tb.GetEntries(), perServer[s])
				}
				if tb.GetApplies() == 0 || tb.GetLookups() == 0 || tb.GetApplyIds() == 0 {
					t.Errorf("ps %d stats count no traffic: %v", s, tb)
				}
			}
			for _, id := range pool[:20] {
				for s := 0; s < tc.servers; s++ {
					f, err := r.Client(s).Lookup(ctx, "emb", dim, []int64{id}, make([]float32, dim))
					if err != nil {
						t.Fatal(err)
					}
					if want := local.t.Contains(id) && embedding.Shard(id, tc.servers) == s; (f == 1) != want {
						t.Errorf("id %d on ps %d: found %d, want %v", id, s, f, want)
					}
				}
			}
		})
	}
}

// TestRouterSendsDistinctIDs checks that each server gets each distinct id once per call.
func TestRouterSendsDistinctIDs(t *testing.T) {
	leakcheck.Check(t)
	var (
		mu   sync.Mutex
		sent []int
	)
	count := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if l, ok := req.(*pspb.LookupRequest); ok {
			mu.Lock()
			sent = append(sent, len(l.GetIds())/8)
			mu.Unlock()
		}
		return handler(ctx, req)
	}
	servers := startServers(t, 2, Config{Tables: []*pspb.TableConfig{sgdTable("emb", 1, 1)}}, grpc.ChainUnaryInterceptor(count))
	r := newRouter(t, servers, RouterConfig{})
	ids := []int64{4, 5, 4, 4, -3, 5, 6, -3}
	if _, err := r.Lookup(context.Background(), "emb", 1, ids, make([]float32, len(ids))); err != nil {
		t.Fatal(err)
	}
	// Distinct: 4, 6 on ps 0; 5, -3 on ps 1.
	mu.Lock()
	defer mu.Unlock()
	if len(sent) != 2 || sent[0]+sent[1] != 4 || sent[0] != 2 {
		t.Fatalf("ids per call %v, want 2 and 2", sent)
	}
}

// TestRouterArgumentErrors checks the router's own checks.
func TestRouterArgumentErrors(t *testing.T) {
	if _, err := NewRouter(RouterConfig{}); err == nil || !strings.Contains(err.Error(), "no servers") {
		t.Fatalf("NewRouter without servers = %v", err)
	}
	r, err := NewRouter(RouterConfig{Addrs: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Lookup(context.Background(), "t", 4, []int64{1}, make([]float32, 3)); err == nil || !strings.Contains(err.Error(), "3 output floats for 1 ids of dimension 4") {
		t.Errorf("Lookup with a short buffer = %v", err)
	}
	if err := r.ApplyGradients(context.Background(), "t", 2, []int64{1}, make([]float32, 3), Update{}); err == nil || !strings.Contains(err.Error(), "3 gradient floats for 1 ids of dimension 2") {
		t.Errorf("ApplyGradients with bad gradients = %v", err)
	}
}

// TestDeadlineExceeded: a server that never answers gives the router DeadlineExceeded within the
// call timeout, naming the server.
func TestDeadlineExceeded(t *testing.T) {
	leakcheck.Check(t)
	release := make(chan struct{})
	block := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if strings.HasSuffix(info.FullMethod, "/Lookup") {
			<-release // blocked: ignores its context, as a stuck server does
		}
		return handler(ctx, req)
	}
	servers := startServers(t, 2, Config{Tables: []*pspb.TableConfig{sgdTable("emb", 4, 1)}}, grpc.ChainUnaryInterceptor(block))
	defer close(release) // before the servers stop (cleanups run after deferred calls)
	const timeout = 300 * time.Millisecond
	r := newRouter(t, servers, RouterConfig{CallTimeout: timeout})
	tests := []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
	}{
		{name: "router's call timeout", ctx: func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }},
		{name: "caller's deadline", ctx: func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), timeout/2)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := tc.ctx()
			defer cancel()
			start := time.Now()
			_, err := r.Lookup(ctx, "emb", 4, []int64{1, 2, 3}, make([]float32, 12))
			took := time.Since(start)
			if status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "lookup of") || !strings.Contains(err.Error(), servers[0].Addr()[:10]) {
				t.Fatalf("Lookup = %v, want DeadlineExceeded naming the server", err)
			}
			// The deadline is the bound; the margin is for a loaded machine.
			if took > timeout+2*time.Second {
				t.Fatalf("Lookup returned after %v, the deadline was %v", took, timeout)
			}
		})
	}
	// Other RPCs of the blocked server still answer.
	if _, err := r.Stats(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestKilledServer: a server stopped while a worker loops over lookups makes the loop fail with
// an error naming that server, within the call timeout.
func TestKilledServer(t *testing.T) {
	leakcheck.Check(t)
	servers := startServers(t, 2, Config{Tables: []*pspb.TableConfig{sgdTable("emb", 4, 1)}})
	const timeout = 2 * time.Second
	r := newRouter(t, servers, RouterConfig{CallTimeout: timeout})
	ids := make([]int64, 1000)
	for i := range ids {
		ids[i] = int64(i)
	}
	ctx := context.Background()
	if err := r.ApplyGradients(ctx, "emb", 4, ids, make([]float32, 4000), Update{GlobalStep: 1}); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	running := make(chan struct{})
	go func() {
		out := make([]float32, 4000)
		for i := 0; ; i++ {
			if i == 3 {
				close(running)
			}
			if _, err := r.Lookup(ctx, "emb", 4, ids, out); err != nil {
				errc <- err
				return
			}
		}
	}()
	<-running
	killed := time.Now()
	servers[1].Kill()
	var err error
	select {
	case err = <-errc:
	case <-time.After(timeout + 5*time.Second):
		t.Fatalf("lookups still run %v after the server was killed", time.Since(killed))
	}
	if took := time.Since(killed); took > timeout+2*time.Second {
		t.Errorf("the error came %v after the kill, the call timeout is %v", took, timeout)
	}
	if c := status.Code(err); c != codes.Unavailable {
		t.Errorf("error code %v, want Unavailable: %v", c, err)
	}
	if !strings.Contains(err.Error(), "ps 1 ("+servers[1].Addr()+")") {
		t.Errorf("error %q does not name ps 1 and its address", err)
	}
	// Later calls fail at once the same way; the live server still answers.
	_, err = r.Lookup(ctx, "emb", 4, ids, make([]float32, 4000))
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "ps 1") {
		t.Errorf("lookup after the kill = %v", err)
	}
	if _, err := r.Client(0).Health(ctx); err != nil {
		t.Errorf("ps 0: %v", err)
	}
}

// TestLookupDims: lookups through the router scatter rows of every size (the array-copy sizes
// and others) to every position of a batch with repeated ids.
func TestLookupDims(t *testing.T) {
	leakcheck.Check(t)
	var tables []*pspb.TableConfig
	dims := []int{1, 3, 8, 16, 32, 64}
	for _, d := range dims {
		tables = append(tables, sgdTable(fmt.Sprintf("d%d", d), d, 1))
	}
	servers := startServers(t, 3, Config{Tables: tables})
	r := newRouter(t, servers, RouterConfig{})
	ctx := context.Background()
	ids := []int64{5, -2, 5, 9, 12, -2, 5, 7, 9, 100}
	for _, d := range dims {
		t.Run(fmt.Sprintf("dim %d", d), func(t *testing.T) {
			name := fmt.Sprintf("d%d", d)
			// The gradient of id's k-th float is -(id + k/1000): SGD at rate 1 from zeros leaves it
			// in the entry, once per distinct id.
			distinct := []int64{5, -2, 9, 12, 7, 100}
			grads := make([]float32, len(distinct)*d)
			for i, id := range distinct {
				for k := 0; k < d; k++ {
					grads[i*d+k] = -(float32(id) + float32(k)/1000)
				}
			}
			if err := r.ApplyGradients(ctx, name, d, distinct, grads, Update{GlobalStep: 1}); err != nil {
				t.Fatal(err)
			}
			out := make([]float32, len(ids)*d)
			found, err := r.Lookup(ctx, name, d, ids, out)
			if err != nil || found != len(distinct) {
				t.Fatalf("found %d, %v; want %d", found, err, len(distinct))
			}
			for i, id := range ids {
				for k := 0; k < d; k++ {
					if want := float32(id) + float32(k)/1000; out[i*d+k] != want {
						t.Fatalf("position %d (id %d) float %d = %v, want %v", i, id, k, out[i*d+k], want)
					}
				}
			}
		})
	}
}
