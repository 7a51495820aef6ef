package agentsvc

import (
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	pb "github.com/monolith-go/monolith/gen/pb/monolith/serving/agent_service"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/datadef"
)

// fakeWatcher is an in-package ReplicaSource that keeps what ReplicaWatcher keeps (task path ->
// replica id -> ReplicaMeta) and answers get_replicas / get_all_replicas the way the reference
// does, parsing every task path on every call.
type fakeWatcher struct {
	dcAware bool

	mu       sync.Mutex
	replicas map[string]map[string]datadef.ReplicaMeta
	version  atomic.Uint64
	calls    atomic.Int64
}

func newFakeWatcher(dcAware bool) *fakeWatcher {
	return &fakeWatcher{dcAware: dcAware, replicas: map[string]map[string]datadef.ReplicaMeta{}}
}

// set stores a replica at a replica path (/bzid/service/model[/idc:cluster]/ps:0/1).
func (f *fakeWatcher) set(replicaPath string, meta datadef.ReplicaMeta) {
	i := strings.LastIndexByte(replicaPath, '/')
	task, id := replicaPath[:i], replicaPath[i+1:]
	f.mu.Lock()
	if f.replicas[task] == nil {
		f.replicas[task] = map[string]datadef.ReplicaMeta{}
	}
	f.replicas[task][id] = meta
	f.mu.Unlock()
	f.version.Add(1) // after the change is visible, as Versioned requires
}

func meta(addr string, stat datadef.ModelState) datadef.ReplicaMeta {
	m := datadef.NewReplicaMeta()
	m.Address, m.Stat = &addr, stat
	return m
}

// available lists the AVAILABLE addresses of one task in replica id order (ZooKeeper child order).
func available(replicas map[string]datadef.ReplicaMeta) []string {
	ids := make([]string, 0, len(replicas))
	for id := range replicas {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		a, _ := strconv.Atoi(ids[i])
		b, _ := strconv.Atoi(ids[j])
		return a < b
	})
	var out []string
	for _, id := range ids {
		if m := replicas[id]; m.Stat == datadef.StateAvailable && m.Address != nil {
			out = append(out, *m.Address)
		}
	}
	return out
}

func (f *fakeWatcher) GetReplicas(st pb.ServerType, task int, idc, cluster *string) []string {
	f.calls.Add(1)
	name := ServerTypeName(st)
	f.mu.Lock()
	defer f.mu.Unlock()
	addrs := []string{}
	for path, replicas := range f.replicas {
		zp := agentconf.ParseZKPath(path)
		ship := !f.dcAware || zp.ShipIn(idc, cluster)
		if zp.ServerType == nil || *zp.ServerType != name || !ship {
			continue
		}
		if idx, err := strconv.Atoi(*zp.Index); err == nil && idx == task {
			addrs = append(addrs, available(replicas)...)
		}
	}
	return addrs
}

func (f *fakeWatcher) GetAllReplicas(st pb.ServerType, idc, cluster *string) map[string][]string {
	f.calls.Add(1)
	name := ServerTypeName(st)
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string][]string{}
	for path, replicas := range f.replicas {
		zp := agentconf.ParseZKPath(path)
		ship := !f.dcAware || zp.ShipIn(idc, cluster)
		if zp.ServerType == nil || *zp.ServerType != name || !ship {
			continue
		}
		key := *zp.Task()
		if f.dcAware {
			key = *zp.Location() + "/" + key
		}
		out[key] = append(out[key], available(replicas)...)
	}
	return out
}

// versionedWatcher adds DataVersion, so the service caches its answers.
type versionedWatcher struct{ *fakeWatcher }

func (v versionedWatcher) DataVersion() uint64 { return v.version.Load() }

// fakeMirror is an in-package MirrorSource holding what ZKMirror's get_all_replicas and
// get_task_replicas read: model -> "ps:0" -> replica -> ReplicaMeta. It records the server types
// it was asked for.
type fakeMirror struct {
	mu     sync.Mutex
	models map[string]map[string]map[int]datadef.ReplicaMeta
	asked  []string
}

func newFakeMirror() *fakeMirror {
	return &fakeMirror{models: map[string]map[string]map[int]datadef.ReplicaMeta{}}
}

func (f *fakeMirror) add(model, serverType string, task, replica int, m datadef.ReplicaMeta) {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := serverType + ":" + strconv.Itoa(task)
	if f.models[model] == nil {
		f.models[model] = map[string]map[int]datadef.ReplicaMeta{}
	}
	if f.models[model][key] == nil {
		f.models[model][key] = map[int]datadef.ReplicaMeta{}
	}
	f.models[model][key][replica] = m
}

func sortedAvailable(replicas map[int]datadef.ReplicaMeta) []datadef.ReplicaMeta {
	ids := make([]int, 0, len(replicas))
	for id := range replicas {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	var out []datadef.ReplicaMeta
	for _, id := range ids {
		if replicas[id].Stat == datadef.StateAvailable {
			out = append(out, replicas[id])
		}
	}
	return out
}

func (f *fakeMirror) GetAllReplicas(serverType string) map[string][]datadef.ReplicaMeta {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, serverType)
	out := map[string][]datadef.ReplicaMeta{}
	for model, tasks := range f.models {
		for task, replicas := range tasks {
			st, idx, _ := strings.Cut(task, ":")
			if st != serverType {
				continue
			}
			if rms := sortedAvailable(replicas); len(rms) > 0 {
				out[model+":"+st+":"+idx] = rms
			}
		}
	}
	return out
}

func (f *fakeMirror) GetTaskReplicas(model, serverType string, task int) []datadef.ReplicaMeta {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, serverType)
	return sortedAvailable(f.models[model][strings.ToLower(serverType)+":"+strconv.Itoa(task)])
}
