package ps

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	pspb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/ps"
	initializerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/initializer"
	optimizerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/optimizer"
)

// sgdTable is a table of dim with SGD at lr and zero-initialized entries.
func sgdTable(name string, dim int, lr float32) *pspb.TableConfig {
	return NewTableConfig(name, dim,
		&optimizerpb.OptimizerConfig{Type: &optimizerpb.OptimizerConfig_Sgd{Sgd: &optimizerpb.SgdOptimizerConfig{LearningRate: proto.Float32(lr)}}},
		&initializerpb.InitializerConfig{Type: &initializerpb.InitializerConfig_Zeros{Zeros: &initializerpb.ZerosInitializerConfig{}}})
}

// adagradTable is a table of dim with Adagrad (initial accumulator 0.1) and random uniform
// entries.
func adagradTable(name string, dim int) *pspb.TableConfig {
	return NewTableConfig(name, dim,
		&optimizerpb.OptimizerConfig{Type: &optimizerpb.OptimizerConfig_Adagrad{Adagrad: &optimizerpb.AdagradOptimizerConfig{
			LearningRate: proto.Float32(0.05), InitialAccumulatorValue: proto.Float32(0.1)}}},
		&initializerpb.InitializerConfig{Type: &initializerpb.InitializerConfig_RandomUniform{RandomUniform: &initializerpb.RandomUniformInitializerConfig{}}})
}

// dimOf is a table's dimension: the sum of its segments'.
func dimOf(c *pspb.TableConfig) int {
	d := 0
	for _, seg := range c.GetConfig().GetEntryConfig().GetSegments() {
		d += int(seg.GetDimSize())
	}
	return d
}

// startServers starts n servers of a job on loopback listeners, each configured by cfg (its
// Index and NumPS set), and stops them when the test ends.
func startServers(t testing.TB, n int, cfg Config, extra ...grpc.ServerOption) []*Running {
	t.Helper()
	out := make([]*Running, n)
	for i := range out {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		c := cfg
		c.Index, c.NumPS = i, n
		if c.Logger == nil {
			c.Logger = slog.New(slog.DiscardHandler)
		}
		r, err := Start(lis, c, extra...)
		if err != nil {
			lis.Close()
			t.Fatal(err)
		}
		out[i] = r
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := r.Stop(ctx); err != nil {
				t.Errorf("stop ps %d: %v", i, err)
			}
		})
	}
	return out
}

// newRouter returns a router over servers, closed when the test ends.
func newRouter(t testing.TB, servers []*Running, cfg RouterConfig) *Router {
	t.Helper()
	for _, s := range servers {
		cfg.Addrs = append(cfg.Addrs, s.Addr())
	}
	r, err := NewRouter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// dial returns a client of addr, closed when the test ends.
func dial(t testing.TB, addr string, cfg ClientConfig) *Client {
	t.Helper()
	c, err := Dial(addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
