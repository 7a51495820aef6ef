package ps

import (
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pspb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/ps"
	hashtablepb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table"
	"github.com/monolith-go/monolith/internal/leakcheck"
)

// TestCreateTablesBounds: a table config past one of the bounds is INVALID_ARGUMENT naming the
// field and the bound, never a panic or an allocation of its size, and the server goes on
// serving the tables it had.
func TestCreateTablesBounds(t *testing.T) {
	leakcheck.Check(t)
	const reserve = 64 << 20
	srv := startServers(t, 1, Config{Tables: []*pspb.TableConfig{sgdTable("emb", 4, 0.1)}, ReserveLimit: reserve})[0]
	c := dial(t, srv.Addr(), ClientConfig{})
	ctx := context.Background()
	with := func(f func(c *pspb.TableConfig)) []*pspb.TableConfig {
		tc := sgdTable("x", 8, 0.1)
		f(tc)
		return []*pspb.TableConfig{tc}
	}
	seg := func(c *pspb.TableConfig) *hashtablepb.EntryConfig_Segment { return c.Config.EntryConfig.Segments[0] }
	sliding := func(capacity uint64, split int32) *pspb.FilterConfig {
		return &pspb.FilterConfig{Type: pspb.FilterConfig_SLIDING_HASH, Capacity: capacity, SplitNum: split}
	}
	many := make([]*pspb.TableConfig, MaxTables+1)
	for i := range many {
		many[i] = sgdTable("emb", 4, 0.1)
	}
	tests := []struct {
		name   string
		tables []*pspb.TableConfig
		want   string
		also   string // another part of the message
	}{
		{name: "filter capacity 1<<62", tables: with(func(c *pspb.TableConfig) { c.Filter = sliding(1<<62, 0) }),
			want: `table "x": filter: sliding hash filter: capacity 4611686018427387904 in 7 splits, want at most 21474836160`},
		{name: "filter capacity past its splits", tables: with(func(c *pspb.TableConfig) { c.Filter = sliding(1<<40, 5) }),
			want: `capacity 1099511627776 in 5 splits, want at most 14316557440`},
		{name: "filter split_num", tables: with(func(c *pspb.TableConfig) { c.Filter = sliding(1000, 1<<20) }),
			want: `table "x": filter split_num 1048576, want 0 (the default, 7) to 64 (embedding.MaxFilterSplitNum)`},
		{name: "negative filter split_num", tables: with(func(c *pspb.TableConfig) { c.Filter = sliding(1000, -1) }),
			want: `filter split_num -1, want 0`},
		{name: "filter over the memory limit", tables: with(func(c *pspb.TableConfig) { c.Filter = sliding(100_000_000, 0) }),
			want: `filter capacity 100000000: 280000882 bytes) and the other tables'`, also: `bytes are over the limit of 67108864 bytes (reserve_limit)`},
		{name: "default filter over the memory limit", tables: with(func(c *pspb.TableConfig) { c.Filter = sliding(0, 0) }),
			want: `filter capacity 0: 840000896 bytes)`, also: `over the limit of 67108864 bytes`},
		{name: "initial capacity over the memory limit", tables: with(func(c *pspb.TableConfig) { c.Config.InitialCapacity = proto.Uint64(10_000_000) }),
			want: `(initial_capacity 10000000: `, also: `over the limit of 67108864 bytes`},
		{name: "initial capacity 1<<62", tables: with(func(c *pspb.TableConfig) { c.Config.InitialCapacity = proto.Uint64(1 << 62) }),
			want: `initial_capacity 4611686018427387904, want at most 1099511627776 (MaxInitialCapacity)`},
		{name: "two tables over the memory limit together", tables: []*pspb.TableConfig{
			with(func(c *pspb.TableConfig) { c.Name, c.Filter = "y", sliding(15_000_000, 0) })[0],
			with(func(c *pspb.TableConfig) { c.Name, c.Filter = "z", sliding(15_000_000, 0) })[0]},
			want: `table "z": `, also: `filter capacity 15000000: 42000896 bytes) and the other tables'`},
		{name: "dimension int32 max", tables: with(func(c *pspb.TableConfig) { seg(c).DimSize = proto.Int32(math.MaxInt32) }),
			want: `table "x": dimension 2147483647, want at most 65536 (MaxDim`},
		{name: "dimension of segments", tables: with(func(c *pspb.TableConfig) {
			seg(c).DimSize = proto.Int32(40000)
			c.Config.EntryConfig.Segments = append(c.Config.EntryConfig.Segments, proto.Clone(seg(c)).(*hashtablepb.EntryConfig_Segment))
		}), want: `table "x": dimension 80000, want at most 65536`},
		{name: "name length", tables: with(func(c *pspb.TableConfig) { c.Name = strings.Repeat("n", 300) }),
			want: `name of 300 bytes, want at most 255 (MaxTableNameBytes)`},
		{name: "eviction period", tables: with(func(c *pspb.TableConfig) {
			c.Config.EnableFeatureEviction, c.Config.FeatureEvictEveryNHours = proto.Bool(true), proto.Int32(math.MaxInt32)
		}), want: `feature_evict_every_n_hours 2147483647, want 1 to 876000 (MaxEvictEveryHours)`},
		{name: "unknown filter type", tables: with(func(c *pspb.TableConfig) { c.Filter = &pspb.FilterConfig{Type: 9} }),
			want: `table "x": unknown filter type 9 (valid: NONE=0, SLIDING_HASH=1, PROBABILISTIC=2)`},
		{name: "too many tables", tables: many, want: `1025 table configs, a server holds at most 1024 tables (MaxTables)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.RPC().CreateTables(ctx, &pspb.CreateTablesRequest{Tables: tc.tables})
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.also) {
				t.Fatalf("CreateTables = %v\nwant INVALID_ARGUMENT with %q and %q", err, tc.want, tc.also)
			}
			h, err := c.Health(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(h.GetTables(), ","); got != "emb" {
				t.Fatalf("tables %q after the refused config, want emb", got)
			}
		})
	}
	// Within the bounds, the filter's memory counts toward the limit.
	if _, err := c.RPC().CreateTables(ctx, &pspb.CreateTablesRequest{Tables: with(func(c *pspb.TableConfig) { c.Filter = sliding(15_000_000, 0) })}); err != nil {
		t.Fatal(err)
	}
	_, err := c.RPC().CreateTables(ctx, &pspb.CreateTablesRequest{Tables: with(func(c *pspb.TableConfig) { c.Name, c.Filter = "w", sliding(15_000_000, 0) })})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `filter capacity 15000000: 42000896 bytes) and the other tables'`) {
		t.Fatalf("a second filter over the limit: %v", err)
	}
}

