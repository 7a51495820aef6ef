// Package datadef adapts pkg/datadef to the parity cases of monolith/agent_service/data_def.py.
package datadef

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/monolith-go/monolith/parity/adapters/utils"
	"github.com/monolith-go/monolith/parity/harness"
	"github.com/monolith-go/monolith/pkg/datadef"
)

// Register adds the data_def.py calls.
func Register(r *harness.Registry) {
	r.Register("PublishType/EventType/ModelState values", enumValues)
	for _, class := range []string{"ModelMeta", "ResourceSpec", "PublishMeta", "ReplicaMeta", "Event"} {
		r.Register(class+"(**kwargs).serialize", serialize)
		r.Register(class+".deserialize", deserialize)
	}
	for _, class := range []string{"ModelMeta", "ResourceSpec", "PublishMeta", "ReplicaMeta"} {
		r.Register(class+".get_path", getPath)
	}
	r.Register("ReplicaMeta.get_address", getAddress)
}

func enumValues(*harness.Ctx, harness.Input) (any, error) {
	states := map[string]any{}
	for _, s := range []datadef.ModelState{datadef.StateUnknown, datadef.StateStart, datadef.StateLoading,
		datadef.StateAvailable, datadef.StateUnloading, datadef.StateEnd} {
		states[s.String()] = int(s)
	}
	events := map[string]any{"UNKNOWN": int(datadef.EventUnknown)}
	for _, e := range []datadef.EventType{datadef.EventPortal, datadef.EventService, datadef.EventPublish, datadef.EventResource} {
		events[e.String()] = int(e)
	}
	return map[string]any{
		"EventType":                   events,
		"EventType_UNKNOWN_is_PORTAL": datadef.EventUnknown == datadef.EventPortal,
		"ModelState":                  states,
		"PublishType":                 map[string]any{"LOAD": int(datadef.PublishLoad), "UNLOAD": int(datadef.PublishUnload)},
	}, nil
}

// record is any data_def record as the adapter handles it.
type record interface{ Serialize() []byte }

// kwargs decodes the case's kwargs (the dataclass constructor arguments) into a record: the record
// with its defaults is serialized, the kwargs merged over it, and the result deserialized.
func fromKwargs(class string, in harness.Input) (record, error) {
	raw, err := in.Raw("kwargs")
	if err != nil {
		return nil, err
	}
	return recordFromKwargs(class, raw)
}

// PublishMetaFromKwargs builds PublishMeta(**kwargs) from a case's kwargs object.
func PublishMetaFromKwargs(raw json.RawMessage) (datadef.PublishMeta, error) {
	rec, err := recordFromKwargs("PublishMeta", raw)
	if err != nil {
		return datadef.PublishMeta{}, err
	}
	return rec.(datadef.PublishMeta), nil
}

func recordFromKwargs(class string, raw json.RawMessage) (record, error) {
	var kw map[string]json.RawMessage
	if err := json.Unmarshal(raw, &kw); err != nil {
		return nil, fmt.Errorf("kwargs: %w", err)
	}
	// Constructor arguments that are not JSON-shaped in the serialized form.
	if class == "Event" {
		if raw, ok := kw["data"]; ok {
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return nil, fmt.Errorf("kwargs.data: %w", err)
			}
			ints := make([]int, len(s))
			for i := 0; i < len(s); i++ {
				ints[i] = int(s[i])
			}
			kw["data"], _ = json.Marshal(ints)
		}
		if err := enumName(kw, "etype", map[string]int{"PORTAL": 1, "SERVICE": 2, "PUBLISH": 3, "RESOURCE": 4, "UNKNOWN": 1}); err != nil {
			return nil, err
		}
	}
	if class == "PublishMeta" {
		if err := enumName(kw, "ptype", map[string]int{"LOAD": 1, "UNLOAD": 2}); err != nil {
			return nil, err
		}
	}
	merged, err := mergeOrdered(raw, kw)
	if err != nil {
		return nil, err
	}
	return deserializeAs(class, merged)
}

func enumName(kw map[string]json.RawMessage, key string, names map[string]int) error {
	raw, ok := kw[key]
	if !ok {
		return nil
	}
	var name string
	if err := json.Unmarshal(raw, &name); err != nil {
		return nil // already a number
	}
	n, ok := names[name]
	if !ok {
		return fmt.Errorf("kwargs.%s: unknown name %q", key, name)
	}
	kw[key], _ = json.Marshal(n)
	return nil
}

