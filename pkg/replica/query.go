package replica

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	agentpb "github.com/monolith-go/monolith/gen/pb/monolith/serving/agent_service"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/pyint"
	"github.com/monolith-go/monolith/pkg/pytext"
)

// DC restricts a query to one idc:cluster (the reference's idc and cluster arguments); a nil *DC
// matches every location. It only matters under dc_aware.
type DC struct {
	IDC, Cluster string
}

// ConfDC is the config's own location, or nil when its idc or cluster is unknown (the reference
// passes conf.idc and conf.cluster, and ship_in matches everything when either is None).
func ConfDC(conf *agentconf.AgentConfig) *DC {
	idc, cluster := conf.IDC(), conf.Cluster()
	if idc == nil || cluster == nil {
		return nil
	}
	return &DC{IDC: *idc, Cluster: *cluster}
}

// Replica is one cached replica: its key (str(int(node name))) and metadata.
type Replica struct {
	Key  string
	Meta datadef.ReplicaMeta
}

// TaskReplicas is a task path and its cached replicas, oldest first.
type TaskReplicas struct {
	Path     string
	Replicas []Replica
}

// TargetExtraInfo is parameter_sync's ClientConfig.TargetExtraInfo: where a sync target runs.
// IDC and Cluster are nil when the path has no location (fields left unset).
type TargetExtraInfo struct {
	IDC, Cluster *string
	ReplicaID    int64
}

// TextFormat is the message in protobuf text format, as Python's text_format.MessageToString
// writes it (set fields in field order: idc, cluster, replica_id).
func (t TargetExtraInfo) TextFormat() string {
	var b strings.Builder
	if t.IDC != nil {
		fmt.Fprintf(&b, "idc: \"%s\"\n", pytext.CEscape([]byte(*t.IDC)))
	}
	if t.Cluster != nil {
		fmt.Fprintf(&b, "cluster: \"%s\"\n", pytext.CEscape([]byte(*t.Cluster)))
	}
	fmt.Fprintf(&b, "replica_id: %d\n", t.ReplicaID)
	return b.String()
}

// serverTypeName is ServerType.Name(st).lower(), "" for a value the enum does not name.
func serverTypeName(st agentpb.ServerType) string {
	n, ok := agentpb.ServerType_name[int32(st)]
	if !ok {
		return ""
	}
	return strings.ToLower(n)
}

// matches reports whether task t is of server type st (and index task when task >= 0) and lies
// in dc (under dc_aware only).
func (w *Watcher) matches(t *taskEntry, st string, task int, dc *DC) bool {
	z := t.zkPath
	if st == "" || z.ServerType == nil || *z.ServerType != st {
		return false
	}
	if task >= 0 {
		idx, err := pyint.Atoi(*z.Index)
		if err != nil || idx != task {
			return false
		}
	}
	return !w.conf.DCAware || dc == nil || z.ShipIn(&dc.IDC, &dc.Cluster)
}

// address is the replica's address in the watcher's kind and family; "" when it has none (the
// reference lists None).
func (w *Watcher) address(m *datadef.ReplicaMeta) string {
	a, err := m.AddressFor(w.useArchon, w.family)
	if err != nil || a == nil {
		return ""
	}
	return *a
}