// TestRequestBounds: the other requests' sizes past their bounds, an unknown barrier op, and
// gradients that are not finite are INVALID_ARGUMENT naming what is wrong; nothing of a refused
// update is applied, and the refusals are counted.
func TestRequestBounds(t *testing.T) {
	leakcheck.Check(t)
	m := NewMetrics()
	srv := startServers(t, 1, Config{Tables: []*pspb.TableConfig{sgdTable("emb", 2, 1)}, Metrics: m})[0]
	c := dial(t, srv.Addr(), ClientConfig{})
	rpc := c.RPC()
	ctx := context.Background()
	apply := func(grads []float32, lrs ...float32) func() error {
		return func() error {
			_, err := rpc.ApplyGradients(ctx, &pspb.ApplyGradientsRequest{Table: "emb", Dim: 2, Ids: int64Bytes([]int64{5, 6, 7}),
				Grads: float32Bytes(grads), LearningRates: lrs, GlobalStep: 1})
			return err
		}
	}
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	tests := []struct {
		name string
		call func() error
		want string
	}{
		{name: "save shards", want: `save: shards_per_table 1000000, want at most 1024 (MaxShardsPerTable`,
			call: func() error {
				_, err := rpc.Save(ctx, &pspb.SaveRequest{Dir: t.TempDir(), ShardsPerTable: 1000000})
				return err
			}},
		{name: "barrier unknown op", want: `barrier "b": unknown op 99 (valid: ARRIVE=0, PLACE=1, REMOVE=2, WAIT=3, STATUS=4)`,
			call: func() error {
				_, err := rpc.Barrier(ctx, &pspb.BarrierRequest{Op: 99, Name: "b"})
				return err
			}},
		{name: "barrier count", want: `barrier "b": count 2147483647, want 1 to 65536 (MaxWorkers)`,
			call: func() error {
				_, err := rpc.Barrier(ctx, &pspb.BarrierRequest{Op: pspb.BarrierRequest_STATUS, Name: "b", Count: math.MaxInt32})
				return err
			}},
		{name: "allreduce count", want: `allreduce "r": count 2147483647, want 1 to 65536 (MaxWorkers)`,
			call: func() error {
				_, err := rpc.AllReduce(ctx, &pspb.AllReduceRequest{Name: "r", Count: math.MaxInt32, WaitMs: 1})
				return err
			}},
		{name: "NaN gradient", want: `table "emb": gradient of id 6 (the request's id 1 of 3) is NaN: a gradient must be finite; nothing of the request was applied`,
			call: apply([]float32{1, 1, 1, nan, nan, 1})},
		{name: "infinite gradient", want: `table "emb": gradient of id 7 (the request's id 2 of 3) is +Inf`,
			call: apply([]float32{1, 1, 1, 1, inf, 1})},
		{name: "negative infinite gradient", want: `gradient of id 5 (the request's id 0 of 3) is -Inf`,
			call: apply([]float32{-inf, 1, 1, 1, 1, 1})},
		{name: "NaN learning rate", want: `table "emb": learning rate 0 (of segment 0) is NaN`,
			call: apply([]float32{1, 1, 1, 1, 1, 1}, nan)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v\nwant INVALID_ARGUMENT with %q", err, tc.want)
			}
		})
	}
	out := make([]float32, 6)
	if found, err := c.Lookup(ctx, "emb", 2, []int64{5, 6, 7}, out); err != nil || found != 0 {
		t.Fatalf("after the refused updates: found %d, %v; want none of the ids", found, err)
	}
	hs := httptest.NewServer(StatusHandler(m))
	defer hs.Close()
	resp, err := http.Get(hs.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `monolith_ps_rejected_gradients_total{ps="0",table="emb"} 4`; !strings.Contains(string(body), want) {
		t.Fatalf("/metrics lacks %q", want)
	}
}

