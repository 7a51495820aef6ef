package pscheck_test

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pspb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/ps"
	pb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/ops"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/internal/syncbuf"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/hooks/barrier"
	"github.com/monolith-go/monolith/pkg/hooks/pscheck"
	"github.com/monolith-go/monolith/pkg/hooks/runhook"
	"github.com/monolith-go/monolith/pkg/ps"
)

// job starts numPS parameter servers on loopback (server i with memory limit limits[i]) and
// returns them with their clients.
func job(t *testing.T, limits ...int64) ([]*ps.Running, []pspb.ParameterServerClient) {
	t.Helper()
	var servers []*ps.Running
	var clients []pspb.ParameterServerClient
	for i, limit := range limits {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		r, err := ps.Start(lis, ps.Config{Index: i, NumPS: len(limits), MemLimit: limit, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			r.Stop(ctx)
		})
		c, err := ps.Dial(r.Addr(), ps.ClientConfig{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		servers = append(servers, r)
		clients = append(clients, c.RPC())
	}
	return servers, clients
}

func TestRemoteProbe(t *testing.T) {
	leakcheck.Check(t)
	// PS 1's limit is below any process's resident memory: out of memory.
	servers, clients := job(t, pscheck.DefaultMemLimit, 1)
	probe := pscheck.RemoteProbe(clients, time.Second)
	ctx := context.Background()
	if st, err := probe(ctx, 0); err != nil || len(st) != 0 {
		t.Fatalf("PS 0 = %q, %v; want healthy", st, err)
	}
	st, err := probe(ctx, 1)
	if err != nil || len(st) == 0 {
		t.Fatalf("PS 1 = %q, %v; want out of memory", st, err)
	}
	if _, err := probe(ctx, 2); errkind.Of(err) != errkind.Value {
		t.Fatalf("PS 2 of 2 = %v", err)
	}
	// A server listed at the wrong index.
	if _, err := pscheck.RemoteProbe([]pspb.ParameterServerClient{clients[1]}, 0)(ctx, 0); err == nil || !strings.Contains(err.Error(), "answers as PS 1") {
		t.Fatalf("PS 1 probed as PS 0: %v", err)
	}
	servers[0].Kill()
	start := time.Now()
	_, err = probe(ctx, 0)
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "PS 0 health") {
		t.Fatalf("dead PS 0 = %v, want Unavailable", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("the dead PS's probe took %v (timeout 1 s)", took)
	}
}

// TestCheckerOnRealServers runs the health check hook against parameter servers: an out of
// memory one is reported and places the barrier (a Remote one, held by PS 0, as a job's chief
// would use); with a dead one the checker logs the failed probe and keeps checking, and places
// nothing.
func TestCheckerOnRealServers(t *testing.T) {
	t.Run("out of memory", func(t *testing.T) {
		leakcheck.Check(t)
		_, clients := job(t, pscheck.DefaultMemLimit, 1)
		b, err := barrier.NewRemote(barrier.RemoteConfig{Client: clients[0], Name: "train", Capacity: 2})
		if err != nil {
			t.Fatal(err)
		}
		reports := make(chan map[int]*pb.MachineHealthResult, 1)
		hook := pscheck.NewHook(pscheck.Config{Barrier: b, NumPS: 2, Probe: pscheck.RemoteProbe(clients, time.Second),
			Interval: 10 * time.Millisecond, Report: func(r map[int]*pb.MachineHealthResult) { reports <- r }})
		var got map[int]*pb.MachineHealthResult
		if err := runhook.Run(context.Background(), []runhook.Hook{hook}, func(_ context.Context, rc *runhook.RunContext) error {
			got = <-reports
			// The checker places the barrier right after reporting.
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				st, err := b.Status(context.Background())
				if err != nil {
					return err
				}
				if st.Placed {
					break
				}
				if time.Now().After(deadline) {
					t.Error("the barrier on PS 0 was not placed")
					break
				}
			}
			rc.RequestStop()
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[1].GetStatus() != pb.MachineHealthResult_OUT_OF_MEMORY || !strings.HasSuffix(got[1].GetMessage(), ", Limit: 1") {
			t.Fatalf("report %v, want PS 1 out of memory", got)
		}
	})
	t.Run("dead server", func(t *testing.T) {
		leakcheck.Check(t)
		servers, clients := job(t, pscheck.DefaultMemLimit, pscheck.DefaultMemLimit)
		b, err := barrier.New(2)
		if err != nil {
			t.Fatal(err)
		}
		servers[1].Kill()
		var logs syncbuf.Buffer
		old := slog.Default()
		slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
		defer slog.SetDefault(old)
		var probes atomic.Int64
		remote := pscheck.RemoteProbe(clients, time.Second)
		hook := pscheck.NewHook(pscheck.Config{Barrier: b, NumPS: 2, Interval: 10 * time.Millisecond,
			Probe: func(ctx context.Context, i int) ([]byte, error) {
				if i == 1 {
					probes.Add(1)
				}
				return remote(ctx, i)
			},
			Report: func(r map[int]*pb.MachineHealthResult) { t.Errorf("reported %v", r) }})
		if err := runhook.Run(context.Background(), []runhook.Hook{hook}, func(_ context.Context, rc *runhook.RunContext) error {
			for deadline := time.Now().Add(10 * time.Second); probes.Load() < 3; time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Errorf("probes of the dead PS: %d, want the checker to go on", probes.Load())
					break
				}
			}
			rc.RequestStop()
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if b.IsPlaced() {
			t.Error("a dead PS placed the barrier")
		}
		if !strings.Contains(logs.String(), "pscheck: health check failed") || !strings.Contains(logs.String(), "PS 1 health") || !strings.Contains(logs.String(), "Unavailable") {
			t.Errorf("log %q does not name the dead PS", logs.String())
		}
	})
}
