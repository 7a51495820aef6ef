// Package datadef holds the agent's data model (monolith/agent_service/data_def.py): the records
// stored in ZooKeeper and passed between the agent's parts. Serialize writes the bytes Python's
// json.dumps writes for the reference's dataclasses (the reference compares stored bytes before
// rewriting a node, so they must be identical); Deserialize fills absent keys with defaults, ignores
// unknown keys and rejects values of the wrong type, naming the field.
package datadef

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pathutil"
	"github.com/monolith-go/monolith/pkg/pyfmt"
	"github.com/monolith-go/monolith/pkg/pyjson"
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

// ModelMeta describes a model under /{bzid}/portal.
type ModelMeta struct {
	ModelName    *string
	ModelDir     *string
	Ckpt         *string
	NumShard     int
	Action       string
	SpecReplicas []int
}

// NewModelMeta returns a ModelMeta with the reference's defaults.
func NewModelMeta() ModelMeta { return ModelMeta{NumShard: -1, Action: "NONE", SpecReplicas: []int{}} }

// Path is base_path/model_name.
func (m ModelMeta) Path(base string) (string, error) {
	if m.ModelName == nil {
		return "", errkind.New(errkind.Type, "ModelMeta.get_path: model_name is not set")
	}
	return pathutil.Join(base, *m.ModelName), nil
}

// Serialize writes the reference's JSON bytes.
func (m ModelMeta) Serialize() []byte {
	var w pyjson.Writer
	w.OptStr("model_name", m.ModelName)
	w.OptStr("model_dir", m.ModelDir)
	w.OptStr("ckpt", m.Ckpt)
	w.Int("num_shard", m.NumShard)
	w.Str("action", m.Action)
	w.Ints("spec_replicas", orEmpty(m.SpecReplicas))
	return w.Bytes()
}

func orEmpty(v []int) []int {
	if v == nil {
		return []int{}
	}
	return v
}

// DeserializeModelMeta reads a serialized ModelMeta.
func DeserializeModelMeta(b []byte) (ModelMeta, error) {
	m := NewModelMeta()
	o, err := pyjson.Parse("ModelMeta", b)
	if err != nil {
		return m, err
	}
	err = firstErr(o.OptStr("model_name", &m.ModelName), o.OptStr("model_dir", &m.ModelDir), o.OptStr("ckpt", &m.Ckpt),
		o.Int("num_shard", &m.NumShard), o.Str("action", &m.Action), o.Ints("spec_replicas", &m.SpecReplicas))
	return m, err
}

// ResourceSpec is a host's resources, under /{bzid}/resource.
type ResourceSpec struct {
	Address   *string
	ShardID   *int
	ReplicaID *int
	Memory    *int
	CPU       float64
	Network   float64
	WorkLoad  float64
}

// NewResourceSpec returns a ResourceSpec with the reference's defaults.
func NewResourceSpec() ResourceSpec { return ResourceSpec{CPU: -1, Network: -1, WorkLoad: -1} }

// Path is base_path/{shard_id}:{replica_id} (None for unset ids, as the reference prints them).
func (r ResourceSpec) Path(base string) string {
	return pathutil.Join(base, pyfmt.OptInt(r.ShardID)+":"+pyfmt.OptInt(r.ReplicaID))
}

// Serialize writes the reference's JSON bytes (floats always with a fraction).
func (r ResourceSpec) Serialize() []byte {
	var w pyjson.Writer
	w.OptStr("address", r.Address)
	w.OptInt("shard_id", r.ShardID)
	w.OptInt("replica_id", r.ReplicaID)
	w.OptInt("memory", r.Memory)
	w.Float("cpu", r.CPU)
	w.Float("network", r.Network)
	w.Float("work_load", r.WorkLoad)
	return w.Bytes()
}

