package zkmirror

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	"github.com/monolith-go/monolith/parity/adapters/utils"
	"github.com/monolith-go/monolith/parity/harness"
	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zkmirror"
)

// apply runs one ZKMirror call and returns its result as the goldens write it.
func apply(ctx context.Context, m *zkmirror.Mirror, name string, args any) (any, error) {
	a := &argList{name: name, args: args}
	// Each case reads its arguments first and checks a.err before calling the mirror.
	switch name {
	case "watch_portal":
		return nil, m.WatchPortal(ctx)
	case "watch_publish":
		return nil, m.WatchPublish(ctx)
	case "watch_resource":
		return nil, m.WatchResource(ctx)
	case "watch_service":
		return nil, m.WatchService(ctx)
	case "ensure_path":
		path := a.str(0)
		if a.err != nil {
			return nil, a.err
		}
		return nil, m.EnsurePath(ctx, path)
	case "create", "set":
		path, value := a.str(0), a.str(1)
		if a.err != nil {
			return nil, a.err
		}
		if name == "set" {
			return nil, m.Set(ctx, path, []byte(value))
		}
		return nil, m.Create(ctx, path, []byte(value), zk.CreateOptions{MakePath: true})
	case "exists":
		path := a.str(0)
		if a.err != nil {
			return nil, a.err
		}
		return m.Exists(ctx, path), nil
	case "delete":
		path, recursive := a.str(0), true
		if a.len() > 1 {
			recursive = a.bool(1)
		}
		if a.err != nil {
			return nil, a.err
		}
		return nil, m.Delete(ctx, path, recursive)
	case "get":
		path := a.str(0)
		if a.err != nil {
			return nil, a.err
		}
		if d, ok := m.Get(path); ok {
			return utils.PyBytes(d), nil
		}
		return nil, nil
	case "get_children", "get_published_path":
		arg := a.str(0)
		if a.err != nil {
			return nil, a.err
		}
		if name == "get_children" {
			return nonNil(m.Children(arg)), nil
		}
		return nonNil(m.PublishedPaths(arg)), nil
	case "publish_loadding":
		pms, err := publishMetas(args)
		if err != nil {
			return nil, err
		}
		return nil, m.PublishLoading(ctx, pms...)
	case "expected_loading":
		out := map[string]any{}
		for model, pm := range m.ExpectedLoading() {
			out[model] = publishFields(pm)
		}
		return out, nil
	case "report_resource":
		r, err := resourceSpec(args)
		if err != nil {
			return nil, err
		}
		return nil, m.ReportResource(ctx, r)
	case "resources":
		out := []any{}
		for _, r := range m.Resources() {
			out = append(out, resourceFields(r))
		}
		return out, nil
	case "update_service":
		rms, err := replicaMetas(args)
		if err != nil {
			return nil, err
		}
		return nil, m.UpdateService(ctx, rms)
	case "get_all_replicas":
		st := a.serverType(0)
		if a.err != nil {
			return nil, a.err
		}
		return replicaMap(m.AllReplicas(st)), nil
	case "get_model_replicas":
		model, st := a.str(0), a.serverType(1)
		if a.err != nil {
			return nil, a.err
		}
		return replicaMap(m.ModelReplicas(model, st)), nil
	case "get_task_replicas":
		model, st, task := a.str(0), a.serverType(1), a.int(2)
		if a.err != nil {
			return nil, a.err
		}
		return replicaList(m.TaskReplicas(model, st, task)), nil
	case "get_replica":
		model, st, task, replica := a.str(0), a.serverType(1), a.int(2), a.int(3)
		if a.err != nil {
			return nil, a.err
		}
		if rm, ok := m.Replica(model, st, task, replica); ok {
			return replicaFields(rm), nil
		}
		return nil, nil
	case "local_replica_paths":
		return nonNil(m.LocalReplicaPaths()), nil
	}
	return nil, &harness.InputError{Key: "ops", Msg: "unknown op " + strconv.Quote(name)}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// argList reads positional arguments, remembering the first problem.
type argList struct {
	name string
	args any
	err  error
}

func (a *argList) len() int {
	l, _ := a.args.([]any)
	return len(l)
}

func (a *argList) at(i int) any {
	l, ok := a.args.([]any)
	if !ok || i >= len(l) {
		a.fail(fmt.Sprintf("argument %d missing", i))
		return nil
	}
	return l[i]
}

func (a *argList) fail(msg string) {
	if a.err == nil {
		a.err = &harness.InputError{Key: "ops " + a.name, Msg: msg}
	}
}

func (a *argList) str(i int) string {
	s, ok := a.at(i).(string)
	if !ok {
		a.fail(fmt.Sprintf("argument %d: want a string", i))
	}
	return s
}

func (a *argList) int(i int) int {
	n, ok := a.at(i).(json.Number)
	v, err := strconv.Atoi(string(n))
	if !ok || err != nil {
		a.fail(fmt.Sprintf("argument %d: want an integer", i))
	}
	return v
}

func (a *argList) bool(i int) bool {
	b, ok := a.at(i).(bool)
	if !ok {
		a.fail(fmt.Sprintf("argument %d: want a boolean", i))
	}
	return b
}

func (a *argList) serverType(i int) zkmirror.ServerType {
	st, err := zkmirror.ParseServerType(a.str(i))
	if err != nil {
		a.fail(err.Error())
	}
	return st
}

// kwargs is a dataclass's keyword arguments.
type kwargs map[string]any

func asKwargs(v any) (kwargs, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &harness.InputError{Key: "ops", Msg: fmt.Sprintf("want keyword arguments, got %T", v)}
	}
	return m, nil
}

