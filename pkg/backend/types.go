package backend

import (
	"strings"

	"github.com/monolith-go/monolith/pkg/datadef/pydataclass"
	"github.com/monolith-go/monolith/pkg/errkind"
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

// PyDict is the config as the reference's dataclass holds it, in field order.
func (c SavedModelDeployConfig) PyDict() pydataclass.Value {
	return pydataclass.DictOf(
		pydataclass.Member{Key: "model_base_path", Val: pydataclass.OptStrV(c.ModelBasePath)},
		pydataclass.Member{Key: "version_policy", Val: pydataclass.OptStrV(c.VersionPolicy)},
	)
}

// Serialize returns the bytes the reference stores (dataclasses-json to_json, UTF-8):
// {"model_base_path": ..., "version_policy": ...}.
func (c SavedModelDeployConfig) Serialize() []byte { return c.PyDict().JSON() }

// DeserializeSavedModelDeployConfig reads what Serialize writes. Absent keys stay None, unknown
// keys are ignored (as dataclasses-json does); a value that is neither a string nor null is a Type
// error naming the field (the reference would keep it with the wrong type); JSON that is not an
// object is an Attribute error, as in the reference.
func DeserializeSavedModelDeployConfig(data []byte) (SavedModelDeployConfig, error) {
	var c SavedModelDeployConfig
	o, err := pydataclass.Decode("SavedModelDeployConfig", data)
	if err != nil {
		return c, codecErr(err)
	}
	err = pydataclass.First(o.OptStr("model_base_path", &c.ModelBasePath), o.OptStr("version_policy", &c.VersionPolicy))
	return c, codecErr(err)
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

// PyDict is the info as the reference's dataclass holds it, in field order.
func (s ContainerServiceInfo) PyDict() pydataclass.Value {
	return pydataclass.DictOf(
		pydataclass.Member{Key: "grpc", Val: pydataclass.OptStrV(s.GRPC)},
		pydataclass.Member{Key: "http", Val: pydataclass.OptStrV(s.HTTP)},
		pydataclass.Member{Key: "archon", Val: pydataclass.OptStrV(s.Archon)},
		pydataclass.Member{Key: "agent", Val: pydataclass.OptStrV(s.Agent)},
		pydataclass.Member{Key: "idc", Val: pydataclass.OptStrV(s.IDC)},
		pydataclass.Member{Key: "debug_info", Val: pydataclass.OptStrV(s.DebugInfo)},
	)
}

// Serialize returns the bytes the reference stores:
// {"grpc": ..., "http": ..., "archon": ..., "agent": ..., "idc": ..., "debug_info": ...}.
func (s ContainerServiceInfo) Serialize() []byte { return s.PyDict().JSON() }

// DeserializeContainerServiceInfo reads what Serialize writes, with the rules of
// DeserializeSavedModelDeployConfig.
func DeserializeContainerServiceInfo(data []byte) (ContainerServiceInfo, error) {
	var s ContainerServiceInfo
	o, err := pydataclass.Decode("ContainerServiceInfo", data)
	if err != nil {
		return s, codecErr(err)
	}
	err = pydataclass.First(o.OptStr("grpc", &s.GRPC), o.OptStr("http", &s.HTTP), o.OptStr("archon", &s.Archon),
		o.OptStr("agent", &s.Agent), o.OptStr("idc", &s.IDC), o.OptStr("debug_info", &s.DebugInfo))
	return s, codecErr(err)
}

// codecErr gives a pydataclass error its errkind.
func codecErr(err error) error {
	if e, ok := err.(*pydataclass.Error); ok {
		if k, perr := errkind.Parse(e.Kind); perr == nil {
			return errkind.Wrap(k, e)
		}
	}
	return err
}