// DeserializeResourceSpec reads a serialized ResourceSpec.
func DeserializeResourceSpec(b []byte) (ResourceSpec, error) {
	r := NewResourceSpec()
	o, err := pyjson.Parse("ResourceSpec", b)
	if err != nil {
		return r, err
	}
	err = firstErr(o.OptStr("address", &r.Address), o.OptInt("shard_id", &r.ShardID), o.OptInt("replica_id", &r.ReplicaID),
		o.OptInt("memory", &r.Memory), o.Float("cpu", &r.CPU), o.Float("network", &r.Network), o.Float("work_load", &r.WorkLoad))
	return r, err
}

// SubModel maps a sub model name (entry, ps_0, dense_0) to its version path.
type SubModel struct {
	Name, Path string
}

// PublishMeta is a publish request under /{bzid}/publish. SubModels keeps its order (the
// serialized bytes follow it); nil means None.
type PublishMeta struct {
	ShardID         *int
	ReplicaID       int
	ModelName       *string
	NumPS           *int
	TotalPublishNum int
	SubModels       []SubModel
	PType           PublishType
	IsSpec          bool
}

// NewPublishMeta returns a PublishMeta with the reference's defaults.
func NewPublishMeta() PublishMeta {
	return PublishMeta{ReplicaID: -1, TotalPublishNum: 1, PType: PublishLoad}
}

// Path is base_path/{shard_id}:{replica_id}:{model_name}.
func (p PublishMeta) Path(base string) string {
	return pathutil.Join(base, pyfmt.OptInt(p.ShardID)+":"+strconv.Itoa(p.ReplicaID)+":"+pyfmt.OptStr(p.ModelName))
}

// Serialize writes the reference's JSON bytes.
func (p PublishMeta) Serialize() []byte {
	var w pyjson.Writer
	w.OptInt("shard_id", p.ShardID)
	w.Int("replica_id", p.ReplicaID)
	w.OptStr("model_name", p.ModelName)
	w.OptInt("num_ps", p.NumPS)
	w.Int("total_publish_num", p.TotalPublishNum)
	if p.SubModels == nil {
		w.Raw("sub_models", "null")
	} else {
		var sw pyjson.Writer
		for _, s := range p.SubModels {
			sw.Str(s.Name, s.Path)
		}
		w.Raw("sub_models", string(sw.Bytes()))
	}
	w.Int("ptype", int(p.PType))
	w.Bool("is_spec", p.IsSpec)
	return w.Bytes()
}

// DeserializePublishMeta reads a serialized PublishMeta.
func DeserializePublishMeta(b []byte) (PublishMeta, error) {
	p := NewPublishMeta()
	o, err := pyjson.Parse("PublishMeta", b)
	if err != nil {
		return p, err
	}
	ptype := int(p.PType)
	err = firstErr(o.OptInt("shard_id", &p.ShardID), o.Int("replica_id", &p.ReplicaID), o.OptStr("model_name", &p.ModelName),
		o.OptInt("num_ps", &p.NumPS), o.Int("total_publish_num", &p.TotalPublishNum), subModels(o, &p.SubModels),
		o.Int("ptype", &ptype), o.Bool("is_spec", &p.IsSpec))
	if err != nil {
		return p, err
	}
	p.PType, err = ParsePublishType(ptype)
	return p, err
}

// subModels reads sub_models keeping the key order of the serialized object.
func subModels(o *pyjson.Object, dst *[]SubModel) error {
	raw, ok := o.Field("sub_models")
	if !ok {
		return nil
	}
	if pyjson.IsNull(raw) {
		*dst = nil
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return o.TypeErr("sub_models", "an object of strings or null", raw)
	}
	out := []SubModel{}
	index := map[string]int{}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return o.TypeErr("sub_models", "an object of strings", raw)
		}
		key, _ := kt.(string)
		var v string
		if err := dec.Decode(&v); err != nil {
			return errkind.New(errkind.Type, "PublishMeta.sub_models[%q]: want a string", key)
		}
		if i, dup := index[key]; dup {
			out[i].Path = v // a repeated key keeps its first position and its last value, as in Python
			continue
		}
		index[key] = len(out)
		out = append(out, SubModel{Name: key, Path: v})
	}
	*dst = out
	return nil
}

