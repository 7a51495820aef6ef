package tfs

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	tfprotobuf "github.com/monolith-go/monolith/gen/pb/tensorflow/core/protobuf"
	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	servingconfig "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/config"
	servingutil "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/util"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/modelconfig"
)

// Deadlines of the monitor's RPCs. TF Serving can hang in a reload for good (tensorflow/serving
// #1565, #1447), so no call goes without one.
const (
	DefaultStatusTimeout = 5 * time.Second
	DefaultReloadTimeout = 60 * time.Second
)

// service is the connection to one TF Serving process.
type service struct {
	conn  *grpc.ClientConn
	model servingapis.ModelServiceClient
	pred  servingapis.PredictionServiceClient
}

type rpcState struct {
	mu       sync.Mutex
	services map[string]*service
	applied  map[string]*servingconfig.ModelServerConfig // last config each TF Serving accepted
}

// Connect opens a channel to each TF Serving this deploy type runs (entry and/or PS, dense when it
// runs alone). Channels connect lazily; RPCs fail until the process listens.
func (m *Monitor) Connect() error {
	m.rpc.mu.Lock()
	defer m.rpc.mu.Unlock()
	if m.rpc.services != nil {
		return errkind.New(errkind.Runtime, "tfs monitor: already connected")
	}
	c := m.conf
	want := map[string]*int{}
	if c.Deploy == agentconf.DeployMixed || c.Deploy == agentconf.ServerEntry {
		want[agentconf.ServerEntry] = c.TFSEntryPort
	}
	if c.Deploy == agentconf.DeployMixed || c.Deploy == agentconf.ServerPS {
		want[agentconf.ServerPS] = c.TFSPSPort
	}
	if c.DenseAlone && (c.Deploy == agentconf.DeployMixed || c.Deploy == agentconf.ServerDense) {
		want[agentconf.ServerDense] = c.TFSDensePort
	}
	services := map[string]*service{}
	for st, port := range want {
		if port == nil {
			closeAll(services)
			return errkind.New(errkind.Attribute, "tfs monitor: no %s port configured", st)
		}
		addr := fmt.Sprintf("%s:%d", m.Host(), *port)
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			closeAll(services)
			return fmt.Errorf("tfs monitor: dial %s %s: %w", st, addr, err)
		}
		services[st] = &service{conn: conn, model: servingapis.NewModelServiceClient(conn), pred: servingapis.NewPredictionServiceClient(conn)}
	}
	m.rpc.services = services
	if m.rpc.applied == nil {
		m.rpc.applied = map[string]*servingconfig.ModelServerConfig{}
	}
	return nil
}

func closeAll(s map[string]*service) {
	for _, sv := range s {
		sv.conn.Close()
	}
}

// Close closes the channels; Connect may be called again.
func (m *Monitor) Close() error {
	m.rpc.mu.Lock()
	defer m.rpc.mu.Unlock()
	closeAll(m.rpc.services)
	m.rpc.services = nil
	return nil
}

func (m *Monitor) service(st string) (*service, error) {
	m.rpc.mu.Lock()
	defer m.rpc.mu.Unlock()
	s := m.rpc.services[st]
	if s == nil {
		return nil, errkind.New(errkind.Runtime, "tfs monitor: not connected to the %s TF Serving", st)
	}
	return s, nil
}

func timeout(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// SubModelStatus is the status of one sub model of a publish.
type SubModelStatus struct {
	VersionPath string
	Status      *servingapis.ModelVersionStatus
}

// PublishStatus reads the status of every sub model of pm this host serves, keyed by
// "{model}:{sub model}": the highest version TF Serving reports; UNKNOWN with NOT_FOUND when it
// reports none; UNKNOWN with the gRPC code when the call fails. Dense nodes are asked for any
// version unless fixDenseVersion, other sub models for the version in their path.
func (m *Monitor) PublishStatus(ctx context.Context, pm datadef.PublishMeta, fixDenseVersion bool) (map[string]SubModelStatus, error) {
	served, err := m.served(pm)
	if err != nil {
		return nil, err
	}
	out := map[string]SubModelStatus{}
	for _, sv := range served {
		v, err := m.pinnedVersion(sv.SubModel, fixDenseVersion)
		if err != nil {
			return nil, err
		}
		svc, err := m.service(sv.ServiceType)
		if err != nil {
			return nil, err
		}
		cctx, cancel := context.WithTimeout(ctx, timeout(m.StatusTimeout, DefaultStatusTimeout))
		resp, err := svc.model.GetModelStatus(cctx, &servingapis.GetModelStatusRequest{
			ModelSpec: modelconfig.ModelSpec(sv.TFSName, modelconfig.Version{Number: v}, nil)})
		cancel()
		out[sv.TFSName] = SubModelStatus{VersionPath: sv.Path, Status: pickStatus(sv.TFSName, resp, err)}
	}
	return out, nil
}

func pickStatus(name string, resp *servingapis.GetModelStatusResponse, err error) *servingapis.ModelVersionStatus {
	if err != nil {
		return unknownStatus(err)
	}
	list := resp.GetModelVersionStatus()
	if len(list) == 0 {
		msg := name + " not found"
		return &servingapis.ModelVersionStatus{State: servingapis.ModelVersionStatus_UNKNOWN, Status: modelconfig.Status(tfprotobuf.Code_NOT_FOUND, &msg)}
	}
	sorted := append([]*servingapis.ModelVersionStatus(nil), list...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].GetVersion() < sorted[j].GetVersion() })
	return sorted[len(sorted)-1]
}

