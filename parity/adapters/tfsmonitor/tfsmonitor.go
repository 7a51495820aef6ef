// Package tfsmonitor adapts pkg/tfs's monitor to the parity cases of monolith/agent_service/tfs_monitor.py.
package tfsmonitor

import (
	"encoding/json"

	"github.com/monolith-go/monolith/parity/adapters/utils"
	"github.com/monolith-go/monolith/parity/harness"
	"github.com/monolith-go/monolith/pkg/pytext"
	"github.com/monolith-go/monolith/pkg/tfs"
)

// Register adds the tfs_monitor.py calls (the remove-config scenario runs fake TF Servings).
func Register(r *harness.Registry) {
	r.Register("TFSMonitor(conf).gen_model_config(pms, fix_dense_version)", genModelConfig)
	r.Register("TFSMonitor(conf).gen_model_config", genModelConfig)
	r.Register("TFSMonitor(conf).get_service_type(name)", getServiceType)
	r.Register("TFSMonitor(conf).get_addr(name)", getAddr)
	r.Register(CallRemoveConfig, removeConfig)
}

func monitor(c *harness.Ctx, in harness.Input, key string) (*tfs.Monitor, error) {
	raw, err := in.Raw(key)
	if err != nil {
		return nil, err
	}
	conf, err := utils.AgentConfigFromKwargs(c, raw)
	if err != nil {
		return nil, err
	}
	return tfs.NewMonitor(conf), nil
}

func genModelConfig(c *harness.Ctx, in harness.Input) (any, error) {
	m, err := monitor(c, in, "conf_kwargs")
	if err != nil {
		return nil, err
	}
	pms, err := publishMetas(in, "pms")
	if err != nil {
		return nil, err
	}
	fix := false
	if in.Has("fix_dense_version") {
		if fix, err = in.Bool("fix_dense_version"); err != nil {
			return nil, err
		}
	}
	configs, err := m.GenModelConfig(pms, fix)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	for st, msc := range configs {
		out[st] = pytext.Format(msc)
	}
	return out, nil
}

func getServiceType(c *harness.Ctx, in harness.Input) (any, error) {
	m, err := monitor(c, in, "conf_kwargs")
	if err != nil {
		return nil, err
	}
	var names []string
	if err := in.Decode("names", &names); err != nil {
		return nil, err
	}
	out := map[string]any{}
	for _, n := range names {
		st, err := m.ServiceType(n)
		switch {
		case err != nil:
			out[n] = harness.ErrorValue(err)
		case st == "":
			out[n] = harness.Value(nil)
		default:
			out[n] = harness.Value(st)
		}
	}
	return out, nil
}

func getAddr(c *harness.Ctx, in harness.Input) (any, error) {
	var deploys map[string]json.RawMessage
	if err := in.Decode("deploys", &deploys); err != nil {
		return nil, err
	}
	out := map[string]any{}
	for name, kw := range deploys {
		conf, err := utils.AgentConfigFromKwargs(c, kw)
		if err != nil {
			return nil, err
		}
		m := tfs.NewMonitor(conf)
		res := map[string]any{}
		for _, sub := range []string{"entry", "ps_0", "dense_0"} {
			res[sub] = harness.ValueOrError(m.Addr(sub))
		}
		out[name] = res
	}
	return out, nil
}
