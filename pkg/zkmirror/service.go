package zkmirror

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/zk"
)

// UpdateService makes this host's service nodes those of replicas: the mirrored local replicas
// (see LocalReplicaPaths) that replicas does not name are deleted first, then each replica whose
// node is not mirrored with the same value is written as an ephemeral node
// /{bzid}/service/{model}/{server_type}:{task}/{replica} (the reference's update_service).
// Every node is tried; the failures are logged and returned joined (the reference raised on the
// first failed delete and only logged failed writes).
func (m *Mirror) UpdateService(ctx context.Context, replicas []datadef.ReplicaMeta) error {
	type write struct {
		path  string
		value []byte
	}
	var writes []write
	index := map[string]int{}
	want := map[string]bool{}
	var errs []error
	for _, rm := range replicas {
		path, err := rm.Path(m.bzid, "/")
		if err != nil {
			errs = append(errs, fmt.Errorf("zkmirror: update_service: %w", err))
			continue
		}
		want[path] = true
		value := rm.Serialize()
		if cur, ok := m.Get(path); ok && string(cur) == string(value) {
			continue
		}
		if i, dup := index[path]; dup {
			writes[i].value = value // the last replica given for a path wins, as in a dict
			continue
		}
		index[path] = len(writes)
		writes = append(writes, write{path, value})
	}

	for _, path := range m.LocalReplicaPaths() {
		if want[path] {
			continue
		}
		if err := m.Delete(ctx, path, true); err != nil {
			m.log.Warn("update_service: cannot delete a stale replica", "path", path, "err", err)
			errs = append(errs, err)
		}
	}
	if len(writes) > 0 {
		paths := make([]string, len(writes))
		for i, w := range writes {
			paths[i] = w.path
		}
		m.log.Info("update_service: create or update", "paths", paths)
	}
	for _, w := range writes {
		if err := m.Create(ctx, w.path, w.value, zk.CreateOptions{Ephemeral: true, MakePath: true}); err != nil {
			m.log.Warn("update_service: cannot write a replica", "path", w.path, "err", err)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// LocalReplicaPaths returns, sorted, the mirrored service nodes of this host: the replica's
// address has this host (LocalHost) before its first ':' and its replica is TCEReplicaID.
func (m *Mirror) LocalReplicaPaths() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var paths []string
	m.data.under(m.servicePath, func(_ string, e *entry) {
		d, ok := valueOf[datadef.ReplicaMeta](e)
		rm := d.v
		if !ok || rm.Address == nil {
			return
		}
		host, _, _ := strings.Cut(*rm.Address, ":")
		if host == m.localHost && rm.Replica == m.replicaID {
			paths = append(paths, e.path)
		}
	})
	sort.Strings(paths)
	return paths
}

// available returns (a clone of) the mirrored ReplicaMeta of e when it is AVAILABLE.
func (m *Mirror) available(e *entry) (datadef.ReplicaMeta, bool) {
	d, ok := valueOf[datadef.ReplicaMeta](e)
	if !ok {
		m.log.Debug("bad ReplicaMeta, skipped", "path", e.path, "err", d.err)
		return datadef.ReplicaMeta{}, false
	}
	if d.v.Stat != datadef.StateAvailable {
		return datadef.ReplicaMeta{}, false
	}
	return cloneReplica(d.v), true
}

// AllReplicas returns the AVAILABLE replicas of server type st of every model, keyed
// "{model}:{server_type}:{task}", each list in mirror order (the reference's get_all_replicas).
func (m *Mirror) AllReplicas(st ServerType) map[string][]datadef.ReplicaMeta {
	m.mu.RLock()
	defer m.mu.RUnlock()
	want := st.pathForm()
	out := map[string][]datadef.ReplicaMeta{}
	m.data.under(m.servicePath, func(rel string, e *entry) {
		model, st, task, ok := splitServicePath(rel)
		if !ok || st != want {
			return
		}
		if rm, ok := m.available(e); ok {
			key := model + ":" + st + ":" + task
			out[key] = append(out[key], rm)
		}
	})
	return out
}

// splitServicePath splits "{model}/{server_type}:{task}/{replica}"; ok is false for any other
// shape (the reference's replace('/', ':').split(':') into four, which raised otherwise).
func splitServicePath(rel string) (model, st, task string, ok bool) {
	model, rest, ok1 := strings.Cut(rel, "/")
	taskNode, replica, ok2 := strings.Cut(rest, "/")
	st, task, ok3 := strings.Cut(taskNode, ":")
	ok = ok1 && ok2 && ok3 && !strings.ContainsAny(model, ":") && !strings.ContainsAny(task, ":") &&
		!strings.ContainsAny(replica, ":/")
	return model, st, task, ok
}

// taskType is the server type of a task node "{server_type}:{task}".
func taskType(task string) string {
	t, _, _ := strings.Cut(task, ":")
	return t
}

// ModelReplicas returns the AVAILABLE replicas of model with server type st, keyed
// "{model}:{server_type}:{task}" (the reference's get_model_replicas; it listed every replica
// once per replica node of its task, and matched the server type as a prefix of the task).
func (m *Mirror) ModelReplicas(model string, st ServerType) map[string][]datadef.ReplicaMeta {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := map[string][]datadef.ReplicaMeta{}
	base := zk.Join(m.servicePath, model)
	for _, task := range m.data.children(base) {
		if taskType(task) != st.pathForm() {
			continue
		}
		if rms := m.taskReplicasLocked(zk.Join(base, task)); len(rms) > 0 {
			out[model+":"+task] = rms
		}
	}
	return out
}

func (m *Mirror) taskReplicasLocked(taskPath string) []datadef.ReplicaMeta {
	var out []datadef.ReplicaMeta
	for _, replica := range m.data.children(taskPath) {
		e := m.data.entry(taskPath + "/" + replica)
		if e == nil {
			continue
		}
		if rm, ok := m.available(e); ok {
			out = append(out, rm)
		}
	}
	return out
}

// TaskReplicas returns the AVAILABLE replicas of one task, in mirror order.
func (m *Mirror) TaskReplicas(model string, st ServerType, task int) []datadef.ReplicaMeta {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.taskReplicasLocked(zk.Join(m.servicePath, model, st.pathForm()+":"+strconv.Itoa(task)))
}

// Replica returns one replica when it is mirrored and AVAILABLE.
func (m *Mirror) Replica(model string, st ServerType, task, replica int) (datadef.ReplicaMeta, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	path := zk.Join(m.servicePath, model, st.pathForm()+":"+strconv.Itoa(task), strconv.Itoa(replica))
	e := m.data.entry(path)
	if e == nil {
		return datadef.ReplicaMeta{}, false
	}
	return m.available(e)
}

// DataVersion changes whenever the mirrored nodes change (agentsvc.Versioned: the AgentService
// reuses the responses it built for an unchanged version).
func (m *Mirror) DataVersion() uint64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.data.version
}