// mergeOrdered rewrites the kwargs object with the converted values, keeping key order (sub_models
// order matters for the serialized bytes).
func mergeOrdered(raw json.RawMessage, kw map[string]json.RawMessage) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for first := true; dec.More(); first = false {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
		if !first {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(t.(string))
		b.Write(k)
		b.WriteByte(':')
		b.Write(kw[t.(string)])
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func deserializeAs(class string, b []byte) (record, error) {
	switch class {
	case "ModelMeta":
		return datadef.DeserializeModelMeta(b)
	case "ResourceSpec":
		return datadef.DeserializeResourceSpec(b)
	case "PublishMeta":
		return datadef.DeserializePublishMeta(b)
	case "ReplicaMeta":
		return datadef.DeserializeReplicaMeta(b)
	case "Event":
		return datadef.DeserializeEvent(b)
	}
	return nil, fmt.Errorf("unknown class %q", class)
}

func serialize(_ *harness.Ctx, in harness.Input) (any, error) {
	class, err := in.Str("class")
	if err != nil {
		return nil, err
	}
	rec, err := fromKwargs(class, in)
	if err != nil {
		return nil, err
	}
	return utils.PyBytes(rec.Serialize()), nil
}

func optStr(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

func optInt(n *int) any {
	if n == nil {
		return nil
	}
	return *n
}

// fields lists a record's fields as the goldens do (enums by name, except the proto enum stat).
func fields(rec record) map[string]any {
	switch r := rec.(type) {
	case datadef.ModelMeta:
		return map[string]any{"model_name": optStr(r.ModelName), "model_dir": optStr(r.ModelDir), "ckpt": optStr(r.Ckpt),
			"num_shard": r.NumShard, "action": r.Action, "spec_replicas": r.SpecReplicas}
	case datadef.ResourceSpec:
		return map[string]any{"address": optStr(r.Address), "shard_id": optInt(r.ShardID), "replica_id": optInt(r.ReplicaID),
			"memory": optInt(r.Memory), "cpu": harness.Float(r.CPU), "network": harness.Float(r.Network), "work_load": harness.Float(r.WorkLoad)}
	case datadef.PublishMeta:
		var subs any
		if r.SubModels != nil {
			m := map[string]any{}
			for _, s := range r.SubModels {
				m[s.Name] = s.Path
			}
			subs = m
		}
		return map[string]any{"shard_id": optInt(r.ShardID), "replica_id": r.ReplicaID, "model_name": optStr(r.ModelName),
			"num_ps": optInt(r.NumPS), "total_publish_num": r.TotalPublishNum, "sub_models": subs, "ptype": r.PType.String(), "is_spec": r.IsSpec}
	case datadef.ReplicaMeta:
		return map[string]any{"address": optStr(r.Address), "address_ipv6": optStr(r.AddressIPv6), "stat": int(r.Stat),
			"model_name": optStr(r.ModelName), "server_type": optStr(r.ServerType), "task": r.Task, "replica": r.Replica,
			"archon_address": optStr(r.ArchonAddress), "archon_address_ipv6": optStr(r.ArchonAddressIPv6)}
	case datadef.Event:
		return map[string]any{"path": optStr(r.Path), "data": utils.PyBytes(r.Data), "etype": r.EType.String()}
	}
	return nil
}

func deserialize(_ *harness.Ctx, in harness.Input) (any, error) {
	class, err := in.Str("class")
	if err != nil {
		return nil, err
	}
	s, err := in.Str("serialized_utf8")
	if err != nil {
		return nil, err
	}
	rec, err := deserializeAs(class, []byte(s))
	if err != nil {
		return nil, err
	}
	return map[string]any{"fields": fields(rec), "reserialized": utils.PyBytes(rec.Serialize())}, nil
}

func getPath(_ *harness.Ctx, in harness.Input) (any, error) {
	class := "ReplicaMeta"
	if in.Has("class") {
		var err error
		if class, err = in.Str("class"); err != nil {
			return nil, err
		}
	}
	rec, err := fromKwargs(class, in)
	if err != nil {
		return nil, err
	}
	switch r := rec.(type) {
	case datadef.ReplicaMeta:
		bzid, err := in.Str("bzid")
		if err != nil {
			return nil, err
		}
		sep, err := in.Str("sep")
		if err != nil {
			return nil, err
		}
		return r.Path(bzid, sep)
	}
	base, err := in.Str("base_path")
	if err != nil {
		return nil, err
	}
	switch r := rec.(type) {
	case datadef.ModelMeta:
		return r.Path(base)
	case datadef.ResourceSpec:
		return r.Path(base), nil
	case datadef.PublishMeta:
		return r.Path(base), nil
	}
	return nil, fmt.Errorf("get_path: unsupported class %s", class)
}

func getAddress(_ *harness.Ctx, in harness.Input) (any, error) {
	rec, err := fromKwargs("ReplicaMeta", in)
	if err != nil {
		return nil, err
	}
	useArchon, err := in.Bool("use_archon")
	if err != nil {
		return nil, err
	}
	family, err := in.Str("address_family")
	if err != nil {
		return nil, err
	}
	a, err := rec.(datadef.ReplicaMeta).AddressFor(useArchon, family)
	if err != nil {
		return nil, err
	}
	return optStr(a), nil
}
