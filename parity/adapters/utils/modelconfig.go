package utils

import (
	"encoding/json"
	"fmt"

	tfprotobuf "github.com/monolith-go/monolith/gen/pb/tensorflow/core/protobuf"
	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	"github.com/monolith-go/monolith/parity/harness"
	"github.com/monolith-go/monolith/pkg/modelconfig"
	"github.com/monolith-go/monolith/pkg/pytext"
)

func registerModelConfig(r *harness.Registry) {
	r.Register("gen_model_config(name, base_path, version_policy, version_data, version_labels=...)", genModelConfig)
	r.Register("AgentConfig(**kwargs)._gen_model_server_config(server_type)", genModelServerConfig)
	r.Register("DEFAULT_MODEL_CONFIG", func(*harness.Ctx, harness.Input) (any, error) {
		return pytext.Format(modelconfig.Default()), nil
	})
	r.Register("gen_model_spec(name, version, signature_name)", genModelSpec)
	r.Register("gen_model_version_status(version, state, error_code, error_message)", genModelVersionStatus)
}

// versionData decodes the reference's int-or-list version_data.
func versionData(raw json.RawMessage) (modelconfig.VersionData, error) {
	var n int64
	if err := json.Unmarshal(raw, &n); err == nil {
		return modelconfig.VersionData{N: n}, nil
	}
	var list []int64
	if err := json.Unmarshal(raw, &list); err != nil {
		return modelconfig.VersionData{}, fmt.Errorf("version_data: want an int or a list of ints, got %s", raw)
	}
	return modelconfig.VersionData{List: list, IsList: true}, nil
}

func genModelConfig(_ *harness.Ctx, in harness.Input) (any, error) {
	name, err := in.Str("name")
	if err != nil {
		return nil, err
	}
	base, err := in.Str("base_path")
	if err != nil {
		return nil, err
	}
	policy, err := in.Str("version_policy")
	if err != nil {
		return nil, err
	}
	raw, err := in.Raw("version_data")
	if err != nil {
		return nil, err
	}
	data, err := versionData(raw)
	if err != nil {
		return nil, err
	}
	var labels map[string]int64
	if err := in.Decode("version_labels", &labels); err != nil {
		return nil, err
	}
	mc, err := modelconfig.ModelConfig(name, base, policy, data, labels)
	if err != nil {
		return nil, err
	}
	return pytext.Format(mc), nil
}

func genModelServerConfig(c *harness.Ctx, in harness.Input) (any, error) {
	cfg, err := newFromKwargs(c, in)
	if err != nil {
		return nil, err
	}
	st, err := in.OptStr("server_type")
	if err != nil {
		return nil, err
	}
	server := ""
	if st != nil {
		server = *st
	}
	msc, err := cfg.ModelServerConfig(server)
	if err != nil {
		return nil, err
	}
	return pytext.Format(msc), nil
}

func genModelSpec(_ *harness.Ctx, in harness.Input) (any, error) {
	var calls [][3]json.RawMessage
	if err := in.Decode("calls", &calls); err != nil {
		return nil, err
	}
	var out []any
	for _, call := range calls {
		var name string
		if err := json.Unmarshal(call[0], &name); err != nil {
			return nil, fmt.Errorf("calls: name: %w", err)
		}
		var v modelconfig.Version
		var n int64
		var label string
		switch {
		case string(call[1]) == "null" || len(call[1]) == 0:
		case json.Unmarshal(call[1], &n) == nil:
			v.Number = &n
		case json.Unmarshal(call[1], &label) == nil:
			v.Label = &label
		default:
			return nil, fmt.Errorf("calls: version %s", call[1])
		}
		var sig *string
		if len(call[2]) > 0 && string(call[2]) != "null" {
			var s string
			if err := json.Unmarshal(call[2], &s); err != nil {
				return nil, fmt.Errorf("calls: signature: %w", err)
			}
			sig = &s
		}
		out = append(out, pytext.Format(modelconfig.ModelSpec(name, v, sig)))
	}
	return out, nil
}

func genModelVersionStatus(_ *harness.Ctx, in harness.Input) (any, error) {
	var calls [][]json.RawMessage
	if err := in.Decode("calls", &calls); err != nil {
		return nil, err
	}
	var out []any
	for _, call := range calls {
		var version int64
		state := servingapis.ModelVersionStatus_UNKNOWN
		code := tfprotobuf.Code_OK
		var msg *string
		if err := json.Unmarshal(call[0], &version); err != nil {
			return nil, fmt.Errorf("calls: version: %w", err)
		}
		if len(call) > 1 {
			var name string
			if err := json.Unmarshal(call[1], &name); err != nil {
				return nil, fmt.Errorf("calls: state: %w", err)
			}
			v, ok := servingapis.ModelVersionStatus_State_value[name]
			if !ok {
				return nil, fmt.Errorf("calls: unknown state %q", name)
			}
			state = servingapis.ModelVersionStatus_State(v)
		}
		if len(call) > 2 {
			var c int32
			if err := json.Unmarshal(call[2], &c); err != nil {
				return nil, fmt.Errorf("calls: error code: %w", err)
			}
			code = tfprotobuf.Code(c)
		}
		if len(call) > 3 && string(call[3]) != "null" {
			var s string
			if err := json.Unmarshal(call[3], &s); err != nil {
				return nil, fmt.Errorf("calls: error message: %w", err)
			}
			msg = &s
		}
		out = append(out, pytext.Format(modelconfig.VersionStatus(version, state, code, msg)))
	}
	return out, nil
}
