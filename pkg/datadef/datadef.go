// Package datadef holds the agent's data model (monolith/agent_service/data_def.py): the records
// stored in ZooKeeper and passed between the agent's parts. Serialize writes the bytes Python's
// json.dumps writes for the reference's dataclasses (the reference compares stored bytes before
// rewriting a node, so they must be identical); Deserialize fills absent keys with defaults, ignores
// unknown keys and rejects values of the wrong type, naming the field.
package datadef

import (
	"strconv"
	"strings"

	servingutil "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/util"
	"github.com/monolith-go/monolith/pkg/datadef/pydataclass"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pathutil"
)

// ModelState is TF Serving's ModelVersionStatus.State.
type ModelState int

// TF Serving model version states (same numbers as the proto enum).
const (
	StateUnknown   ModelState = 0
	StateStart     ModelState = 10
	StateLoading   ModelState = 20
	StateAvailable ModelState = 30
	StateUnloading ModelState = 40
	StateEnd       ModelState = 50
)

var stateNames = map[ModelState]string{StateUnknown: "UNKNOWN", StateStart: "START", StateLoading: "LOADING",
	StateAvailable: "AVAILABLE", StateUnloading: "UNLOADING", StateEnd: "END"}

func (s ModelState) String() string {
	if n, ok := stateNames[s]; ok {
		return n
	}
	return strconv.Itoa(int(s))
}

// PublishType says whether a publish loads or unloads a model.
type PublishType int

// Publish types.
const (
	PublishLoad   PublishType = 1
	PublishUnload PublishType = 2
)

func (p PublishType) String() string {
	switch p {
	case PublishLoad:
		return "LOAD"
	case PublishUnload:
		return "UNLOAD"
	}
	return strconv.Itoa(int(p))
}

// ParsePublishType validates a PublishType number.
func ParsePublishType(n int) (PublishType, error) {
	if n != int(PublishLoad) && n != int(PublishUnload) {
		return 0, errkind.New(errkind.Value, "%d is not a valid PublishType", n)
	}
	return PublishType(n), nil
}

// EventType says which handler an event is for.
type EventType int

// Event types. EventUnknown is an alias of EventPortal (the same number), as in the reference.
const (
	EventPortal   EventType = 1
	EventService  EventType = 2
	EventPublish  EventType = 3
	EventResource EventType = 4
	EventUnknown            = EventPortal
)

func (e EventType) String() string {
	switch e {
	case EventPortal:
		return "PORTAL"
	case EventService:
		return "SERVICE"
	case EventPublish:
		return "PUBLISH"
	case EventResource:
		return "RESOURCE"
	}
	return strconv.Itoa(int(e))
}

// ParseEventType validates an EventType number.
func ParseEventType(n int) (EventType, error) {
	if n < int(EventPortal) || n > int(EventResource) {
		return 0, errkind.New(errkind.Value, "%d is not a valid EventType", n)
	}
	return EventType(n), nil
}

// Path is base_path/model_name.
func (m ModelMeta) Path(base string) (string, error) {
	if m.ModelName == nil {
		return "", errkind.New(errkind.Type, "ModelMeta.get_path: model_name is not set")
	}
	return pathutil.Join(base, *m.ModelName), nil
}

// Path is base_path/{shard_id}:{replica_id}, each as Python formats it (None when unset).
func (r ResourceSpec) Path(base string) string {
	return pathutil.Join(base, pyStr(r, "shard_id")+":"+pyStr(r, "replica_id"))
}

// Path is base_path/{shard_id}:{replica_id}:{model_name}.
func (p PublishMeta) Path(base string) string {
	return pathutil.Join(base, pyStr(p, "shard_id")+":"+pyStr(p, "replica_id")+":"+pyStr(p, "model_name"))
}

// Path is {sep}{bzid}{sep}service{sep}{model_name}{sep}{server_type}:{task}{sep}{replica}.
func (r ReplicaMeta) Path(bzid, sep string) (string, error) {
	if r.ModelName == nil {
		return "", errkind.New(errkind.Type, "ReplicaMeta.get_path: model_name is not set")
	}
	return strings.Join([]string{"", bzid, "service", *r.ModelName,
		pyStr(r, "server_type") + ":" + pyStr(r, "task"), pyStr(r, "replica")}, sep), nil
}

// pyStr is str() of a record's field as the reference holds it (an f-string's view of it).
func pyStr(rec interface{ PyDict() pydataclass.Value }, field string) string {
	v, _ := rec.PyDict().Get(field)
	return v.PyStr()
}

// Address families for ReplicaMeta.Address.
const (
	IPv4 = "ipv4"
	IPv6 = "ipv6"
)

// AddressFor picks the replica's address: the archon or gRPC one, preferring the given family and
// falling back to the other; wildcard addresses (0.0.0.0*, [::]*) count as absent. Nil when none.
func (r ReplicaMeta) AddressFor(useArchon bool, family string) (*string, error) {
	if family != IPv4 && family != IPv6 {
		return nil, errkind.New(errkind.Precondition, "address family %q: want %s or %s", family, IPv4, IPv6)
	}
	v4, v6 := r.Address, r.AddressIPv6
	if useArchon {
		v4, v6 = r.ArchonAddress, r.ArchonAddressIPv6
	}
	if v4 != nil && strings.HasPrefix(*v4, "0.0.0.0") {
		v4 = nil
	}
	if v6 != nil && strings.HasPrefix(*v6, "[::]") {
		v6 = nil
	}
	// Python's `a or b`: an empty string counts as absent too.
	first, second := v4, v6
	if family == IPv6 {
		first, second = v6, v4
	}
	if first != nil && *first != "" {
		return first, nil
	}
	return second, nil
}

// EmptyStatus is the reference's EmptyStatus: an empty TF Serving StatusProto (error code OK, no
// message). A new message each call, since a shared one could be modified by a caller.
func EmptyStatus() *servingutil.StatusProto { return &servingutil.StatusProto{} }
