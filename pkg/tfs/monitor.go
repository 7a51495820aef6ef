// Package tfs drives TensorFlow Serving: the monitor (tfs_monitor.py) that turns publishes into
// model server configs, reloads them and reads model status over gRPC, every call with a deadline.
package tfs

import (
	"strings"
	"sync"
	"time"

	servingconfig "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/config"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/modelconfig"
	"github.com/monolith-go/monolith/pkg/pathutil"
	"github.com/monolith-go/monolith/pkg/pyfmt"
	"github.com/monolith-go/monolith/pkg/pyint"
)

// Monitor talks to the TF Serving processes of one agent (entry, PS and dense ports).
type Monitor struct {
	conf *agentconf.AgentConfig

	mu     sync.Mutex
	host   string
	pinned bool // host set by SetHost: never re-resolved

	rpc rpcState

	// StatusTimeout and ReloadTimeout bound each GetModelStatus and HandleReloadConfigRequest
	// (defaults DefaultStatusTimeout, DefaultReloadTimeout).
	StatusTimeout, ReloadTimeout time.Duration
}

// NewMonitor returns a monitor for conf.
func NewMonitor(conf *agentconf.AgentConfig) *Monitor { return &Monitor{conf: conf} }

// Host is the local IP the TF Serving processes listen on.
func (m *Monitor) Host() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.pinned && (m.host == "" || m.host == "localhost" || m.host == "127.0.0.1") {
		m.host = agentconf.LocalIP(m.conf.LookupEnv)
	}
	return m.host
}

// SetHost pins the address the TF Serving processes are reached at (tests, or a host whose own
// address resolution is wrong); without it the local IP is used.
func (m *Monitor) SetHost(host string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.host, m.pinned = host, true
}

func isEntry(name string) bool { return strings.HasPrefix(name, agentconf.ServerEntry) }
func isPS(name string) bool    { return strings.HasPrefix(name, agentconf.ServerPS) }
func isDense(name string) bool { return strings.HasPrefix(name, agentconf.ServerDense) }

// Addr is host:port of the TF Serving that serves subModel. A sub model that this deploy type
// does not serve is an error (kind Precondition).
func (m *Monitor) Addr(subModel string) (string, error) {
	c := m.conf
	wrong := func() (string, error) {
		return "", errkind.New(errkind.Precondition, "sub model %q is not served by deploy type %s", subModel, c.Deploy)
	}
	var port *int
	switch c.Deploy {
	case agentconf.DeployMixed:
		switch {
		case isEntry(subModel):
			port = c.TFSEntryPort
		case isPS(subModel):
			port = c.TFSPSPort
		default:
			port = c.TFSDensePort
		}
	case agentconf.ServerEntry:
		if !isEntry(subModel) {
			return wrong()
		}
		port = c.TFSEntryPort
	case agentconf.ServerPS:
		if !isPS(subModel) {
			return wrong()
		}
		port = c.TFSPSPort
	case agentconf.ServerDense:
		if !isDense(subModel) {
			return wrong()
		}
		port = c.TFSDensePort
	default:
		return "", errkind.New(errkind.Runtime, "deploy_type %s is error", c.Deploy)
	}
	return m.Host() + ":" + pyfmt.OptInt(port), nil
}

// ServiceType is the server type (entry, ps, dense) serving subModel under this deploy type, or ""
// when it serves none.
func (m *Monitor) ServiceType(subModel string) (string, error) {
	switch m.conf.Deploy {
	case agentconf.ServerEntry, agentconf.ServerPS, agentconf.ServerDense:
		if strings.HasPrefix(subModel, string(m.conf.Deploy)) {
			return string(m.conf.Deploy), nil
		}
		return "", nil
	case agentconf.DeployMixed:
		for _, t := range []string{agentconf.ServerEntry, agentconf.ServerPS, agentconf.ServerDense} {
			if strings.HasPrefix(subModel, t) {
				return t, nil
			}
		}
		return "", nil
	}
	return "", errkind.New(errkind.Precondition, "deploy type %s has no TF Serving service types", m.conf.Deploy)
}

