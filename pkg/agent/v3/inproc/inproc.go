// Package inproc runs the fake TF Serving (pkg/tfs/faketfs) inside the agent's process as its
// tfs.Process, for the agent's demo (cmd/agent with no flags) and tests: a real gRPC server on
// TF Serving's port, driven by the agent exactly as it drives tensorflow_model_server (model config
// file, HandleReloadConfigRequest, GetModelStatus), with nothing to install.
package inproc

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/modelconfig"
	"github.com/monolith-go/monolith/pkg/tfs"
	"github.com/monolith-go/monolith/pkg/tfs/faketfs"
)

// Options configure a TFS.
type Options struct {
	// Host and Port are where the fake listens (Host default 127.0.0.1; Port 0 picks one).
	Host string
	Port int
	// StepInterval moves every version one state (UNKNOWN -> START -> LOADING -> AVAILABLE) per
	// interval; 0 moves nothing unless the caller steps Server().
	StepInterval time.Duration
	// ConfigPollInterval re-reads the model config file (TF Serving's
	// --model_config_file_poll_wait_seconds); 0 never (reloads come over gRPC).
	ConfigPollInterval time.Duration
	Logger             *slog.Logger
}

// TFS is the fake TF Serving as a tfs.Process.
type TFS struct {
	file tfs.FakeWrapper // reads the model config file as TF Serving's wrapper does
	opts Options

	mu      sync.Mutex
	srv     *faketfs.Server
	done    chan struct{}
	code    int
	stopped bool
}

var _ tfs.Process = (*TFS)(nil)

// New returns a fake TF Serving that will serve modelConfigFile once started.
func New(modelConfigFile string, opts Options) *TFS {
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	return &TFS{file: tfs.FakeWrapper{ModelConfigFile: modelConfigFile}, opts: opts}
}

// Start implements tfs.Process: it listens, loads the model config file and serves.
func (t *TFS) Start(context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.srv != nil || t.stopped {
		return errkind.New(errkind.Runtime, "in-process tfs: already started or stopped")
	}
	srv, err := faketfs.New(nil, faketfs.Options{
		Addr: fmt.Sprintf("%s:%d", t.opts.Host, t.opts.Port), StepInterval: t.opts.StepInterval,
		ConfigFile: t.file.ModelConfigFile, ConfigPollInterval: t.opts.ConfigPollInterval, Logger: t.opts.Logger,
	})
	if err != nil {
		return fmt.Errorf("in-process tfs: %w", err)
	}
	if err := srv.Start(); err != nil {
		srv.Stop(context.Background())
		return fmt.Errorf("in-process tfs: %w", err)
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

// Server is the fake (nil before Start): tests step it, the demo reads its address.
func (t *TFS) Server() *faketfs.Server {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.srv
}

// Addr is where it listens ("" before Start).
func (t *TFS) Addr() string {
	if s := t.Server(); s != nil {
		return s.Addr()
	}
	return ""
}

// Stop implements tfs.Process: in-flight RPCs get grace to finish.
func (t *TFS) Stop(grace time.Duration) error {
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
	return err
}

// Exited implements tfs.Process.
func (t *TFS) Exited() (bool, int) {
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
func (t *TFS) Done() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.done
}

// GRPCRemoteOp reports true: the fake is reached over gRPC, so the agent advertises gRPC
// addresses (a gRPC remote-op build of TF Serving).
func (t *TFS) GRPCRemoteOp() bool { return true }

// ModelConfigText implements tfs.Process.
func (t *TFS) ModelConfigText() (string, error) { return t.file.ModelConfigText() }

// ListSavedModels implements tfs.Process.
func (t *TFS) ListSavedModels() ([]string, error) { return t.file.ListSavedModels() }

// ListSavedModelsStatus implements tfs.Process as tfs.Wrapper does: for each configured model,
// its newest AVAILABLE version, else its newest; UNKNOWN when the fake has none.
func (t *TFS) ListSavedModelsStatus(ctx context.Context) (map[string]*servingapis.ModelVersionStatus, error) {
	names, err := t.ListSavedModels()
	if err != nil {
		return nil, err
	}
	srv := t.Server()
	if srv == nil {
		return nil, errkind.New(errkind.Runtime, "in-process tfs: not started")
	}
	out := map[string]*servingapis.ModelVersionStatus{}
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		list := srv.Mgr().Status(modelconfig.ModelSpec(name, modelconfig.Version{}, nil))
		out[name] = tfs.NewestAvailable(list)
	}
	return out, nil
}