// bigTable is a server's table "big" of dim 8 with n entries.
func bigTable(t *testing.T, c *Client, n int) {
	t.Helper()
	const batch = 100000
	for start := 0; start < n; start += batch {
		ids := make([]int64, min(batch, n-start))
		for i := range ids {
			ids[i] = int64(start + i)
		}
		if err := c.ApplyGradients(context.Background(), "big", 8, ids, make([]float32, 8*len(ids)), Update{GlobalStep: 1}); err != nil {
			t.Fatal(err)
		}
	}
}

// dumpFiles are the files under dir, relative to it.
func dumpFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	return out
}

// TestSaveDeadline: a Save whose deadline passes stops writing at once and leaves no files, not
// a dump that looks complete. Its shards hold fewer than 1024 entries each (every stripe's are
// fewer), and most none: a Save that looked at its deadline only every 1024 entries of a shard
// wrote them all.
func TestSaveDeadline(t *testing.T) {
	leakcheck.Check(t)
	srv := startServers(t, 1, Config{Tables: []*pspb.TableConfig{sgdTable("big", 8, 0.1)}})[0]
	c := dial(t, srv.Addr(), ClientConfig{})
	bigTable(t, c, 50000)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := srv.Server.Save(ctx, &pspb.SaveRequest{Dir: dir, ShardsPerTable: MaxShardsPerTable})
	late := -time.Until(must(ctx.Deadline()))
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("Save = %v, want DEADLINE_EXCEEDED", err)
	}
	if late > 500*time.Millisecond {
		t.Errorf("Save returned %v after its deadline", late)
	}
	if files := dumpFiles(t, dir); len(files) != 0 {
		t.Fatalf("the Save past its deadline left %d files: %v ...", len(files), files[:min(len(files), 5)])
	}
}

