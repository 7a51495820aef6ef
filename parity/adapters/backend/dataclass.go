package backend

import (
	"github.com/monolith-go/monolith/gen/spec/pydataclass"
	"github.com/monolith-go/monolith/parity/adapters/datadef"
	"github.com/monolith-go/monolith/parity/adapters/utils"
	"github.com/monolith-go/monolith/parity/harness"
	bk "github.com/monolith-go/monolith/pkg/backend"
)

// registerDataclasses adds the calls on backends.py's dataclasses with inputs of their own.
func registerDataclasses(r *harness.Registry) {
	for _, class := range []string{"SavedModelDeployConfig", "ContainerServiceInfo"} {
		r.Register(class+"(**kwargs).serialize", serializeKwargs)
		r.Register(class+".deserialize", deserializeOne)
	}
	r.Register("SavedModel(**kwargs).__str__", savedModelStr)
	r.Register("Container(**kwargs).__str__", containerStr)
}

type pyRecord interface {
	Serialize() []byte
	PyDict() pydataclass.Value
}

func decodeAs(class string, b []byte) (pyRecord, error) {
	if class == "SavedModelDeployConfig" {
		return bk.DeserializeSavedModelDeployConfig(b)
	}
	return bk.DeserializeContainerServiceInfo(b)
}

// serializeKwargs builds the record from its constructor arguments (all strings or None, which is
// what the JSON form holds) and serializes it.
func serializeKwargs(_ *harness.Ctx, in harness.Input) (any, error) {
	class, err := in.Str("class")
	if err != nil {
		return nil, err
	}
	kw, err := in.Raw("kwargs")
	if err != nil {
		return nil, err
	}
	rec, err := decodeAs(class, kw)
	if err != nil {
		return nil, err
	}
	return utils.PyBytes(rec.Serialize()), nil
}

func deserializeOne(_ *harness.Ctx, in harness.Input) (any, error) {
	class, err := in.Str("class")
	if err != nil {
		return nil, err
	}
	s, err := in.Str("serialized_utf8")
	if err != nil {
		return nil, err
	}
	rec, err := decodeAs(class, []byte(s))
	if err != nil {
		return nil, err
	}
	fields := map[string]any{}
	for _, m := range rec.PyDict().D {
		fields[m.Key] = datadef.PyJSON(m.Val)
	}
	return map[string]any{"fields": fields, "reserialized": utils.PyBytes(rec.Serialize())}, nil
}

// strKwargs reads string constructor arguments; an absent one is Go's zero value "" (the
// reference's None, declared in the spec).
func strKwargs(in harness.Input, names ...string) ([]string, error) {
	var kw map[string]string
	if err := in.Decode("kwargs", &kw); err != nil {
		return nil, err
	}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = kw[n]
	}
	return out, nil
}

func savedModelStr(_ *harness.Ctx, in harness.Input) (any, error) {
	v, err := strKwargs(in, "model_name", "sub_graph")
	if err != nil {
		return nil, err
	}
	return bk.SavedModel{ModelName: v[0], SubGraph: v[1]}.String(), nil
}

func containerStr(_ *harness.Ctx, in harness.Input) (any, error) {
	v, err := strKwargs(in, "ctx_cluster", "ctx_id")
	if err != nil {
		return nil, err
	}
	return bk.Container{Cluster: v[0], ID: v[1]}.String(), nil
}
