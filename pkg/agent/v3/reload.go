package agentv3

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	tfprotobuf "github.com/monolith-go/monolith/gen/pb/tensorflow/core/protobuf"
	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	servingconfig "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/config"
	agentstatus "github.com/monolith-go/monolith/pkg/agent/status"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/tfs"
)

// Reloader sends a model server config to TF Serving.
type Reloader interface {
	// Reload asks TF Serving to serve exactly cfg; an error when it refuses or cannot be reached.
	Reload(ctx context.Context, cfg *servingconfig.ModelServerConfig) error
	// Close releases the connection.
	Close() error
}

// GRPCReloader reloads TF Serving over gRPC (ModelService.HandleReloadConfigRequest).
type GRPCReloader struct {
	conn   *grpc.ClientConn
	client servingapis.ModelServiceClient
}

// DialReloader returns a reloader of the TF Serving at addr ("host:port"). The channel connects
// lazily: reloads fail until TF Serving listens.
func DialReloader(addr string) (*GRPCReloader, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("tfs reloader: dial %s: %w", addr, err)
	}
	return &GRPCReloader{conn: conn, client: servingapis.NewModelServiceClient(conn)}, nil
}

// Reload implements Reloader.
func (r *GRPCReloader) Reload(ctx context.Context, cfg *servingconfig.ModelServerConfig) error {
	resp, err := r.client.HandleReloadConfigRequest(ctx, &servingapis.ReloadConfigRequest{Config: cfg})
	if err != nil {
		return fmt.Errorf("tfs reload: %w", err)
	}
	if st := resp.GetStatus(); st.GetErrorCode() != tfprotobuf.Code_OK {
		return errkind.New(errkind.Runtime, "tfs reload: TF Serving answered %s: %s", st.GetErrorCode(), st.GetErrorMessage())
	}
	return nil
}

// Close implements Reloader.
func (r *GRPCReloader) Close() error { return r.conn.Close() }

// reloader sends the newest config to TF Serving off the ZooKeeper callback (a reload can take a
// long time), retrying with backoff until it is accepted; a newer config replaces one still
// pending. The reference only wrote the file and left TF Serving to find it at its next poll
// (--model_config_file_poll_wait_seconds=60): the file is still written, so TF Serving converges
// even without the RPC, but a layout change is served at once.
type reloader struct {
	r          Reloader
	log        *slog.Logger
	metrics    *agentstatus.Metrics
	timeout    time.Duration
	backoffMin time.Duration
	backoffMax time.Duration

	wake chan struct{}

	mu       sync.Mutex
	pending  *servingconfig.ModelServerConfig
	gen      uint64 // generation of pending
	attempts int    // attempts at sending gen
	last     *agentstatus.ReloadSummary
	applied  uint64
}

func newReloader(r Reloader, o Options, log *slog.Logger, m *agentstatus.Metrics) *reloader {
	return &reloader{r: r, log: log, metrics: m, timeout: o.ReloadTimeout, backoffMin: o.ReloadBackoff,
		backoffMax: o.ReloadBackoffMax, wake: make(chan struct{}, 1)}
}

// submit makes cfg the config to send next.
func (rl *reloader) submit(cfg *servingconfig.ModelServerConfig) {
	rl.mu.Lock()
	rl.pending = cfg
	rl.gen++
	rl.attempts = 0
	rl.mu.Unlock()
	select {
	case rl.wake <- struct{}{}:
	default:
	}
}

// summary is the outcome of the last attempt, nil before the first.
func (rl *reloader) summary() *agentstatus.ReloadSummary {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if rl.last == nil {
		return nil
	}
	s := *rl.last
	return &s
}

// run sends configs until ctx ends.
func (rl *reloader) run(ctx context.Context) {
	backoff := time.Duration(0)
	for {
		select { // the config read below is the newest: a wake-up for it is spent
		case <-rl.wake:
		default:
		}
		rl.mu.Lock()
		cfg, gen, applied := rl.pending, rl.gen, rl.applied
		rl.mu.Unlock()
		if gen == applied {
			select {
			case <-ctx.Done():
				return
			case <-rl.wake:
				continue
			}
		}
		err := rl.send(ctx, cfg, gen)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			backoff = 0
			continue
		}
		backoff = min(max(2*backoff, rl.backoffMin), rl.backoffMax)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-rl.wake: // a newer config: send it now
			t.Stop()
		case <-t.C:
		}
	}
}

func (rl *reloader) send(ctx context.Context, cfg *servingconfig.ModelServerConfig, gen uint64) error {
	cctx, cancel := context.WithTimeout(ctx, rl.timeout)
	start := time.Now()
	err := rl.r.Reload(cctx, cfg)
	cancel()
	if ctx.Err() != nil {
		return ctx.Err() // stopping: not TF Serving's failure
	}
	rl.metrics.ObserveReload(time.Since(start), err)
	n := len(cfg.GetModelConfigList().GetConfig())
	sum := &agentstatus.ReloadSummary{At: start, Models: n, OK: err == nil}
	if err != nil {
		sum.Error = err.Error()
	}
	rl.mu.Lock()
	if gen == rl.gen { // else a newer config is pending and this outcome is moot
		rl.attempts++
		sum.Attempts = rl.attempts
		rl.last = sum
		if err == nil {
			rl.applied = gen
		}
	}
	rl.mu.Unlock()
	if err != nil {
		rl.log.Warn("tfs reload failed, will retry", "models", n, "attempt", sum.Attempts, "err", err)
	} else {
		rl.log.Info("tfs reloaded", "models", n)
	}
	return err
}

// defaultReloadTimeout bounds one reload (TF Serving can hang in one: tensorflow/serving #1565).
const defaultReloadTimeout = tfs.DefaultReloadTimeout