func (k kwargs) optStr(key string, dst **string) error {
	v, ok := k[key]
	if !ok || v == nil {
		return nil
	}
	s, ok := v.(string)
	if !ok {
		return &harness.InputError{Key: key, Msg: "want a string"}
	}
	*dst = &s
	return nil
}

func (k kwargs) int(key string, dst *int) error {
	v, ok := k[key]
	if !ok {
		return nil
	}
	n, err := strconv.Atoi(fmt.Sprint(v))
	if err != nil {
		return &harness.InputError{Key: key, Msg: "want an integer"}
	}
	*dst = n
	return nil
}

func (k kwargs) optInt(key string, dst **int) error {
	if v, ok := k[key]; !ok || v == nil {
		return nil
	}
	var n int
	if err := k.int(key, &n); err != nil {
		return err
	}
	*dst = &n
	return nil
}

func (k kwargs) float(key string, dst *float64) error {
	v, ok := k[key]
	if !ok {
		return nil
	}
	n, ok := v.(json.Number)
	f, err := n.Float64()
	if !ok || err != nil {
		return &harness.InputError{Key: key, Msg: "want a number"}
	}
	*dst = f
	return nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// publishMetas reads the PublishMeta keyword arguments of publish_loadding.
func publishMetas(args any) ([]datadef.PublishMeta, error) {
	list, ok := args.([]any)
	if !ok {
		return nil, &harness.InputError{Key: "ops publish_loadding", Msg: "want a list of PublishMeta arguments"}
	}
	var out []datadef.PublishMeta
	for _, v := range list {
		k, err := asKwargs(v)
		if err != nil {
			return nil, err
		}
		pm := datadef.NewPublishMeta()
		err = firstErr(k.optInt("shard_id", &pm.ShardID), k.int("replica_id", &pm.ReplicaID),
			k.optStr("model_name", &pm.ModelName), k.optInt("num_ps", &pm.NumPS),
			k.int("total_publish_num", &pm.TotalPublishNum))
		if err != nil {
			return nil, err
		}
		if pm.SubModels, err = subModels(k["sub_models"]); err != nil {
			return nil, err
		}
		if p, ok := k["ptype"]; ok {
			switch p {
			case "LOAD":
				pm.PType = datadef.PublishLoad
			case "UNLOAD":
				pm.PType = datadef.PublishUnload
			default:
				return nil, &harness.InputError{Key: "ptype", Msg: fmt.Sprintf("want LOAD or UNLOAD, got %v", p)}
			}
		}
		if s, ok := k["is_spec"].(bool); ok {
			pm.IsSpec = s
		}
		out = append(out, pm)
	}
	return out, nil
}

// subModels rebuilds the sub_models dict. The golden writer sorted the keys; the scripts built
// the dict as zk_mirror_test's scheduler does, the ps_* (dense_*) sub models first and "entry"
// last, and the serialized bytes follow that order, so "entry" goes back to the end.
func subModels(v any) ([]datadef.SubModel, error) {
	if v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &harness.InputError{Key: "sub_models", Msg: "want an object"}
	}
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.SliceStable(names, func(i, j int) bool {
		if (names[i] == "entry") != (names[j] == "entry") {
			return names[j] == "entry"
		}
		return names[i] < names[j]
	})
	out := make([]datadef.SubModel, 0, len(names))
	for _, n := range names {
		p, ok := m[n].(string)
		if !ok {
			return nil, &harness.InputError{Key: "sub_models." + n, Msg: "want a string"}
		}
		out = append(out, datadef.SubModel{Name: n, Path: p})
	}
	return out, nil
}

