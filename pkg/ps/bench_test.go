package ps

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pspb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/ps"
	"github.com/monolith-go/monolith/pkg/embedding"
)

// rawCodec sends a *[]byte as it is: the echo baseline pays no encoding at all.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	p := v.(*[]byte)
	*p = append((*p)[:0], data...) // the transport reuses data's buffer
	return nil
}
func (rawCodec) Name() string { return "raw" }

// echoServer answers a request of n ids (8n bytes) with the n embeddings' worth of bytes (4n *
// dim) from a buffer filled once: the transport's work for a lookup, and nothing else.
type echoServer struct {
	dim   int
	reply []byte
}

var echoDesc = grpc.ServiceDesc{
	ServiceName: "monolith.ps.bench.Echo",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Echo",
		Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var in []byte
			if err := dec(&in); err != nil {
				return nil, err
			}
			e := srv.(*echoServer)
			out := e.reply[:len(in)/8*e.dim*4]
			return &out, nil
		},
	}},
}

// startEcho serves the echo on a loopback listener with the parameter server's transport
// settings.
func startEcho(b *testing.B, dim, maxIDs int) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	opts := append(TransportServerOptions(), grpc.ForceServerCodec(rawCodec{}), grpc.MaxRecvMsgSize(DefaultMaxMessageBytes), grpc.MaxSendMsgSize(DefaultMaxMessageBytes))
	g := grpc.NewServer(opts...)
	g.RegisterService(&echoDesc, &echoServer{dim: dim, reply: make([]byte, maxIDs*dim*4)})
	go g.Serve(lis)
	b.Cleanup(g.Stop)
	return lis.Addr().String()
}

// BenchmarkLookupVsEcho measures the Router's lookup of 64k random existing ids of dimension 16
// on 2 parameter servers over gRPC on loopback, against a plain gRPC echo of the same payloads
// (each server's ids out, their embeddings' bytes back, in parallel) in the same run, alternating
// batch by batch. Reported: ids/s and payload MB/s of each, ratio = lookup ids/s over echo ids/s
// (the share of the transport's limit the lookup reaches), table_ms: the servers' tables' own
// time for the batch's lookups, in process, measured in the same loop (the part of a lookup no
// transport can save; it grows with the table, as the rows stop fitting in the caches), and
// ratio_without_table = echo time over (lookup time - table time); and each one's processor time
// per batch (all threads), with cpu_ratio = echo's over lookup's.
func BenchmarkLookupVsEcho(b *testing.B) {
	for _, entries := range []int{1 << 17, 1 << 20} {
		b.Run(fmt.Sprintf("entries=%dk", entries>>10), func(b *testing.B) { benchLookupVsEcho(b, entries) })
	}
}

