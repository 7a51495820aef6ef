// Package datadef adapts pkg/datadef to the parity cases of monolith/agent_service/data_def.py.
package datadef

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/monolith-go/monolith/gen/spec/pydataclass"
	"github.com/monolith-go/monolith/parity/adapters/utils"
	"github.com/monolith-go/monolith/parity/harness"
	"github.com/monolith-go/monolith/pkg/datadef"
	"google.golang.org/protobuf/encoding/prototext"
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
	r.Register("EmptyStatus", emptyStatus)
}

func emptyStatus(*harness.Ctx, harness.Input) (any, error) {
	st := datadef.EmptyStatus()
	text, err := prototext.Marshal(st)
	if err != nil {
		return nil, err
	}
	return map[string]any{"text_format": string(text), "error_code": int(st.GetErrorCode()),
		"error_message": st.GetErrorMessage(), "type": string(st.ProtoReflect().Descriptor().FullName())}, nil
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

// Record is a dataclass record (of data_def.py or backends.py) as the adapters handle it.
type Record interface {
	Serialize() []byte
	PyDict() pydataclass.Value
}

// kwargs decodes the case's kwargs (the dataclass constructor arguments) into a record: the record
// with its defaults is serialized, the kwargs merged over it, and the result deserialized.
func fromKwargs(class string, in harness.Input) (Record, error) {
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

func recordFromKwargs(class string, raw json.RawMessage) (Record, error) {
	var kw map[string]json.RawMessage
	if err := json.Unmarshal(raw, &kw); err != nil {
		return nil, fmt.Errorf("kwargs: %w", err)
	}
	// Constructor arguments that are not JSON-shaped in the serialized form.
	if class == "Event" {
		if raw, ok := kw["data"]; ok && !isNull(raw) {
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
	if !ok || isNull(raw) {
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

func deserializeAs(class string, b []byte) (Record, error) {
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

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// fields lists a record's fields as the goldens do, from what the record holds in Python terms:
// enums by name (except the proto enum stat), bytes as bytes, non-finite floats as json.dumps
// writes them (the goldens hold them as strings).
func fields(rec Record) map[string]any {
	out := map[string]any{}
	for _, m := range rec.PyDict().D {
		v := m.Val
		switch {
		case v.Kind == pydataclass.Null:
			out[m.Key] = nil
		case m.Key == "ptype" && v.Kind == pydataclass.Int:
			n, _ := v.Int64()
			out[m.Key] = datadef.PublishType(n).String()
		case m.Key == "etype" && v.Kind == pydataclass.Int:
			n, _ := v.Int64()
			out[m.Key] = datadef.EventType(n).String()
		case m.Key == "data" && v.Kind == pydataclass.List:
			b := make([]byte, len(v.L))
			for i, x := range v.L {
				n, _ := x.Int64()
				b[i] = byte(n)
			}
			out[m.Key] = utils.PyBytes(b)
		default:
			out[m.Key] = pyJSON(v)
		}
	}
	return out
}

// pyJSON is a Python value as the goldens write it: ints and floats in their literal forms,
// non-finite floats as the strings json.dumps gives them, lone surrogates as U+FFFD (what a JSON
// reader makes of their escapes).
func pyJSON(v pydataclass.Value) any {
	switch v.Kind {
	case pydataclass.Null:
		return nil
	case pydataclass.Bool:
		return v.B
	case pydataclass.Int:
		return json.Number(v.I)
	case pydataclass.Float:
		if math.IsNaN(v.F) || math.IsInf(v.F, 0) {
			return string(v.JSON())
		}
		return harness.Float(v.F)
	case pydataclass.Str:
		return strings.ToValidUTF8(v.S, "\uFFFD")
	case pydataclass.List:
		l := make([]any, len(v.L))
		for i, x := range v.L {
			l[i] = pyJSON(x)
		}
		return l
	}
	d := map[string]any{}
	for _, m := range v.D {
		d[strings.ToValidUTF8(m.Key, "\uFFFD")] = pyJSON(m.Val)
	}
	return d
}

func deserialize(_ *harness.Ctx, in harness.Input) (any, error) {
	return Deserialized(in, deserializeAs)
}

// Deserialized replays <class>.deserialize(serialized_utf8) with decode: the record's fields as
// the goldens write them, and what the record serializes to again.
func Deserialized(in harness.Input, decode func(class string, b []byte) (Record, error)) (any, error) {
	class, err := in.Str("class")
	if err != nil {
		return nil, err
	}
	s, err := in.Str("serialized_utf8")
	if err != nil {
		return nil, err
	}
	rec, err := decode(class, []byte(s))
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