// ReplicaMeta is a serving replica under /{bzid}/service.
type ReplicaMeta struct {
	Address           *string
	AddressIPv6       *string
	Stat              ModelState
	ModelName         *string
	ServerType        *string
	Task              int
	Replica           int
	ArchonAddress     *string
	ArchonAddressIPv6 *string
}

// NewReplicaMeta returns a ReplicaMeta with the reference's defaults.
func NewReplicaMeta() ReplicaMeta { return ReplicaMeta{Stat: StateUnknown, Task: -1, Replica: -1} }

// Serialize writes the reference's JSON bytes.
func (r ReplicaMeta) Serialize() []byte {
	var w pyjson.Writer
	w.OptStr("address", r.Address)
	w.OptStr("address_ipv6", r.AddressIPv6)
	w.Int("stat", int(r.Stat))
	w.OptStr("model_name", r.ModelName)
	w.OptStr("server_type", r.ServerType)
	w.Int("task", r.Task)
	w.Int("replica", r.Replica)
	w.OptStr("archon_address", r.ArchonAddress)
	w.OptStr("archon_address_ipv6", r.ArchonAddressIPv6)
	return w.Bytes()
}

// DeserializeReplicaMeta reads a serialized ReplicaMeta.
func DeserializeReplicaMeta(b []byte) (ReplicaMeta, error) {
	r := NewReplicaMeta()
	o, err := pyjson.Parse("ReplicaMeta", b)
	if err != nil {
		return r, err
	}
	stat := int(r.Stat)
	err = firstErr(o.OptStr("address", &r.Address), o.OptStr("address_ipv6", &r.AddressIPv6), o.Int("stat", &stat),
		o.OptStr("model_name", &r.ModelName), o.OptStr("server_type", &r.ServerType), o.Int("task", &r.Task),
		o.Int("replica", &r.Replica), o.OptStr("archon_address", &r.ArchonAddress),
		o.OptStr("archon_address_ipv6", &r.ArchonAddressIPv6))
	r.Stat = ModelState(stat)
	return r, err
}

// Path is {sep}{bzid}{sep}service{sep}{model_name}{sep}{server_type}:{task}{sep}{replica}.
func (r ReplicaMeta) Path(bzid, sep string) (string, error) {
	if r.ModelName == nil {
		return "", errkind.New(errkind.Type, "ReplicaMeta.get_path: model_name is not set")
	}
	return strings.Join([]string{"", bzid, "service", *r.ModelName,
		pyfmt.OptStr(r.ServerType) + ":" + strconv.Itoa(r.Task), strconv.Itoa(r.Replica)}, sep), nil
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

// Event is a unit of work for the agent's handlers.
type Event struct {
	Path  *string
	Data  []byte
	EType EventType
}

// NewEvent returns an Event with the reference's defaults.
func NewEvent() Event { return Event{Data: []byte{}, EType: EventUnknown} }

// Serialize writes the reference's JSON bytes (data as a list of byte values).
func (e Event) Serialize() []byte {
	var w pyjson.Writer
	w.OptStr("path", e.Path)
	ints := make([]int, len(e.Data))
	for i, c := range e.Data {
		ints[i] = int(c)
	}
	w.Ints("data", ints)
	w.Int("etype", int(e.EType))
	return w.Bytes()
}

// DeserializeEvent reads a serialized Event. Unlike the reference, which cannot decode its own
// bytes field, data is read back from the list of byte values.
func DeserializeEvent(b []byte) (Event, error) {
	e := NewEvent()
	o, err := pyjson.Parse("Event", b)
	if err != nil {
		return e, err
	}
	var data []int
	etype := int(e.EType)
	if err := firstErr(o.OptStr("path", &e.Path), o.Ints("data", &data), o.Int("etype", &etype)); err != nil {
		return e, err
	}
	if data != nil {
		e.Data = make([]byte, len(data))
		for i, v := range data {
			if v < 0 || v > 255 {
				return e, errkind.New(errkind.Value, "Event.data[%d]: %d is not a byte value", i, v)
			}
			e.Data[i] = byte(v)
		}
	}
	e.EType, err = ParseEventType(etype)
	return e, err
}

// firstErr returns the first non-nil error.
func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