func benchLookupVsEcho(b *testing.B, entries int) {
	const (
		numPS  = 2
		dim    = 16
		batchN = 1 << 16
	)
	ctx := context.Background()
	cfg := Config{Tables: []*pspb.TableConfig{sgdTable("emb", dim, 0.1)}}
	servers := startServers(b, numPS, cfg)
	r := newRouter(b, servers, RouterConfig{})
	rng := rand.New(rand.NewPCG(7, 8))
	pool := make([]int64, entries)
	for i := range pool {
		pool[i] = int64(rng.Uint64())
	}
	grads := make([]float32, batchN*dim)
	for i := range grads {
		grads[i] = 0.01
	}
	for lo := 0; lo < entries; lo += batchN {
		hi := min(lo+batchN, entries)
		if err := r.ApplyGradients(ctx, "emb", dim, pool[lo:hi], grads[:(hi-lo)*dim], Update{GlobalStep: 1}); err != nil {
			b.Fatal(err)
		}
	}

	// The echo: one connection per echo server, as the router has one per parameter server.
	echoConns := make([]*grpc.ClientConn, numPS)
	for s := range echoConns {
		addr := startEcho(b, dim, batchN)
		conn, err := grpc.NewClient(addr, append(TransportDialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{}), grpc.MaxCallRecvMsgSize(DefaultMaxMessageBytes), grpc.MaxCallSendMsgSize(DefaultMaxMessageBytes)))...)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { conn.Close() })
		echoConns[s] = conn
	}

	const batches = 16
	ids := make([][]int64, batches)
	split := make([][][]int64, batches) // each batch's distinct ids by server, for the echo
	for k := range ids {
		ids[k] = make([]int64, batchN)
		for i := range ids[k] {
			ids[k][i] = pool[rng.IntN(entries)]
		}
		split[k] = make([][]int64, numPS)
		seen := map[int64]bool{}
		for _, id := range ids[k] {
			if !seen[id] {
				seen[id] = true
				s := embedding.Shard(id, numPS)
				split[k][s] = append(split[k][s], id)
			}
		}
	}
	out := make([]float32, batchN*dim)
	echo := func(k int) error {
		g, gctx := errgroup.WithContext(ctx)
		for s, conn := range echoConns {
			g.Go(func() error {
				cctx, cancel := context.WithTimeout(gctx, DefaultCallTimeout)
				defer cancel()
				req := int64Bytes(split[k][s])
				var resp []byte
				if err := conn.Invoke(cctx, "/monolith.ps.bench.Echo/Echo", &req, &resp); err != nil {
					return err
				}
				if len(resp) != len(split[k][s])*dim*4 {
					b.Errorf("echo answered %d bytes", len(resp))
				}
				return nil
			})
		}
		return g.Wait()
	}
	// Warm both paths up (connections, buffers).
	for k := 0; k < 2; k++ {
		if _, err := r.Lookup(ctx, "emb", dim, ids[k], out); err != nil {
			b.Fatal(err)
		}
		if err := echo(k); err != nil {
			b.Fatal(err)
		}
	}
	// The tables' own time for a batch, in process: each server's distinct ids, one server after
	// the other (each table uses every core).
	tablesOnly := func(k int) {
		for s, srv := range servers {
			tb, err := srv.Server.table("emb", dim)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := tb.t.Lookup(split[k][s], out[:len(split[k][s])*dim]); err != nil {
				b.Fatal(err)
			}
		}
	}
	var lookupTime, echoTime, tableTime, lookupCPU, echoCPU, tableCPU time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := i % batches
		start, cpu0 := time.Now(), processCPU(b)
		found, err := r.Lookup(ctx, "emb", dim, ids[k], out)
		if err != nil {
			b.Fatal(err)
		}
		if found == 0 {
			b.Fatal("no id found")
		}
		mid, cpu1 := time.Now(), processCPU(b)
		if err := echo(k); err != nil {
			b.Fatal(err)
		}
		mid2, cpu2 := time.Now(), processCPU(b)
		tablesOnly(k)
		lookupTime += mid.Sub(start)
		echoTime += mid2.Sub(mid)
		tableTime += time.Since(mid2)
		lookupCPU += cpu1 - cpu0
		echoCPU += cpu2 - cpu1
		tableCPU += processCPU(b) - cpu2
	}
	b.StopTimer()
	// Payload per batch: the ids out (8 bytes) and the embeddings back (4*dim bytes).
	perBatch := float64(batchN * (8 + 4*dim))
	n := float64(b.N)
	b.ReportMetric(n*batchN/lookupTime.Seconds(), "lookup_ids/s")
	b.ReportMetric(n*perBatch/lookupTime.Seconds()/1e6, "lookup_MB/s")
	b.ReportMetric(n*batchN/echoTime.Seconds(), "echo_ids/s")
	b.ReportMetric(n*perBatch/echoTime.Seconds()/1e6, "echo_MB/s")
	b.ReportMetric(echoTime.Seconds()/lookupTime.Seconds(), "ratio")
	b.ReportMetric(tableTime.Seconds()*1e3/n, "table_ms")
	// The lookup's share of the transport's limit once the tables' own time is set aside.
	b.ReportMetric(echoTime.Seconds()/(lookupTime-tableTime).Seconds(), "ratio_without_table")
	// The processor time of each, all threads: on a machine whose cores all work during a lookup
	// and an echo, the bound of their rates' ratio is cpu_ratio (echo's over the lookup's).
	b.ReportMetric(lookupCPU.Seconds()*1e3/n, "lookup_cpu_ms")
	b.ReportMetric(echoCPU.Seconds()*1e3/n, "echo_cpu_ms")
	b.ReportMetric(tableCPU.Seconds()*1e3/n, "table_cpu_ms")
	b.ReportMetric(echoCPU.Seconds()/lookupCPU.Seconds(), "cpu_ratio")
}

// processCPU is the processor time the process has used, in user and system mode.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDedup measures the client's grouping of a 64k batch of random ids (from 1M) by server
// and their de-duplication per server (in-process; the share of a lookup spent before sending).
func BenchmarkDedup(b *testing.B) {
	const numPS, batchN = 2, 1 << 16
	r := &Router{clients: make([]*Client, numPS)}
	rng := rand.New(rand.NewPCG(1, 1))
	ids := make([]int64, batchN)
	for i := range ids {
		ids[i] = int64(rng.Uint64() >> (64 - 20))
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sp := r.splitBatch(ids)
		for s := 0; s < numPS; s++ {
			sp.shards[s].dedup(ids, sp.positions(s))
		}
		sp.release()
	}
	b.ReportMetric(float64(b.N)*batchN/b.Elapsed().Seconds(), "ids/s")
}
