package ps

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pspb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/ps"
	hashtablepb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table"
	loggingopspb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/ops"
	"github.com/monolith-go/monolith/internal/leakcheck"
)

func TestHealth(t *testing.T) {
	tests := []struct {
		name     string
		memLimit int64
		oom      bool
	}{
		{name: "healthy", memLimit: 1 << 40},
		{name: "out of memory", memLimit: 1000, oom: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			servers := startServers(t, 2, Config{Tables: []*pspb.TableConfig{sgdTable("a", 2, 1)}, MemLimit: tc.memLimit,
				MemoryUsage: func() (int64, error) { return 4096, nil }, MaxIDsPerRequest: 77})
			r := newRouter(t, servers, RouterConfig{})
			hs, err := r.Health(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for i, h := range hs {
				if h.GetIndex() != int32(i) || h.GetNumPs() != 2 || h.GetMemoryBytes() != 4096 || h.GetMemLimit() != tc.memLimit ||
					h.GetMaxIdsPerRequest() != 77 || h.GetMaxMessageBytes() != DefaultMaxMessageBytes || h.GetVersion() == "" ||
					len(h.GetTables()) != 1 || h.GetTables()[0] != "a" {
					t.Errorf("ps %d health %v", i, h)
				}
				if !tc.oom {
					if len(h.GetMachineHealth()) != 0 {
						t.Errorf("healthy ps %d reports %q", i, h.GetMachineHealth())
					}
					continue
				}
				var res loggingopspb.MachineHealthResult
				if err := proto.Unmarshal(h.GetMachineHealth(), &res); err != nil {
					t.Fatal(err)
				}
				if res.GetStatus() != loggingopspb.MachineHealthResult_OUT_OF_MEMORY || res.GetMessage() != "Memory limit exceeded. Current: 4096, Limit: 1000" {
					t.Errorf("ps %d: %v", i, &res)
				}
			}
		})
	}
}

// TestRouterChecksServerIndices: a router whose servers are listed out of order says so.
func TestRouterChecksServerIndices(t *testing.T) {
	leakcheck.Check(t)
	servers := startServers(t, 2, Config{})
	r := newRouter(t, []*Running{servers[1], servers[0]}, RouterConfig{})
	_, err := r.Health(context.Background())
	// Either server's answer may come first.
	if err == nil || !strings.Contains(err.Error(), "the server says it is ps 1 of 2, the router has it as 0 of 2") &&
		!strings.Contains(err.Error(), "the server says it is ps 0 of 2, the router has it as 1 of 2") {
		t.Fatalf("Health = %v", err)
	}
}

func TestMetrics(t *testing.T) {
	leakcheck.Check(t)
	m := NewMetrics()
	servers := startServers(t, 1, Config{Tables: []*pspb.TableConfig{sgdTable("emb", 2, 1)}, Metrics: m})
	r := newRouter(t, servers, RouterConfig{})
	ctx := context.Background()
	if err := r.ApplyGradients(ctx, "emb", 2, []int64{1, 2, 3}, make([]float32, 6), Update{GlobalStep: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Lookup(ctx, "emb", 2, []int64{1, 1, 9}, make([]float32, 6)); err != nil {
		t.Fatal(err)
	}
	r.Lookup(ctx, "nope", 2, []int64{1}, make([]float32, 2))
	hs := httptest.NewServer(StatusHandler(m))
	defer hs.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(hs.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz = %d %q", code, body)
	}
	code, body := get("/metrics")
	if code != 200 {
		t.Fatalf("/metrics = %d", code)
	}
	for _, want := range []string{
		`monolith_ps_rpc_requests_total{code="OK",method="Lookup"} 1`,
		`monolith_ps_rpc_requests_total{code="InvalidArgument",method="Lookup"} 1`,
		`monolith_ps_rpc_requests_total{code="OK",method="ApplyGradients"} 1`,
		`monolith_ps_table_entries{ps="0",table="emb"} 3`,
		`monolith_ps_table_lookup_ids_total{ps="0",table="emb"} 2`, // 1 and 9: distinct ids
		`monolith_ps_table_apply_ids_total{ps="0",table="emb"} 3`,
		`monolith_ps_table_memory_bytes{ps="0",table="emb"} `,
		`monolith_ps_rpc_duration_seconds_count{method="Lookup"} 2`,
		`monolith_build_info{`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestEviction: with EvictEvery set, entries older than their slot's expire time (as of the
// table's latest update) are evicted by the server.
func TestEviction(t *testing.T) {
	leakcheck.Check(t)
	tb := sgdTable("emb", 2, 1)
	tb.Config.SlotExpireTimeConfig = &hashtablepb.SlotExpireTimeConfig{DefaultExpireTime: ptr[uint32](1)} // 1 day
	tb.Config.EnableFeatureEviction = ptr(true)                                                           // every 240 h, which EvictEvery overrides
	servers := startServers(t, 1, Config{Tables: []*pspb.TableConfig{tb}, EvictEvery: 5 * time.Millisecond})
	r := newRouter(t, servers, RouterConfig{})
	ctx := context.Background()
	const day = 24 * 3600
	if err := r.ApplyGradients(ctx, "emb", 2, []int64{1, 2}, make([]float32, 4), Update{GlobalStep: 1, UpdateTimeSec: 10 * day}); err != nil {
		t.Fatal(err)
	}
	if err := r.ApplyGradients(ctx, "emb", 2, []int64{3}, make([]float32, 2), Update{GlobalStep: 2, UpdateTimeSec: 11*day + 1}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := r.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st[0].GetTables()[0].GetEntries() == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("entries %d, want 1 once the two stale ones are evicted", st[0].GetTables()[0].GetEntries())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if f, err := r.Lookup(ctx, "emb", 2, []int64{1, 2, 3}, make([]float32, 6)); err != nil || f != 1 {
		t.Fatalf("found %d, %v; want only id 3", f, err)
	}
}
