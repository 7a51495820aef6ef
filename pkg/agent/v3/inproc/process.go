package inproc

import (
	"context"
	"fmt"
	"sync"
	"time"

	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/modelconfig"
	"github.com/monolith-go/monolith/pkg/tfs"
)

// Server is a gRPC server of this process that a Process runs as TF Serving: Start serves, Wait
// returns once it stopped serving (nil after Stop), Stop stops it (in-flight RPCs finish until ctx
// ends); stopping twice is harmless.
type Server interface {
	Start() error
	Wait() error
	Stop(ctx context.Context) error
	Addr() string
	// Status is the versions of spec's model the server has (none for a model it does not know).
	Status(spec *servingapis.ModelSpec) []*servingapis.ModelVersionStatus
}

// NewServer makes the server a Process runs at Start, with release (nil: none), which frees what
// was made with it once the server has stopped or failed to start. On an error it frees what it
// made itself.
type NewServer func() (srv Server, release func(), err error)

// Process runs a Server inside the agent's process as its tfs.Process: the agent drives it as it
// drives tensorflow_model_server (model config file, HandleReloadConfigRequest, GetModelStatus).
type Process struct {
	file      tfs.FakeWrapper // reads the model config file as TF Serving's wrapper does
	what      string          // names the process in errors
	newServer NewServer

	mu      sync.Mutex
	srv     Server
	release func()
	done    chan struct{}
	code    int
	stopped bool
}

var _ tfs.Process = (*Process)(nil)

// NewProcess returns a process that serves modelConfigFile with the server newServer makes once
// started; what names it in errors ("in-process tfs").
func NewProcess(what, modelConfigFile string, newServer NewServer) *Process {
	return &Process{file: tfs.FakeWrapper{ModelConfigFile: modelConfigFile}, what: what, newServer: newServer}
}

// Start implements tfs.Process: it makes the server, which listens, loads the model config file
// and serves.
func (p *Process) Start(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.srv != nil || p.stopped {
		return errkind.New(errkind.Runtime, "%s: already started or stopped", p.what)
	}
	srv, release, err := p.newServer()
	if err != nil {
		return fmt.Errorf("%s: %w", p.what, err)
	}
	if err := srv.Start(); err != nil {
		srv.Stop(context.Background())
		if release != nil {
			release()
		}
		return fmt.Errorf("%s: %w", p.what, err)
	}
	p.srv, p.release, p.done = srv, release, make(chan struct{})
	go func() {
		err := srv.Wait()
		p.mu.Lock()
		if err != nil {
			p.code = 1
		}
		p.mu.Unlock()
		close(p.done)
	}()
	return nil
}

// running is the server (nil before Start).
func (p *Process) running() Server {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.srv
}

// Addr is where it listens ("" before Start).
func (p *Process) Addr() string {
	if s := p.running(); s != nil {
		return s.Addr()
	}
	return ""
}

// Stop implements tfs.Process: in-flight RPCs get grace to finish; then what was made with the
// server is released (once).
func (p *Process) Stop(grace time.Duration) error {
	p.mu.Lock()
	srv, done, release := p.srv, p.done, p.release
	p.release = nil
	p.stopped = true
	p.mu.Unlock()
	if srv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := srv.Stop(ctx)
	<-done
	if release != nil {
		release()
	}
	return err
}

// Exited implements tfs.Process.
func (p *Process) Exited() (bool, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		return false, 0
	}
	select {
	case <-p.done:
		return true, p.code
	default:
		return false, 0
	}
}

// Done is closed when the server has stopped (nil before Start), as tfs.Wrapper's.
func (p *Process) Done() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// GRPCRemoteOp reports true: the server is reached over gRPC, so the agent advertises gRPC
// addresses (a gRPC remote-op build of TF Serving).
func (p *Process) GRPCRemoteOp() bool { return true }

// ModelConfigText implements tfs.Process.
func (p *Process) ModelConfigText() (string, error) { return p.file.ModelConfigText() }

// ListSavedModels implements tfs.Process.
func (p *Process) ListSavedModels() ([]string, error) { return p.file.ListSavedModels() }

// ListSavedModelsStatus implements tfs.Process as tfs.Wrapper does: for each configured model,
// its newest AVAILABLE version, else its newest; UNKNOWN when the server has none.
func (p *Process) ListSavedModelsStatus(ctx context.Context) (map[string]*servingapis.ModelVersionStatus, error) {
	names, err := p.ListSavedModels()
	if err != nil {
		return nil, err
	}
	srv := p.running()
	if srv == nil {
		return nil, errkind.New(errkind.Runtime, "%s: not started", p.what)
	}
	out := map[string]*servingapis.ModelVersionStatus{}
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out[name] = tfs.NewestAvailable(srv.Status(modelconfig.ModelSpec(name, modelconfig.Version{}, nil)))
	}
	return out, nil
}

// ListModelVersions is every version the server has of each configured model, as GetModelStatus
// answers it (agentv3.VersionLister): the agent sees the failed loads of versions other than the
// newest AVAILABLE one. A model the server does not know has none.
func (p *Process) ListModelVersions(ctx context.Context) (map[string][]*servingapis.ModelVersionStatus, error) {
	names, err := p.ListSavedModels()
	if err != nil {
		return nil, err
	}
	srv := p.running()
	if srv == nil {
		return nil, errkind.New(errkind.Runtime, "%s: not started", p.what)
	}
	out := map[string][]*servingapis.ModelVersionStatus{}
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out[name] = srv.Status(modelconfig.ModelSpec(name, modelconfig.Version{}, nil))
	}
	return out, nil
}