// GetAllReplicas lists the AVAILABLE replicas' addresses of every task of server type st in dc,
// keyed by task ("ps:0"), or by location and task ("lf:default/ps:0") under dc_aware. A task
// whose replicas are all unavailable is listed with none. A replica without an address of the
// watcher's kind is listed as "" (the reference's None).
func (w *Watcher) GetAllReplicas(st agentpb.ServerType, dc *DC) map[string][]string {
	name := serverTypeName(st)
	out := map[string][]string{}
	w.mu.Lock()
	for _, t := range w.cache.ordered() {
		if !w.matches(t, name, -1, dc) {
			continue
		}
		key := *t.zkPath.Task()
		if loc := t.zkPath.Location(); w.conf.DCAware && loc != nil {
			key = *loc + "/" + key
		}
		addrs := out[key]
		if addrs == nil {
			addrs = []string{}
		}
		for _, r := range t.ordered() {
			if r.meta.Stat == datadef.StateAvailable {
				addrs = append(addrs, w.address(&r.meta))
			}
		}
		out[key] = addrs
	}
	w.mu.Unlock()
	if len(out) == 0 && (st == agentpb.ServerType_PS || (st == agentpb.ServerType_DENSE && w.conf.DenseAlone)) {
		w.log.Error("empty replicas", "prefix", w.prefix, "server_type", name)
	}
	return out
}

// GetReplicas lists the addresses of the AVAILABLE replicas of task task of server type st in
// dc, oldest first ("" for a replica without an address of the watcher's kind).
func (w *Watcher) GetReplicas(st agentpb.ServerType, task int, dc *DC) []string {
	if task < 0 {
		return []string{}
	}
	name := serverTypeName(st)
	out := []string{}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range w.cache.ordered() {
		if !w.matches(t, name, task, dc) {
			continue
		}
		for _, r := range t.ordered() {
			if r.meta.Stat == datadef.StateAvailable {
				out = append(out, w.address(&r.meta))
			}
		}
	}
	return out
}

// GetReplica lists the addresses of replica replica of task task, AVAILABLE ones only: one per
// location that has it. The reference returns None, the address, or the list, by length.
func (w *Watcher) GetReplica(st agentpb.ServerType, task, replica int, dc *DC) []string {
	if task < 0 {
		return nil
	}
	name := serverTypeName(st)
	var out []string
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range w.cache.ordered() {
		if !w.matches(t, name, task, dc) {
			continue
		}
		for _, r := range t.ordered() {
			id, err := strconv.Atoi(r.key)
			if err == nil && id == replica && r.meta.Stat == datadef.StateAvailable {
				out = append(out, w.address(&r.meta))
			}
		}
	}
	return out
}

// GetReplicasWithExtraInfo maps the address of each AVAILABLE replica of task task of server type
// st in dc to where it runs. As in the reference's dict, a later replica with the same address
// replaces an earlier one.
func (w *Watcher) GetReplicasWithExtraInfo(st agentpb.ServerType, task int, dc *DC) map[string]TargetExtraInfo {
	out := map[string]TargetExtraInfo{}
	if task < 0 {
		return out
	}
	name := serverTypeName(st)
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range w.cache.ordered() {
		if !w.matches(t, name, task, dc) {
			continue
		}
		for _, r := range t.ordered() {
			if r.meta.Stat != datadef.StateAvailable {
				continue
			}
			id, _ := strconv.ParseInt(r.key, 10, 64)
			out[w.address(&r.meta)] = TargetExtraInfo{IDC: clonePtr(t.zkPath.IDC), Cluster: clonePtr(t.zkPath.Cluster), ReplicaID: id}
		}
	}
	return out
}

// Snapshot returns the cache (the reference's replicas attribute), tasks and replicas in listing
// order.
func (w *Watcher) Snapshot() []TaskReplicas {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []TaskReplicas
	for _, t := range w.cache.ordered() {
		tr := TaskReplicas{Path: t.path}
		for _, r := range t.ordered() {
			tr.Replicas = append(tr.Replicas, Replica{Key: r.key, Meta: r.meta})
		}
		out = append(out, tr)
	}
	return out
}

func clonePtr(s *string) *string {
	if s == nil {
		return nil
	}
	v := *s
	return &v
}

// DataVersion changes whenever the replicas the getters see change (agentsvc.Versioned: the
// AgentService reuses the responses it built for an unchanged version).
func (w *Watcher) DataVersion() uint64 {
	// No lock: the AgentService asks on every call, and the watcher's lock is its hot one.
	return atomic.LoadUint64(&w.cache.version)
}
