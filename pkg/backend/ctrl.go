package backend

import (
	"context"
	"errors"
	"sort"
	"strings"

	"github.com/monolith-go/monolith/pkg/zk"
)

// ListSavedModels returns the declared sub-graphs of modelName (children of
// /{bzid}/saved_models/{model}, sorted); none when the model is not declared.
func (b *ZKBackend) ListSavedModels(ctx context.Context, modelName string) ([]SavedModel, error) {
	subs, err := b.client.Children(ctx, "/"+b.bzid+"/saved_models/"+modelName)
	if errors.Is(err, zk.ErrNoNode) {
		return []SavedModel{}, nil
	}
	if err != nil {
		return nil, wrapErr("list saved models of "+modelName, err)
	}
	out := make([]SavedModel, len(subs))
	for i, sg := range subs {
		out[i] = SavedModel{ModelName: modelName, SubGraph: sg}
	}
	return out, nil
}

// DeclSavedModel stores cfg at /{bzid}/saved_models/{model}/{sub_graph} (created with its parents,
// or overwritten).
func (b *ZKBackend) DeclSavedModel(ctx context.Context, sm SavedModel, cfg SavedModelDeployConfig) error {
	data := cfg.Serialize()
	b.log.Info("declaring saved model", "saved_model", sm.String(), "deploy_config", string(data))
	return wrapErr("declare saved model "+sm.String(), b.createOrSet(ctx, b.savedModelPath(sm), data, false))
}

// AddToLayout makes sure the layout has the child "{model}:{sub_graph}".
func (b *ZKBackend) AddToLayout(ctx context.Context, layoutPath string, sm SavedModel) error {
	return wrapErr("add to layout", b.client.EnsurePath(ctx, layoutPath+"/"+sm.String()))
}

// RemoveFromLayout deletes the layout's child "{model}:{sub_graph}"; a missing one is not an error.
func (b *ZKBackend) RemoveFromLayout(ctx context.Context, layoutPath string, sm SavedModel) error {
	err := b.client.Delete(ctx, layoutPath+"/"+sm.String(), zk.DeleteOptions{})
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	return wrapErr("remove from layout", err)
}

// BzidInfo is the overview of a bzid that agentctl prints (the reference's bzid_info dict).
type BzidInfo struct {
	// Models: model name -> what is declared and bound.
	Models map[string]ModelInfo
	// Containers: cluster -> container id -> what it advertises and serves.
	Containers map[string]map[string]ContainerInfo
	// Layouts: the children of /{bzid}/layouts -> their children, sorted.
	Layouts map[string][]string
}

// ModelInfo is one model of BzidInfo.
type ModelInfo struct {
	// SubGraphsTotal is the number of declared sub-graphs; nil when the model is not declared
	// (it only has bindings).
	SubGraphsTotal *int
	// SubGraphsAvailable is the number of sub-graphs with at least one binding.
	SubGraphsAvailable int
	// SubGraphs: sub-graph -> its deploy config and bindings.
	SubGraphs map[string]SubGraphInfo
}

// SubGraphInfo is one sub-graph of a ModelInfo.
type SubGraphInfo struct {
	// DeployConfig is the stored JSON; nil when the sub-graph is not declared.
	DeployConfig *string
	// Bindings are the containers ("cluster:id") serving it, sorted; nil when none.
	Bindings []string
}

// ContainerInfo is one container of BzidInfo.
type ContainerInfo struct {
	// ServiceInfo is the stored JSON; nil when the container advertises none.
	ServiceInfo *string
	// SavedModels are the "model:sub_graph" it is bound to, sorted; nil when none.
	SavedModels []string
}