func resourceSpec(args any) (datadef.ResourceSpec, error) {
	r := datadef.NewResourceSpec()
	k, err := asKwargs(args)
	if err != nil {
		return r, err
	}
	err = firstErr(k.optStr("address", &r.Address), k.optInt("shard_id", &r.ShardID), k.optInt("replica_id", &r.ReplicaID),
		k.optInt("memory", &r.Memory), k.float("cpu", &r.CPU), k.float("network", &r.Network), k.float("work_load", &r.WorkLoad))
	return r, err
}

func replicaMetas(args any) ([]datadef.ReplicaMeta, error) {
	list, ok := args.([]any)
	if !ok {
		return nil, &harness.InputError{Key: "ops update_service", Msg: "want a list of ReplicaMeta arguments"}
	}
	out := make([]datadef.ReplicaMeta, 0, len(list))
	for _, v := range list {
		k, err := asKwargs(v)
		if err != nil {
			return nil, err
		}
		rm := datadef.NewReplicaMeta()
		stat := int(rm.Stat)
		err = firstErr(k.optStr("address", &rm.Address), k.optStr("address_ipv6", &rm.AddressIPv6), k.int("stat", &stat),
			k.optStr("model_name", &rm.ModelName), k.optStr("server_type", &rm.ServerType), k.int("task", &rm.Task),
			k.int("replica", &rm.Replica), k.optStr("archon_address", &rm.ArchonAddress),
			k.optStr("archon_address_ipv6", &rm.ArchonAddressIPv6))
		if err != nil {
			return nil, err
		}
		rm.Stat = datadef.ModelState(stat)
		out = append(out, rm)
	}
	return out, nil
}

// publishFields renders a PublishMeta as the goldens do (ptype by name).
func publishFields(p datadef.PublishMeta) map[string]any {
	var subs any
	if p.SubModels != nil {
		m := map[string]any{}
		for _, s := range p.SubModels {
			m[s.Name] = s.Path
		}
		subs = m
	}
	return map[string]any{"shard_id": optInt(p.ShardID), "replica_id": p.ReplicaID, "model_name": optStr(p.ModelName),
		"num_ps": optInt(p.NumPS), "total_publish_num": p.TotalPublishNum, "sub_models": subs,
		"ptype": p.PType.String(), "is_spec": p.IsSpec}
}

func resourceFields(r datadef.ResourceSpec) map[string]any {
	return map[string]any{"address": optStr(r.Address), "shard_id": optInt(r.ShardID), "replica_id": optInt(r.ReplicaID),
		"memory": optInt(r.Memory), "cpu": harness.Float(r.CPU), "network": harness.Float(r.Network),
		"work_load": harness.Float(r.WorkLoad)}
}

func replicaFields(r datadef.ReplicaMeta) map[string]any {
	return map[string]any{"address": optStr(r.Address), "address_ipv6": optStr(r.AddressIPv6), "stat": int(r.Stat),
		"model_name": optStr(r.ModelName), "server_type": optStr(r.ServerType), "task": r.Task, "replica": r.Replica,
		"archon_address": optStr(r.ArchonAddress), "archon_address_ipv6": optStr(r.ArchonAddressIPv6)}
}

func replicaList(rms []datadef.ReplicaMeta) []any {
	out := []any{}
	for _, rm := range rms {
		out = append(out, replicaFields(rm))
	}
	return out
}

func replicaMap(m map[string][]datadef.ReplicaMeta) map[string]any {
	out := map[string]any{}
	for k, rms := range m {
		out[k] = replicaList(rms)
	}
	return out
}
