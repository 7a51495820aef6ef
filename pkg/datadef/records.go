package datadef

import (
	"github.com/monolith-go/monolith/pkg/datadef/pydataclass"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// codecErr gives a pydataclass error its errkind.
func codecErr(err error) error {
	if err == nil {
		return nil
	}
	if e, ok := err.(*pydataclass.Error); ok {
		k, perr := errkind.Parse(e.Kind)
		if perr == nil {
			return errkind.Wrap(k, e)
		}
	}
	return err
}

// ModelMeta describes a model under /{bzid}/portal.
type ModelMeta struct {
	ModelName    *string
	ModelDir     *string
	Ckpt         *string
	NumShard     int
	Action       string
	SpecReplicas []int
	held         *pydataclass.Held
}

// NewModelMeta returns a ModelMeta with the reference's defaults.
func NewModelMeta() ModelMeta { return ModelMeta{NumShard: -1, Action: "NONE", SpecReplicas: []int{}} }

// PyDict is the record as the reference's dataclass holds it, in field order.
func (m ModelMeta) PyDict() pydataclass.Value {
	h := m.held
	return pydataclass.DictOf(
		pydataclass.Member{Key: "model_name", Val: pydataclass.OptStrV(m.ModelName)},
		pydataclass.Member{Key: "model_dir", Val: pydataclass.OptStrV(m.ModelDir)},
		pydataclass.Member{Key: "ckpt", Val: pydataclass.OptStrV(m.Ckpt)},
		pydataclass.Member{Key: "num_shard", Val: h.Value("num_shard", m.NumShard, pydataclass.IntV(m.NumShard))},
		pydataclass.Member{Key: "action", Val: h.Value("action", m.Action, pydataclass.StrV(m.Action))},
		pydataclass.Member{Key: "spec_replicas", Val: h.Value("spec_replicas", m.SpecReplicas == nil, pydataclass.IntsV(m.SpecReplicas))},
	)
}

// Serialize writes the reference's JSON bytes.
func (m ModelMeta) Serialize() []byte { return m.PyDict().JSON() }

// DeserializeModelMeta reads a serialized ModelMeta.
func DeserializeModelMeta(b []byte) (ModelMeta, error) {
	m := NewModelMeta()
	o, err := pydataclass.Decode("ModelMeta", b)
	if err != nil {
		return m, codecErr(err)
	}
	err = pydataclass.First(o.OptStr("model_name", &m.ModelName), o.OptStr("model_dir", &m.ModelDir),
		o.OptStr("ckpt", &m.Ckpt), o.Int("num_shard", &m.NumShard), o.Str("action", &m.Action),
		o.Ints("spec_replicas", &m.SpecReplicas))
	m.held = o.Held()
	return m, codecErr(err)
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
	held      *pydataclass.Held
}

// NewResourceSpec returns a ResourceSpec with the reference's defaults.
func NewResourceSpec() ResourceSpec { return ResourceSpec{CPU: -1, Network: -1, WorkLoad: -1} }

// PyDict is the record as the reference's dataclass holds it, in field order.
func (r ResourceSpec) PyDict() pydataclass.Value {
	h := r.held
	return pydataclass.DictOf(
		pydataclass.Member{Key: "address", Val: pydataclass.OptStrV(r.Address)},
		pydataclass.Member{Key: "shard_id", Val: pydataclass.OptIntV(r.ShardID)},
		pydataclass.Member{Key: "replica_id", Val: pydataclass.OptIntV(r.ReplicaID)},
		pydataclass.Member{Key: "memory", Val: pydataclass.OptIntV(r.Memory)},
		pydataclass.Member{Key: "cpu", Val: h.Value("cpu", r.CPU, pydataclass.FloatV(r.CPU))},
		pydataclass.Member{Key: "network", Val: h.Value("network", r.Network, pydataclass.FloatV(r.Network))},
		pydataclass.Member{Key: "work_load", Val: h.Value("work_load", r.WorkLoad, pydataclass.FloatV(r.WorkLoad))},
	)
}

// Serialize writes the reference's JSON bytes.
func (r ResourceSpec) Serialize() []byte { return r.PyDict().JSON() }

// DeserializeResourceSpec reads a serialized ResourceSpec.
func DeserializeResourceSpec(b []byte) (ResourceSpec, error) {
	r := NewResourceSpec()
	o, err := pydataclass.Decode("ResourceSpec", b)
	if err != nil {
		return r, codecErr(err)
	}
	err = pydataclass.First(o.OptStr("address", &r.Address), o.OptInt("shard_id", &r.ShardID),
		o.OptInt("replica_id", &r.ReplicaID), o.OptInt("memory", &r.Memory), o.Float("cpu", &r.CPU),
		o.Float("network", &r.Network), o.Float("work_load", &r.WorkLoad))
	r.held = o.Held()
	return r, codecErr(err)
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
	held            *pydataclass.Held
}

// NewPublishMeta returns a PublishMeta with the reference's defaults.
func NewPublishMeta() PublishMeta {
	return PublishMeta{ReplicaID: -1, TotalPublishNum: 1, PType: PublishLoad}
}

func subModelItems(subs []SubModel) []pydataclass.StrItem {
	if subs == nil {
		return nil
	}
	items := make([]pydataclass.StrItem, len(subs))
	for i, s := range subs {
		items[i] = pydataclass.StrItem{Key: s.Name, Val: s.Path}
	}
	return items
}

func setSubModels(dst *[]SubModel) func([]pydataclass.StrItem) {
	return func(items []pydataclass.StrItem) {
		if items == nil {
			*dst = nil
			return
		}
		*dst = make([]SubModel, len(items))
		for i, it := range items {
			(*dst)[i] = SubModel{Name: it.Key, Path: it.Val}
		}
	}
}

// PyDict is the record as the reference's dataclass holds it, in field order.
func (p PublishMeta) PyDict() pydataclass.Value {
	h := p.held
	return pydataclass.DictOf(
		pydataclass.Member{Key: "shard_id", Val: pydataclass.OptIntV(p.ShardID)},
		pydataclass.Member{Key: "replica_id", Val: h.Value("replica_id", p.ReplicaID, pydataclass.IntV(p.ReplicaID))},
		pydataclass.Member{Key: "model_name", Val: pydataclass.OptStrV(p.ModelName)},
		pydataclass.Member{Key: "num_ps", Val: pydataclass.OptIntV(p.NumPS)},
		pydataclass.Member{Key: "total_publish_num", Val: h.Value("total_publish_num", p.TotalPublishNum, pydataclass.IntV(p.TotalPublishNum))},
		pydataclass.Member{Key: "sub_models", Val: pydataclass.StrDictV(subModelItems(p.SubModels))},
		pydataclass.Member{Key: "ptype", Val: h.Value("ptype", int(p.PType), pydataclass.IntV(int(p.PType)))},
		pydataclass.Member{Key: "is_spec", Val: h.Value("is_spec", p.IsSpec, pydataclass.BoolV(p.IsSpec))},
	)
}

// Serialize writes the reference's JSON bytes.
func (p PublishMeta) Serialize() []byte { return p.PyDict().JSON() }

// DeserializePublishMeta reads a serialized PublishMeta.
func DeserializePublishMeta(b []byte) (PublishMeta, error) {
	p := NewPublishMeta()
	o, err := pydataclass.Decode("PublishMeta", b)
	if err != nil {
		return p, codecErr(err)
	}
	ptype := int(p.PType)
	err = pydataclass.First(o.OptInt("shard_id", &p.ShardID), o.Int("replica_id", &p.ReplicaID),
		o.OptStr("model_name", &p.ModelName), o.OptInt("num_ps", &p.NumPS),
		o.Int("total_publish_num", &p.TotalPublishNum), o.StrDict("sub_models", setSubModels(&p.SubModels)),
		o.Enum("ptype", "PublishType", &ptype, []int{int(PublishLoad), int(PublishUnload)}), o.Bool("is_spec", &p.IsSpec))
	p.PType = PublishType(ptype)
	p.held = o.Held()
	return p, codecErr(err)
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
	held              *pydataclass.Held
}

// NewReplicaMeta returns a ReplicaMeta with the reference's defaults.
func NewReplicaMeta() ReplicaMeta { return ReplicaMeta{Stat: StateUnknown, Task: -1, Replica: -1} }

// PyDict is the record as the reference's dataclass holds it, in field order.
func (r ReplicaMeta) PyDict() pydataclass.Value {
	h := r.held
	return pydataclass.DictOf(
		pydataclass.Member{Key: "address", Val: pydataclass.OptStrV(r.Address)},
		pydataclass.Member{Key: "address_ipv6", Val: pydataclass.OptStrV(r.AddressIPv6)},
		pydataclass.Member{Key: "stat", Val: h.Value("stat", int(r.Stat), pydataclass.IntV(int(r.Stat)))},
		pydataclass.Member{Key: "model_name", Val: pydataclass.OptStrV(r.ModelName)},
		pydataclass.Member{Key: "server_type", Val: pydataclass.OptStrV(r.ServerType)},
		pydataclass.Member{Key: "task", Val: h.Value("task", r.Task, pydataclass.IntV(r.Task))},
		pydataclass.Member{Key: "replica", Val: h.Value("replica", r.Replica, pydataclass.IntV(r.Replica))},
		pydataclass.Member{Key: "archon_address", Val: pydataclass.OptStrV(r.ArchonAddress)},
		pydataclass.Member{Key: "archon_address_ipv6", Val: pydataclass.OptStrV(r.ArchonAddressIPv6)},
	)
}

// Serialize writes the reference's JSON bytes.
func (r ReplicaMeta) Serialize() []byte { return r.PyDict().JSON() }

// DeserializeReplicaMeta reads a serialized ReplicaMeta.
func DeserializeReplicaMeta(b []byte) (ReplicaMeta, error) {
	r := NewReplicaMeta()
	o, err := pydataclass.Decode("ReplicaMeta", b)
	if err != nil {
		return r, codecErr(err)
	}
	stat := int(r.Stat)
	err = pydataclass.First(o.OptStr("address", &r.Address), o.OptStr("address_ipv6", &r.AddressIPv6),
		o.Int("stat", &stat), o.OptStr("model_name", &r.ModelName), o.OptStr("server_type", &r.ServerType),
		o.Int("task", &r.Task), o.Int("replica", &r.Replica), o.OptStr("archon_address", &r.ArchonAddress),
		o.OptStr("archon_address_ipv6", &r.ArchonAddressIPv6))
	r.Stat = ModelState(stat)
	r.held = o.Held()
	return r, codecErr(err)
}

// Event is a unit of work for the agent's handlers.
type Event struct {
	Path  *string
	Data  []byte
	EType EventType
	held  *pydataclass.Held
}

// NewEvent returns an Event with the reference's defaults.
func NewEvent() Event { return Event{Data: []byte{}, EType: EventUnknown} }

// PyDict is the record as the reference's dataclass holds it, in field order (data as the list of
// byte values to_json writes).
func (e Event) PyDict() pydataclass.Value {
	h := e.held
	return pydataclass.DictOf(
		pydataclass.Member{Key: "path", Val: pydataclass.OptStrV(e.Path)},
		pydataclass.Member{Key: "data", Val: h.Value("data", e.Data == nil, pydataclass.BytesV(e.Data))},
		pydataclass.Member{Key: "etype", Val: h.Value("etype", int(e.EType), pydataclass.IntV(int(e.EType)))},
	)
}

// Serialize writes the reference's JSON bytes (data as a list of byte values).
func (e Event) Serialize() []byte { return e.PyDict().JSON() }

// DeserializeEvent reads a serialized Event. Unlike the reference, which cannot decode its own
// bytes field, data is read back from the list of byte values.
func DeserializeEvent(b []byte) (Event, error) {
	e := NewEvent()
	o, err := pydataclass.Decode("Event", b)
	if err != nil {
		return e, codecErr(err)
	}
	etype := int(e.EType)
	err = pydataclass.First(o.OptStr("path", &e.Path), o.Bytes("data", &e.Data),
		o.Enum("etype", "EventType", &etype, []int{int(EventPortal), int(EventService), int(EventPublish), int(EventResource)}))
	e.EType = EventType(etype)
	e.held = o.Held()
	return e, codecErr(err)
}
