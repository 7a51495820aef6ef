package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/modelconfig"
	"github.com/monolith-go/monolith/pkg/modelserver"
	"github.com/monolith-go/monolith/pkg/modelserver/entry"
	"github.com/monolith-go/monolith/pkg/modelserver/psshard"
	"github.com/monolith-go/monolith/pkg/tfs"
)

// demoEntryTimeout bounds one lookup of the entry on a PS replica (cmd/model_server's
// --archon_entry_to_ps_rpc_timeout).
const demoEntryTimeout = 5 * time.Second

// modelServerTFS runs the model server (pkg/modelserver, cmd/model_server's core) in the agent's
// process as its tfs.Process: the agent drives it as it drives tensorflow_model_server (model config
// file, HandleReloadConfigRequest, GetModelStatus), and its entries find the PS replicas through
// the agent's HeartBeat, as cmd/model_server's do.
type modelServerTFS struct {
	file tfs.FakeWrapper // reads the model config file as TF Serving's wrapper does
	addr string
	// agentAddr is the agent's AgentService, asked when an entry first needs its PS replicas (the
	// agent listens once it has started this server).
	agentAddr func() string
	log       *slog.Logger

	mu       sync.Mutex
	srv      *modelserver.Server
	loader   *entry.Loader
	replicas *demoReplicas
	done     chan struct{}
	code     int
	stopped  bool
}

var _ tfs.Process = (*modelServerTFS)(nil)

func newModelServerTFS(modelConfigFile string, port int, agentAddr func() string, log *slog.Logger) *modelServerTFS {
	return &modelServerTFS{file: tfs.FakeWrapper{ModelConfigFile: modelConfigFile}, addr: fmt.Sprintf("127.0.0.1:%d", port),
		agentAddr: agentAddr, log: log}
}

// Start implements tfs.Process: it listens, loads the model config file's models and serves.
func (t *modelServerTFS) Start(context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.srv != nil || t.stopped {
		return errkind.New(errkind.Runtime, "in-process model server: already started or stopped")
	}
	metrics := modelserver.NewMetrics()
	t.replicas = &demoReplicas{addr: t.agentAddr, log: t.log}
	t.loader = entry.NewLoader(entry.Config{Replicas: t.replicas, Timeout: demoEntryTimeout,
		Metrics: entry.NewMetrics(metrics.Registry()), Logger: t.log})
	srv, err := modelserver.New(nil, modelserver.Options{
		Addr: t.addr,
		Manager: modelserver.ManagerOptions{
			Loaders: modelserver.Loaders{modelserver.KindPS: psshard.Load, modelserver.KindEntry: t.loader.Load},
		},
		ConfigFile: t.file.ModelConfigFile, FileSystemPollInterval: time.Second, Metrics: metrics, Logger: t.log,
	})
	if err == nil {
		if err = srv.Start(); err != nil {
			srv.Stop(context.Background())
		}
	}
	if err != nil {
		t.loader.Close()
		t.replicas.close()
		return fmt.Errorf("in-process model server: %w", err)
	}
	t.srv, t.done = srv, make(chan struct{})
	go func() {
		err := srv.Wait()
		t.mu.Lock()
		if err != nil {
			t.code = 1
		}
		t.mu.Unlock()
		close(t.done)
	}()
	return nil
}

// Addr is where it listens ("" before Start).
func (t *modelServerTFS) Addr() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.srv == nil {
		return ""
	}
	return t.srv.Addr()
}

// Stop implements tfs.Process: in-flight RPCs get grace to finish, then every version unloads.
func (t *modelServerTFS) Stop(grace time.Duration) error {
	t.mu.Lock()
	srv, done := t.srv, t.done
	t.stopped = true
	t.mu.Unlock()
	if srv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := srv.Stop(ctx)
	<-done
	t.loader.Close()
	t.replicas.close()
	return err
}

// Exited implements tfs.Process.
func (t *modelServerTFS) Exited() (bool, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done == nil {
		return false, 0
	}
	select {
	case <-t.done:
		return true, t.code
	default:
		return false, 0
	}
}

// Done is closed when the server has stopped (nil before Start), as tfs.Wrapper's.
func (t *modelServerTFS) Done() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.done
}

// GRPCRemoteOp reports true: the entries reach the PS replicas over gRPC, so the agent advertises
// gRPC addresses.
func (t *modelServerTFS) GRPCRemoteOp() bool { return true }

// ModelConfigText implements tfs.Process.
func (t *modelServerTFS) ModelConfigText() (string, error) { return t.file.ModelConfigText() }

// ListSavedModels implements tfs.Process.
func (t *modelServerTFS) ListSavedModels() ([]string, error) { return t.file.ListSavedModels() }

// ListSavedModelsStatus implements tfs.Process as tfs.Wrapper does: for each configured model,
// its newest AVAILABLE version, else its newest; UNKNOWN when the server has none.
func (t *modelServerTFS) ListSavedModelsStatus(ctx context.Context) (map[string]*servingapis.ModelVersionStatus, error) {
	names, err := t.ListSavedModels()
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	srv := t.srv
	t.mu.Unlock()
	if srv == nil {
		return nil, errkind.New(errkind.Runtime, "in-process model server: not started")
	}
	out := map[string]*servingapis.ModelVersionStatus{}
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// A model the server does not know yet (the config not applied) is UNKNOWN.
		list, _ := srv.Manager().Status(modelconfig.ModelSpec(name, modelconfig.Version{}, nil))
		out[name] = tfs.NewestAvailable(list)
	}
	return out, nil
}

// demoReplicas asks the agent's HeartBeat for the PS replicas (entry.AgentReplicas), starting when
// an entry first needs them.
type demoReplicas struct {
	addr func() string
	log  *slog.Logger

	mu     sync.Mutex
	r      *entry.AgentReplicas
	closed bool
}

func (d *demoReplicas) get() (*entry.AgentReplicas, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, status.Error(codes.Unavailable, "in-process model server stopped")
	}
	if d.r == nil {
		addr := d.addr()
		if addr == "" {
			return nil, status.Error(codes.Unavailable, "the agent's AgentService does not listen yet")
		}
		r, err := entry.NewAgentReplicas(entry.AgentOptions{Addr: addr, Interval: demoSync, Logger: d.log})
		if err != nil {
			return nil, status.Errorf(codes.Unavailable, "agent %s: %v", addr, err)
		}
		d.r = r
	}
	return d.r, nil
}

// Addrs implements entry.Replicas.
func (d *demoReplicas) Addrs(ctx context.Context, model string, shard int) ([]string, error) {
	r, err := d.get()
	if err != nil {
		return nil, err
	}
	return r.Addrs(ctx, model, shard)
}

// Failed implements entry.Replicas.
func (d *demoReplicas) Failed(addr string) {
	if r, err := d.get(); err == nil {
		r.Failed(addr)
	}
}

func (d *demoReplicas) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	if d.r != nil {
		d.r.Close()
	}
}
