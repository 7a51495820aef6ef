package backend

import (
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

func decodeAs(class string, b []byte) (datadef.Record, error) {
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

// deserializeOne lists the fields as data_def's records do (these records hold no enums or bytes).
func deserializeOne(_ *harness.Ctx, in harness.Input) (any, error) {
	return datadef.Deserialized(in, decodeAs)
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
