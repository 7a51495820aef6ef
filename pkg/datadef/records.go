package datadef

import (
	datadefspec "github.com/monolith-go/monolith/gen/spec/agent_service/data_def"
	"github.com/monolith-go/monolith/gen/spec/pydataclass"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// The enums of data_def.py (generated).
type (
	// ModelState is TF Serving's ModelVersionStatus.State.
	ModelState = datadefspec.ModelState
	// PublishType says whether a publish loads or unloads a model.
	PublishType = datadefspec.PublishType
	// EventType says which handler an event is for.
	EventType = datadefspec.EventType
	// SubModel maps a sub model name (entry, ps_0, dense_0) to its version path.
	SubModel = datadefspec.SubModel
)

// The enums' members.
const (
	StateUnknown   = datadefspec.StateUnknown
	StateStart     = datadefspec.StateStart
	StateLoading   = datadefspec.StateLoading
	StateAvailable = datadefspec.StateAvailable
	StateUnloading = datadefspec.StateUnloading
	StateEnd       = datadefspec.StateEnd

	PublishLoad   = datadefspec.PublishLoad
	PublishUnload = datadefspec.PublishUnload

	EventPortal   = datadefspec.EventPortal
	EventService  = datadefspec.EventService
	EventPublish  = datadefspec.EventPublish
	EventResource = datadefspec.EventResource
	EventUnknown  = datadefspec.EventUnknown
)

// The records are the generated structs as types of this package, so that they carry the
// reference's behaviour defined here.
type (
	// ModelMeta describes a model under /{bzid}/portal.
	ModelMeta datadefspec.ModelMeta
	// ResourceSpec is a host's resources, under /{bzid}/resource.
	ResourceSpec datadefspec.ResourceSpec
	// PublishMeta is a publish request under /{bzid}/publish; SubModels keeps its order (the
	// serialized bytes follow it), nil is None.
	PublishMeta datadefspec.PublishMeta
	// ReplicaMeta is a serving replica under /{bzid}/service.
	ReplicaMeta datadefspec.ReplicaMeta
	// Event is a unit of work for the agent's handlers.
	Event datadefspec.Event
)

// codecErr gives a generated codec's error its errkind (the Python exception it stands for).
func codecErr(err error) error {
	if e, ok := err.(*pydataclass.Error); ok {
		if k, perr := errkind.Parse(e.Kind); perr == nil {
			return errkind.Wrap(k, e)
		}
	}
	return err
}

// NewModelMeta returns a ModelMeta with the reference's defaults.
func NewModelMeta() ModelMeta { return ModelMeta(datadefspec.NewModelMeta()) }

// PyDict is the record as the reference holds it, in field order.
func (m ModelMeta) PyDict() pydataclass.Value { return datadefspec.ModelMeta(m).PyDict() }

// Serialize writes the reference's JSON bytes.
func (m ModelMeta) Serialize() []byte { return datadefspec.ModelMeta(m).Serialize() }

// DeserializeModelMeta reads a serialized ModelMeta.
func DeserializeModelMeta(b []byte) (ModelMeta, error) {
	v, err := datadefspec.DeserializeModelMeta(b)
	return ModelMeta(v), codecErr(err)
}

// NewResourceSpec returns a ResourceSpec with the reference's defaults.
func NewResourceSpec() ResourceSpec { return ResourceSpec(datadefspec.NewResourceSpec()) }

// PyDict is the record as the reference holds it, in field order.
func (r ResourceSpec) PyDict() pydataclass.Value { return datadefspec.ResourceSpec(r).PyDict() }

// Serialize writes the reference's JSON bytes (an int read into a float field written as the int).
func (r ResourceSpec) Serialize() []byte { return datadefspec.ResourceSpec(r).Serialize() }

// DeserializeResourceSpec reads a serialized ResourceSpec.
func DeserializeResourceSpec(b []byte) (ResourceSpec, error) {
	v, err := datadefspec.DeserializeResourceSpec(b)
	return ResourceSpec(v), codecErr(err)
}

// NewPublishMeta returns a PublishMeta with the reference's defaults.
func NewPublishMeta() PublishMeta { return PublishMeta(datadefspec.NewPublishMeta()) }

// PyDict is the record as the reference holds it, in field order.
func (p PublishMeta) PyDict() pydataclass.Value { return datadefspec.PublishMeta(p).PyDict() }

// Serialize writes the reference's JSON bytes.
func (p PublishMeta) Serialize() []byte { return datadefspec.PublishMeta(p).Serialize() }

// DeserializePublishMeta reads a serialized PublishMeta.
func DeserializePublishMeta(b []byte) (PublishMeta, error) {
	v, err := datadefspec.DeserializePublishMeta(b)
	return PublishMeta(v), codecErr(err)
}

// NewReplicaMeta returns a ReplicaMeta with the reference's defaults.
func NewReplicaMeta() ReplicaMeta { return ReplicaMeta(datadefspec.NewReplicaMeta()) }

// PyDict is the record as the reference holds it, in field order.
func (r ReplicaMeta) PyDict() pydataclass.Value { return datadefspec.ReplicaMeta(r).PyDict() }

// Serialize writes the reference's JSON bytes.
func (r ReplicaMeta) Serialize() []byte { return datadefspec.ReplicaMeta(r).Serialize() }

// DeserializeReplicaMeta reads a serialized ReplicaMeta.
func DeserializeReplicaMeta(b []byte) (ReplicaMeta, error) {
	v, err := datadefspec.DeserializeReplicaMeta(b)
	return ReplicaMeta(v), codecErr(err)
}

// NewEvent returns an Event with the reference's defaults.
func NewEvent() Event { return Event(datadefspec.NewEvent()) }

// PyDict is the record as the reference holds it, in field order (data as its byte values).
func (e Event) PyDict() pydataclass.Value { return datadefspec.Event(e).PyDict() }

// Serialize writes the reference's JSON bytes (data as a list of byte values).
func (e Event) Serialize() []byte { return datadefspec.Event(e).Serialize() }

// DeserializeEvent reads a serialized Event. Unlike the reference, which cannot decode its own
// bytes field, data is read back from the list of byte values.
func DeserializeEvent(b []byte) (Event, error) {
	v, err := datadefspec.DeserializeEvent(b)
	return Event(v), codecErr(err)
}