// BzidInfo collects the declared saved models with their deploy configs, the containers with their
// service infos, the layouts, and the bindings (the reference's bzid_info). Nodes deleted while it
// reads are left out.
func (b *ZKBackend) BzidInfo(ctx context.Context) (BzidInfo, error) {
	info := BzidInfo{Models: map[string]ModelInfo{}, Containers: map[string]map[string]ContainerInfo{}, Layouts: map[string][]string{}}
	root := "/" + b.bzid
	model := func(name string) ModelInfo {
		m, ok := info.Models[name]
		if !ok {
			m = ModelInfo{SubGraphs: map[string]SubGraphInfo{}}
		}
		return m
	}
	container := func(cluster, id string) ContainerInfo {
		if info.Containers[cluster] == nil {
			info.Containers[cluster] = map[string]ContainerInfo{}
		}
		return info.Containers[cluster][id]
	}

	// Declared saved models and their deploy configs.
	models, err := b.children(ctx, root+"/saved_models")
	if err != nil {
		return BzidInfo{}, err
	}
	for _, name := range models {
		subs, err := b.children(ctx, root+"/saved_models/"+name)
		if err != nil {
			return BzidInfo{}, err
		}
		m := model(name)
		total := len(subs)
		m.SubGraphsTotal = &total
		paths := make([]string, len(subs))
		for i, sg := range subs {
			paths[i] = root + "/saved_models/" + name + "/" + sg
		}
		for i, r := range b.getNodes(ctx, paths) {
			if r.err != nil {
				return BzidInfo{}, wrapErr("bzid info", r.err)
			}
			if r.ok {
				cfg := string(r.data)
				m.SubGraphs[subs[i]] = SubGraphInfo{DeployConfig: &cfg}
			}
		}
		info.Models[name] = m
	}

	// Container service infos.
	containers, err := b.children(ctx, root+"/container_service")
	if err != nil {
		return BzidInfo{}, err
	}
	paths := make([]string, len(containers))
	for i, name := range containers {
		paths[i] = root + "/container_service/" + name
	}
	for i, r := range b.getNodes(ctx, paths) {
		cluster, id, ok := splitContainer(containers[i])
		if !ok {
			b.log.Error("container_service child is not cluster:id; skipped", "child", containers[i])
			continue
		}
		if r.err != nil {
			return BzidInfo{}, wrapErr("bzid info", r.err)
		}
		if r.ok {
			c := container(cluster, id)
			si := string(r.data)
			c.ServiceInfo = &si
			info.Containers[cluster][id] = c
		}
	}

	// Layouts.
	layouts, err := b.children(ctx, root+"/layouts")
	if err != nil {
		return BzidInfo{}, err
	}
	for _, l := range layouts {
		kids, err := b.client.Children(ctx, root+"/layouts/"+l)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return BzidInfo{}, wrapErr("bzid info", err)
		}
		info.Layouts[l] = append([]string{}, kids...)
	}

	// Bindings.
	bound, err := b.children(ctx, root+"/binding")
	if err != nil {
		return BzidInfo{}, err
	}
	for _, name := range bound {
		binds, err := b.children(ctx, root+"/binding/"+name)
		if err != nil {
			return BzidInfo{}, err
		}
		m := model(name)
		for _, bd := range binds {
			sg, cn, ok := b.parseBinding(name, bd)
			if !ok {
				continue
			}
			s := m.SubGraphs[sg]
			if s.Bindings == nil {
				m.SubGraphsAvailable++
			}
			s.Bindings = append(s.Bindings, cn.String())
			m.SubGraphs[sg] = s
			c := container(cn.Cluster, cn.ID)
			c.SavedModels = append(c.SavedModels, name+":"+sg)
			info.Containers[cn.Cluster][cn.ID] = c
			info.Models[name] = m
		}
	}
	for _, m := range info.Models {
		for _, s := range m.SubGraphs {
			sort.Strings(s.Bindings)
		}
	}
	for _, cs := range info.Containers {
		for _, c := range cs {
			sort.Strings(c.SavedModels)
		}
	}
	return info, nil
}

// children lists a node's children (sorted); a missing node has none.
func (b *ZKBackend) children(ctx context.Context, path string) ([]string, error) {
	kids, err := b.client.Children(ctx, path)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	return kids, wrapErr("bzid info", err)
}

// splitContainer reads "cluster:id[:...]" as the reference does (split(":")[:2]).
func splitContainer(s string) (cluster, id string, ok bool) {
	parts := strings.Split(s, ":")
	if len(parts) < 2 {
		return "", "", false
	}
	return parts[0], parts[1], true
}
