package zkmirror

import (
	"context"
	"strconv"
	"strings"

	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/zk"
)

// publishModel is the model name of a publish node "{shard_id}:{replica_id}:{model_name}". A name
// with fewer fields gives its last field, as the reference's split(':')[-1] does.
func publishModel(name string) string {
	if parts := strings.SplitN(name, ":", 3); len(parts) == 3 {
		return parts[2]
	}
	return name[strings.LastIndexByte(name, ':')+1:]
}

// PublishLoading writes each publish whose mirrored value differs (or that is not mirrored: the
// mirror holds LOAD publishes only) to /{bzid}/publish/{shard_id}:{replica_id}:{model_name}.
// (The reference's publish_loadding.) It stops at the first failure.
func (m *Mirror) PublishLoading(ctx context.Context, pms ...datadef.PublishMeta) error {
	for _, pm := range pms {
		path := pm.Path(m.publishPath)
		value := pm.Serialize()
		if cur, ok := m.Get(path); ok && string(cur) == string(value) {
			continue
		}
		if err := m.Create(ctx, path, value, zk.CreateOptions{MakePath: true}); err != nil {
			return err
		}
	}
	return nil
}

// PublishedPaths returns the mirrored publish paths of model, in the order they were mirrored.
func (m *Mirror) PublishedPaths(model string) []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var paths []string
	m.data.under(m.publishPath, func(rel string, e *entry) {
		if !strings.Contains(rel, "/") && publishModel(rel) == model {
			paths = append(paths, e.path)
		}
	})
	return paths
}

// ExpectedLoading returns, by model name, what this host should load (the reference's
// expected_loading). A model counts once all its publishes are mirrored (as many as the
// total_publish_num of the publish that completes the count). Of those, the one with the fewest
// sub models is taken, unless this host's own publish ({shard}:{replica}:{model}) is mirrored,
// which wins. Then:
//   - a publish of this shard and replica is loaded as is;
//   - a publish of this shard (not is_spec) is taken over by this replica (autoscaling: a new
//     replica loads what its shard loads);
//   - any other publish is taken over with this shard and replica and only its entry sub models
//     (every host serves the entry).
//
// Publishes that are not LOAD are skipped. Nodes whose name cannot be read are skipped and logged
// (the reference raised, losing every model's answer); only decodable LOAD publishes are mirrored.
func (m *Mirror) ExpectedLoading() map[string]datadef.PublishMeta {
	m.mu.RLock()
	defer m.mu.RUnlock()
	counts := map[string]int{}
	fewest := map[string]datadef.PublishMeta{}
	var selected []datadef.PublishMeta
	for _, node := range m.data.children(m.publishPath) {
		if strings.Count(node, ":") < 2 {
			m.log.Warn("expected_loading: bad publish name, skipped", "name", node)
			continue
		}
		pm, ok := m.publishAtLocked(m.publishPath + "/" + node)
		if !ok {
			continue
		}
		model := publishModel(node)
		counts[model]++
		if cur, ok := fewest[model]; !ok || len(cur.SubModels) > len(pm.SubModels) {
			fewest[model] = pm
		}
		if counts[model] == pm.TotalPublishNum {
			selected = append(selected, fewest[model])
		}
	}

	expected := map[string]datadef.PublishMeta{}
	for _, pm := range selected {
		if pm.ModelName == nil {
			m.log.Warn("expected_loading: publish without model_name, skipped")
			continue
		}
		own := m.publishPath + "/" + strconv.Itoa(m.shardID) + ":" + strconv.Itoa(m.replicaID) + ":" + *pm.ModelName
		if mine, ok := m.publishAtLocked(own); ok {
			pm = mine
		}
		if pm.PType != datadef.PublishLoad {
			m.log.Info("ptype is not load, skip!")
			continue
		}
		if pm.ModelName == nil {
			continue
		}
		model := *pm.ModelName
		_, have := expected[model]
		sameShard := pm.ShardID != nil && *pm.ShardID == m.shardID
		switch {
		case sameShard && pm.ReplicaID == m.replicaID:
			expected[model] = pm
		case sameShard && !pm.IsSpec:
			if !have {
				pm.ReplicaID = m.replicaID
				expected[model] = pm
			}
		case !have:
			shard := m.shardID
			pm.ShardID = &shard
			pm.ReplicaID = m.replicaID
			pm.SubModels = entrySubModels(pm.SubModels)
			expected[model] = pm
		}
	}
	return expected
}

// publishAtLocked returns (a clone of) the mirrored PublishMeta at path.
func (m *Mirror) publishAtLocked(path string) (datadef.PublishMeta, bool) {
	e := m.data.entry(path)
	if e == nil {
		return datadef.PublishMeta{}, false
	}
	d, ok := valueOf[datadef.PublishMeta](e)
	if !ok { // the publish watch stores decoded publishes only: a node below a publish?
		m.log.Warn("expected_loading: not a PublishMeta, skipped", "path", path)
		return datadef.PublishMeta{}, false
	}
	return clonePublish(d.v), true
}

// entrySubModels keeps the sub models whose name starts with "entry", in order (a new slice).
func entrySubModels(subs []datadef.SubModel) []datadef.SubModel {
	out := []datadef.SubModel{}
	for _, s := range subs {
		if strings.HasPrefix(s.Name, "entry") {
			out = append(out, s)
		}
	}
	return out
}
