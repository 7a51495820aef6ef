// Package inproc runs a server of the agent's process as its tfs.Process (Process), for the
// agent's demo (cmd/agent with no flags: the model server) and tests (TFS: the fake TF Serving,
// pkg/tfs/faketfs): a real gRPC server on TF Serving's port, driven by the agent exactly as it
// drives tensorflow_model_server (model config file, HandleReloadConfigRequest, GetModelStatus),
// with nothing to install.
package inproc

import (
	"fmt"
	"log/slog"
	"time"

	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
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
	*Process
}

var _ tfs.Process = (*TFS)(nil)

// New returns a fake TF Serving that will serve modelConfigFile once started.
func New(modelConfigFile string, opts Options) *TFS {
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	return &TFS{NewProcess("in-process tfs", modelConfigFile, func() (Server, func(), error) {
		srv, err := faketfs.New(nil, faketfs.Options{
			Addr: fmt.Sprintf("%s:%d", opts.Host, opts.Port), StepInterval: opts.StepInterval,
			ConfigFile: modelConfigFile, ConfigPollInterval: opts.ConfigPollInterval, Logger: opts.Logger,
		})
		if err != nil {
			return nil, nil, err
		}
		return fakeServer{srv}, nil, nil
	})}
}

// Server is the fake (nil before Start): tests step it, the demo reads its address.
func (t *TFS) Server() *faketfs.Server {
	if s, ok := t.running().(fakeServer); ok {
		return s.Server
	}
	return nil
}

// fakeServer is the fake as a Server.
type fakeServer struct{ *faketfs.Server }

func (s fakeServer) Status(spec *servingapis.ModelSpec) []*servingapis.ModelVersionStatus {
	return s.Mgr().Status(spec)
}
