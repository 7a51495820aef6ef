package backend

import (
	"strings"

	backendsspec "github.com/monolith-go/monolith/gen/spec/agent_service/backends"
	"github.com/monolith-go/monolith/gen/spec/pydataclass"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// The dataclasses of backends.py: fields and JSON codecs generated from
// specs/agent_service/backends.yaml (gen/spec/agent_service/backends), as types of this package so
// that they carry the behaviour defined here.
type (
	// SavedModel names one sub-graph of an exported model ("entry", "ps_0", ...). It is comparable,
	// so it can key maps and sets, like the reference's frozen dataclass.
	SavedModel backendsspec.SavedModel
	// Container is a serving container: its cluster (which may hold ";", e.g. "psm;idc;cluster")
	// and its id within the cluster.
	Container backendsspec.Container
	// SavedModelDeployConfig says where a saved model's versions are and which ones to serve. A
	// nil field is Python's None (serialized as null).
	SavedModelDeployConfig backendsspec.SavedModelDeployConfig
	// ContainerServiceInfo is how a container can be reached; nil fields are None.
	ContainerServiceInfo backendsspec.ContainerServiceInfo
)

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

// String is "cluster:id", the form used in binding and container_service node names.
func (c Container) String() string { return c.Cluster + ":" + c.ID }

// PyDict is the config as the reference's dataclass holds it, in field order.
func (c SavedModelDeployConfig) PyDict() pydataclass.Value {
	return backendsspec.SavedModelDeployConfig(c).PyDict()
}

// Serialize returns the bytes the reference stores (dataclasses-json to_json, UTF-8):
// {"model_base_path": ..., "version_policy": ...}.
func (c SavedModelDeployConfig) Serialize() []byte {
	return backendsspec.SavedModelDeployConfig(c).Serialize()
}

// DeserializeSavedModelDeployConfig reads what Serialize writes. Absent keys stay None, unknown
// keys are ignored (as dataclasses-json does); a value that is neither a string nor null is a Type
// error naming the field (the reference would keep it with the wrong type); JSON that is not an
// object is an Attribute error, as in the reference.
func DeserializeSavedModelDeployConfig(data []byte) (SavedModelDeployConfig, error) {
	v, err := backendsspec.DeserializeSavedModelDeployConfig(data)
	return SavedModelDeployConfig(v), codecErr(err)
}

// PyDict is the info as the reference's dataclass holds it, in field order.
func (s ContainerServiceInfo) PyDict() pydataclass.Value {
	return backendsspec.ContainerServiceInfo(s).PyDict()
}

// Serialize returns the bytes the reference stores:
// {"grpc": ..., "http": ..., "archon": ..., "agent": ..., "idc": ..., "debug_info": ...}.
func (s ContainerServiceInfo) Serialize() []byte {
	return backendsspec.ContainerServiceInfo(s).Serialize()
}

// DeserializeContainerServiceInfo reads what Serialize writes, with the rules of
// DeserializeSavedModelDeployConfig.
func DeserializeContainerServiceInfo(data []byte) (ContainerServiceInfo, error) {
	v, err := backendsspec.DeserializeContainerServiceInfo(data)
	return ContainerServiceInfo(v), codecErr(err)
}

// codecErr gives a generated codec's error its errkind (the Python exception it stands for).
func codecErr(err error) error {
	if e, ok := err.(*pydataclass.Error); ok {
		if k, perr := errkind.Parse(e.Kind); perr == nil {
			return errkind.Wrap(k, e)
		}
	}
	return err
}