// VersionStatus asks the TF Serving serving name for its version statuses (all versions when v is
// zero); a name no service of this host serves gives none.
func (m *Monitor) VersionStatus(ctx context.Context, name string, v modelconfig.Version, signature *string) ([]*servingapis.ModelVersionStatus, error) {
	st, err := m.ServiceType(name)
	if err != nil || st == "" {
		return nil, err
	}
	svc, err := m.service(st)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout(m.StatusTimeout, DefaultStatusTimeout))
	defer cancel()
	resp, err := svc.model.GetModelStatus(ctx, &servingapis.GetModelStatusRequest{ModelSpec: modelconfig.ModelSpec(name, v, signature)})
	if err != nil {
		return nil, fmt.Errorf("tfs monitor: get model status %s: %w", name, err)
	}
	return resp.GetModelVersionStatus(), nil
}

// Reload sends cfg to the TF Serving of serviceType, with the default model added when missing so
// TF Serving never ends up with no model, and remembers it as the last applied config on success.
func (m *Monitor) Reload(ctx context.Context, serviceType string, cfg *servingconfig.ModelServerConfig) (*servingutil.StatusProto, error) {
	svc, err := m.service(serviceType)
	if err != nil {
		return nil, err
	}
	req := proto.Clone(cfg).(*servingconfig.ModelServerConfig)
	list := req.GetModelConfigList()
	if list == nil {
		list = &servingconfig.ModelConfigList{}
		req.Config = &servingconfig.ModelServerConfig_ModelConfigList{ModelConfigList: list}
	}
	hasDefault := false
	for _, mc := range list.GetConfig() {
		if mc.GetName() == "default" {
			hasDefault = true
		}
	}
	if !hasDefault {
		list.Config = append(list.Config, modelconfig.Default())
	}
	ctx, cancel := context.WithTimeout(ctx, timeout(m.ReloadTimeout, DefaultReloadTimeout))
	defer cancel()
	resp, err := svc.model.HandleReloadConfigRequest(ctx, &servingapis.ReloadConfigRequest{Config: req})
	if err != nil {
		return nil, fmt.Errorf("tfs monitor: reload %s: %w", serviceType, err)
	}
	m.rpc.mu.Lock()
	m.rpc.applied[serviceType] = req
	m.rpc.mu.Unlock()
	return resp.GetStatus(), nil
}

// AppliedConfig is the last config the TF Serving of serviceType accepted through this monitor
// (TF Serving cannot be asked for it), or nil.
func (m *Monitor) AppliedConfig(serviceType string) *servingconfig.ModelServerConfig {
	m.rpc.mu.Lock()
	defer m.rpc.mu.Unlock()
	if c := m.rpc.applied[serviceType]; c != nil {
		return proto.Clone(c).(*servingconfig.ModelServerConfig)
	}
	return nil
}

// unknownStatus is the UNKNOWN status standing for a failed GetModelStatus, with its gRPC code
// (gRPC status codes and TensorFlow error codes share their numbers) and message.
func unknownStatus(err error) *servingapis.ModelVersionStatus {
	s := status.Convert(err)
	msg := s.Message()
	return &servingapis.ModelVersionStatus{State: servingapis.ModelVersionStatus_UNKNOWN, Status: modelconfig.Status(tfprotobuf.Code(s.Code()), &msg)}
}