func must[T any](v T, _ bool) T { return v }

// TestStopDuringLongCalls: the server's stop ends the long calls in flight (a Save, a barrier
// wait) at once, UNAVAILABLE, rather than waiting for them through its grace period; the Save
// leaves no files.
func TestStopDuringLongCalls(t *testing.T) {
	leakcheck.Check(t)
	srv := startServers(t, 1, Config{Tables: []*pspb.TableConfig{sgdTable("big", 8, 0.1)}})[0]
	c := dial(t, srv.Addr(), ClientConfig{})
	bigTable(t, c, 300000)
	dir := t.TempDir()
	ctx := context.Background()
	saved := make(chan error, 1)
	go func() {
		_, err := c.RPC().Save(ctx, &pspb.SaveRequest{Dir: dir, ShardsPerTable: MaxShardsPerTable})
		saved <- err
	}()
	if _, err := c.RPC().Barrier(ctx, &pspb.BarrierRequest{Op: pspb.BarrierRequest_PLACE, Name: "b", Count: 2}); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		_, err := c.RPC().Barrier(ctx, &pspb.BarrierRequest{Op: pspb.BarrierRequest_WAIT, Name: "b", Worker: 1, Count: 2})
		waited <- err
	}()
	// The wait is under way once the barrier says worker 1 is blocked, the Save once its first
	// file is.
	for deadline := time.Now().Add(10 * time.Second); ; {
		st, err := c.RPC().Barrier(ctx, &pspb.BarrierRequest{Op: pspb.BarrierRequest_STATUS, Name: "b", Count: 2})
		if err != nil {
			t.Fatal(err)
		}
		if len(st.GetBlocked()) == 2 && len(dumpFiles(t, dir)) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: barrier %v, files %v", st, dumpFiles(t, dir))
		}
		time.Sleep(time.Millisecond)
	}
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second) // the grace period
	defer cancel()
	start := time.Now()
	if err := srv.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("the stop took %v with a Save and a wait in flight, want under 1 s", took)
	}
	for what, ch := range map[string]chan error{"save": saved, "barrier wait": waited} {
		select {
		case err := <-ch:
			if status.Code(err) != codes.Unavailable {
				t.Errorf("%s: %v, want UNAVAILABLE", what, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no answer 5 s after the stop", what)
		}
	}
	if files := dumpFiles(t, dir); len(files) != 0 {
		t.Fatalf("the Save cut short by the stop left %d files: %v ...", len(files), files[:min(len(files), 5)])
	}
}

// TestRestoreDeadline: a Restore whose deadline passes stops reading at once, saying the table is
// partly restored.
func TestRestoreDeadline(t *testing.T) {
	leakcheck.Check(t)
	srv := startServers(t, 1, Config{Tables: []*pspb.TableConfig{sgdTable("big", 8, 0.1)}})[0]
	c := dial(t, srv.Addr(), ClientConfig{})
	bigTable(t, c, 150000)
	dir := t.TempDir()
	if _, err := srv.Server.Save(context.Background(), &pspb.SaveRequest{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := srv.Server.Restore(ctx, &pspb.RestoreRequest{Dir: dir})
	late := -time.Until(must(ctx.Deadline()))
	if status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), `restore table big (partly restored)`) {
		t.Fatalf("Restore = %v, want DEADLINE_EXCEEDED saying the table is partly restored", err)
	}
	if late > 500*time.Millisecond {
		t.Errorf("Restore returned %v after its deadline", late)
	}
}
