package backend

import (
	"strings"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pyjson"
)

// SavedModel names one sub-graph of an exported model ("entry", "ps_0", ...). It is comparable,
// so it can key maps and sets, like the reference's frozen dataclass.
type SavedModel struct {
	ModelName string
	SubGraph  string
}

// String is "model_name:sub_graph", the form used in layout node names.
func (s SavedModel) String() string { return s.ModelName + ":" + s.SubGraph }

// ParseSavedModel reads "model_name:sub_graph[:...]" as the reference does (child.split(":")[:2]):
// fields after the second are ignored. A name without ":" is a Value error.
func ParseSavedModel(s string) (SavedModel, error) {
	parts := strings.Split(s, ":")
	if len(parts) < 2 {
		return SavedModel{}, errkind.New(errkind.Value, "saved model %q: want model_name:sub_graph", s)
	}
	return SavedModel{ModelName: parts[0], SubGraph: parts[1]}, nil
}

// Container is a serving container: its cluster (which may hold ";", e.g. "psm;idc;cluster") and
// its id within the cluster.
type Container struct {
	Cluster string
	ID      string
}

// String is "cluster:id", the form used in binding and container_service node names.
func (c Container) String() string { return c.Cluster + ":" + c.ID }

// SavedModelDeployConfig says where a saved model's versions are and which ones to serve. A nil
// field is Python's None (serialized as null).
type SavedModelDeployConfig struct {
	ModelBasePath *string
	VersionPolicy *string
}

// Serialize returns the bytes the reference stores (dataclasses-json to_json, UTF-8):
// {"model_base_path": ..., "version_policy": ...}.
func (c SavedModelDeployConfig) Serialize() []byte {
	var w pyjson.Writer
	w.OptStr("model_base_path", c.ModelBasePath)
	w.OptStr("version_policy", c.VersionPolicy)
	return w.Bytes()
}

// DeserializeSavedModelDeployConfig reads what Serialize writes. Absent keys stay None, unknown
// keys are ignored (as dataclasses-json does); a value that is neither a string nor null is a Type
// error naming the field (the reference would keep it with the wrong type).
func DeserializeSavedModelDeployConfig(data []byte) (SavedModelDeployConfig, error) {
	var c SavedModelDeployConfig
	o, err := pyjson.Parse("SavedModelDeployConfig", data)
	if err != nil {
		return c, err
	}
	if err := o.OptStr("model_base_path", &c.ModelBasePath); err != nil {
		return c, err
	}
	if err := o.OptStr("version_policy", &c.VersionPolicy); err != nil {
		return c, err
	}
	return c, nil
}

// ContainerServiceInfo is how a container can be reached; nil fields are None.
type ContainerServiceInfo struct {
	GRPC      *string // gRPC ip:port
	HTTP      *string // HTTP ip:port
	Archon    *string // archon ip:port
	Agent     *string // agent ip:port
	IDC       *string // data centre name
	DebugInfo *string
}

// Serialize returns the bytes the reference stores:
// {"grpc": ..., "http": ..., "archon": ..., "agent": ..., "idc": ..., "debug_info": ...}.
func (s ContainerServiceInfo) Serialize() []byte {
	var w pyjson.Writer
	w.OptStr("grpc", s.GRPC)
	w.OptStr("http", s.HTTP)
	w.OptStr("archon", s.Archon)
	w.OptStr("agent", s.Agent)
	w.OptStr("idc", s.IDC)
	w.OptStr("debug_info", s.DebugInfo)
	return w.Bytes()
}

// DeserializeContainerServiceInfo reads what Serialize writes, with the rules of
// DeserializeSavedModelDeployConfig.
func DeserializeContainerServiceInfo(data []byte) (ContainerServiceInfo, error) {
	var s ContainerServiceInfo
	o, err := pyjson.Parse("ContainerServiceInfo", data)
	if err != nil {
		return s, err
	}
	for _, f := range []struct {
		name string
		dst  **string
	}{{"grpc", &s.GRPC}, {"http", &s.HTTP}, {"archon", &s.Archon}, {"agent", &s.Agent}, {"idc", &s.IDC}, {"debug_info", &s.DebugInfo}} {
		if err := o.OptStr(f.name, f.dst); err != nil {
			return s, err
		}
	}
	return s, nil
}