// isDenseNode: the sub model holding the dense part (entry unless dense runs alone).
func (m *Monitor) isDenseNode(subModel string) bool {
	return (!m.conf.DenseAlone && isEntry(subModel)) || (m.conf.DenseAlone && isDense(subModel))
}

// versionOf reads the version from a version path's last element (/base/ps_0/123 -> 123): the
// text after the last "/", as os.path.basename (so "/base/ps_0/123/" has none: a Value error).
func versionOf(versionPath string) (int64, error) {
	base := versionPath[strings.LastIndexByte(versionPath, '/')+1:]
	v, err := pyint.Parse(base)
	if err != nil {
		return 0, errkind.New(errkind.Value, "version path %q: %q is not a version number", versionPath, base)
	}
	return v, nil
}

// GenModelConfig builds one ModelServerConfig per server type (entry, ps, dense) for the loaded
// publishes: UNLOAD publishes and sub models this deploy type does not serve are skipped; dense
// nodes follow the latest version unless fixDenseVersion, other sub models their exact version.
func (m *Monitor) GenModelConfig(pms []datadef.PublishMeta, fixDenseVersion bool) (map[string]*servingconfig.ModelServerConfig, error) {
	lists := map[string][]*servingconfig.ModelConfig{}
	for _, pm := range pms {
		if pm.PType == datadef.PublishUnload {
			continue
		}
		served, err := m.served(pm)
		if err != nil {
			return nil, err
		}
		for _, sv := range served {
			v, err := m.pinnedVersion(sv.SubModel, fixDenseVersion)
			if err != nil {
				return nil, err
			}
			policy, data := modelconfig.PolicyLatest, modelconfig.VersionData{N: 1}
			if v != nil {
				policy, data = modelconfig.PolicySpecific, modelconfig.VersionData{N: *v}
			}
			mc, err := modelconfig.ModelConfig(sv.TFSName, pathutil.Dirname(sv.Path), policy, data, nil)
			if err != nil {
				return nil, err
			}
			lists[sv.ServiceType] = append(lists[sv.ServiceType], mc)
		}
	}
	out := map[string]*servingconfig.ModelServerConfig{}
	for _, st := range []string{agentconf.ServerEntry, agentconf.ServerPS, agentconf.ServerDense} {
		msc := &servingconfig.ModelServerConfig{}
		if len(lists[st]) > 0 {
			msc.Config = &servingconfig.ModelServerConfig_ModelConfigList{ModelConfigList: &servingconfig.ModelConfigList{Config: lists[st]}}
		}
		out[st] = msc
	}
	return out, nil
}

// servedSubModel is a sub model of a publish that one of this host's TF Servings serves.
type servedSubModel struct {
	datadef.SubModel
	TFSName     string // {model}:{sub model}
	ServiceType string
}

// served lists pm's sub models this deploy type serves, in publish order.
func (m *Monitor) served(pm datadef.PublishMeta) ([]servedSubModel, error) {
	model := pyfmt.OptStr(pm.ModelName)
	var out []servedSubModel
	for _, sm := range pm.SubModels {
		st, err := m.ServiceType(sm.Name)
		if err != nil {
			return nil, err
		}
		if st != "" {
			out = append(out, servedSubModel{SubModel: sm, TFSName: model + ":" + sm.Name, ServiceType: st})
		}
	}
	return out, nil
}

// pinnedVersion is the version a sub model is served at: the one in its path, except for dense
// nodes, which follow the latest version (nil) unless fixDenseVersion.
func (m *Monitor) pinnedVersion(sm datadef.SubModel, fixDenseVersion bool) (*int64, error) {
	if m.isDenseNode(sm.Name) && !fixDenseVersion {
		return nil, nil
	}
	v, err := versionOf(sm.Path)
	if err != nil {
		return nil, err
	}
	return &v, nil
}
