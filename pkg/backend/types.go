package backend

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pyfmt"
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
	var w objWriter
	w.optStr("model_base_path", c.ModelBasePath)
	w.optStr("version_policy", c.VersionPolicy)
	return w.bytes()
}

// DeserializeSavedModelDeployConfig reads what Serialize writes. Absent keys stay None, unknown
// keys are ignored (as dataclasses-json does); a value that is neither a string nor null is a Type
// error naming the field (the reference would keep it with the wrong type).
func DeserializeSavedModelDeployConfig(data []byte) (SavedModelDeployConfig, error) {
	var c SavedModelDeployConfig
	o, err := parseObject("SavedModelDeployConfig", data)
	if err != nil {
		return c, err
	}
	if err := o.optStr("model_base_path", &c.ModelBasePath); err != nil {
		return c, err
	}
	if err := o.optStr("version_policy", &c.VersionPolicy); err != nil {
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
	var w objWriter
	w.optStr("grpc", s.GRPC)
	w.optStr("http", s.HTTP)
	w.optStr("archon", s.Archon)
	w.optStr("agent", s.Agent)
	w.optStr("idc", s.IDC)
	w.optStr("debug_info", s.DebugInfo)
	return w.bytes()
}

// DeserializeContainerServiceInfo reads what Serialize writes, with the rules of
// DeserializeSavedModelDeployConfig.
func DeserializeContainerServiceInfo(data []byte) (ContainerServiceInfo, error) {
	var s ContainerServiceInfo
	o, err := parseObject("ContainerServiceInfo", data)
	if err != nil {
		return s, err
	}
	for _, f := range []struct {
		name string
		dst  **string
	}{{"grpc", &s.GRPC}, {"http", &s.HTTP}, {"archon", &s.Archon}, {"agent", &s.Agent}, {"idc", &s.IDC}, {"debug_info", &s.DebugInfo}} {
		if err := o.optStr(f.name, f.dst); err != nil {
			return s, err
		}
	}
	return s, nil
}

// objWriter writes a JSON object as Python's json.dumps does by default: fields in declaration
// order, ", " and ": " separators, ASCII-only strings, null for None.
type objWriter struct {
	b bytes.Buffer
	n int
}

func (w *objWriter) optStr(name string, v *string) {
	if w.n == 0 {
		w.b.WriteByte('{')
	} else {
		w.b.WriteString(", ")
	}
	w.n++
	w.b.WriteString(pyfmt.JSONString(name))
	w.b.WriteString(": ")
	if v == nil {
		w.b.WriteString("null")
		return
	}
	w.b.WriteString(pyfmt.JSONString(*v))
}

func (w *objWriter) bytes() []byte {
	if w.n == 0 {
		return []byte("{}")
	}
	w.b.WriteByte('}')
	return w.b.Bytes()
}

// object is a decoded JSON object whose fields are read with type checks naming the field.
type object struct {
	typ    string
	fields map[string]json.RawMessage
}

// parseObject decodes data as one JSON object: invalid UTF-8 or JSON is a Value error (the
// reference raises UnicodeDecodeError / JSONDecodeError, both ValueErrors), a non-object a Type
// error.
func parseObject(typ string, data []byte) (*object, error) {
	if !utf8.Valid(data) {
		return nil, errkind.New(errkind.Value, "%s: serialized data is not valid UTF-8", typ)
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&v); err != nil {
		return nil, errkind.New(errkind.Value, "%s: invalid JSON: %v", typ, err)
	}
	if _, err := dec.Token(); err == nil {
		return nil, errkind.New(errkind.Value, "%s: invalid JSON: extra data after the object", typ)
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, errkind.New(errkind.Type, "%s: want a JSON object, got %s", typ, shorten(string(bytes.TrimSpace(data))))
	}
	o := &object{typ: typ}
	if err := json.Unmarshal(data, &o.fields); err != nil {
		return nil, errkind.New(errkind.Value, "%s: invalid JSON: %v", typ, err)
	}
	return o, nil
}

// optStr reads a string or null into *dst; an absent key leaves *dst as it is.
func (o *object) optStr(name string, dst **string) error {
	raw, ok := o.fields[name]
	if !ok {
		return nil
	}
	if string(bytes.TrimSpace(raw)) == "null" {
		*dst = nil
		return nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return errkind.New(errkind.Type, "%s.%s: want a string or null, got %s", o.typ, name, shorten(string(raw)))
	}
	*dst = &s
	return nil
}

func shorten(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
