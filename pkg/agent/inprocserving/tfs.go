package inprocserving

import (
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	"github.com/monolith-go/monolith/pkg/agent/v3/inproc"
	"github.com/monolith-go/monolith/pkg/modelserver"
	"github.com/monolith-go/monolith/pkg/modelserver/entry"
	"github.com/monolith-go/monolith/pkg/modelserver/psshard"
	"github.com/monolith-go/monolith/pkg/tfs"
)

// entryTimeout bounds one lookup of the entry on a PS replica (cmd/model_server's
// --archon_entry_to_ps_rpc_timeout).
const entryTimeout = 5 * time.Second

// modelServerTFS runs the model server (pkg/modelserver, cmd/model_server's core) in the agent's
// process as its tfs.Process (inproc.Process): the agent drives it as it drives
// tensorflow_model_server (model config file, HandleReloadConfigRequest, GetModelStatus), and its
// entries find the PS replicas through the agent's HeartBeat, as cmd/model_server's do.
type modelServerTFS struct {
	*inproc.Process
}

var _ tfs.Process = (*modelServerTFS)(nil)

// newModelServerTFS serves modelConfigFile on port once started; agentAddr is the agent's
// AgentService, asked when an entry first needs its PS replicas (the agent listens once it has
// started this server). The PS sub-graphs report parameter sync's event times to the server's
// metrics and to observe (when set).
func newModelServerTFS(modelConfigFile string, port int, agentAddr func() string, observe psshard.Observer, log *slog.Logger) *modelServerTFS {
	return &modelServerTFS{inproc.NewProcess("in-process model server", modelConfigFile, func() (inproc.Server, func(), error) {
		metrics := modelserver.NewMetrics()
		replicas := agentReplicas(agentAddr, log)
		loader := entry.NewLoader(entry.Config{Replicas: replicas, Timeout: entryTimeout,
			Metrics: entry.NewMetrics(metrics.Registry()), Logger: log})
		release := func() {
			loader.Close()
			replicas.Close()
		}
		srv, err := modelserver.New(nil, modelserver.Options{
			Addr: fmt.Sprintf("127.0.0.1:%d", port),
			Manager: modelserver.ManagerOptions{
				Loaders: modelserver.Loaders{modelserver.KindPS: psshard.NewLoader(func(model string, ms int64) {
					metrics.Fresh(model, ms)
					if observe != nil {
						observe(model, ms)
					}
				}), modelserver.KindEntry: loader.Load},
			},
			ConfigFile: modelConfigFile, FileSystemPollInterval: time.Second, Metrics: metrics, Logger: log,
		})
		if err != nil {
			release()
			return nil, nil, err
		}
		return modelServer{srv}, release, nil
	})}
}

// modelServer is the model server as an inproc.Server.
type modelServer struct{ *modelserver.Server }

// Status is spec's versions; a model the server does not know yet (the config not applied) has
// none, so the agent sees it UNKNOWN.
func (s modelServer) Status(spec *servingapis.ModelSpec) []*servingapis.ModelVersionStatus {
	list, _ := s.Manager().Status(spec)
	return list
}

// agentReplicas asks the agent's HeartBeat for the PS replicas (entry.AgentReplicas), starting when
// an entry first needs them, once the agent listens.
func agentReplicas(addr func() string, log *slog.Logger) *entry.LazyReplicas {
	return &entry.LazyReplicas{
		New: func() (*entry.AgentReplicas, error) {
			a := addr()
			if a == "" {
				return nil, status.Error(codes.Unavailable, "the agent's AgentService does not listen yet")
			}
			r, err := entry.NewAgentReplicas(entry.AgentOptions{Addr: a, Interval: SyncInterval, Logger: log})
			if err != nil {
				return nil, status.Errorf(codes.Unavailable, "agent %s: %v", a, err)
			}
			return r, nil
		},
		Stopped: status.Error(codes.Unavailable, "in-process model server stopped"),
	}
}
