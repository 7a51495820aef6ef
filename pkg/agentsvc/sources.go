package agentsvc

import (
	pb "github.com/monolith-go/monolith/gen/pb/monolith/serving/agent_service"
	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/replica"
	"github.com/monolith-go/monolith/pkg/zkmirror"
)

// FromWatcher serves a ReplicaWatcher to the v1 service (agent v1's data source). The result is
// Versioned, so the service caches its answers between changes of the watcher's cache.
func FromWatcher(w *replica.Watcher) ReplicaSource { return watcherSource{w} }

type watcherSource struct{ w *replica.Watcher }

// location is the reference's (idc, cluster) pair; ship_in matches every location when either is
// None.
func location(idc, cluster *string) *replica.DC {
	if idc == nil || cluster == nil {
		return nil
	}
	return &replica.DC{IDC: *idc, Cluster: *cluster}
}

func (s watcherSource) GetReplicas(st pb.ServerType, task int, idc, cluster *string) []string {
	return s.w.GetReplicas(st, task, location(idc, cluster))
}

func (s watcherSource) GetAllReplicas(st pb.ServerType, idc, cluster *string) map[string][]string {
	return s.w.GetAllReplicas(st, location(idc, cluster))
}

func (s watcherSource) DataVersion() uint64 { return s.w.DataVersion() }

// FromMirror serves a ZKMirror to the v2 service. Server types arrive as the path names "ps",
// "entry" and "dense" (the reference passed the enum's number here, so v2 never found a replica);
// an unknown name finds nothing.
func FromMirror(m *zkmirror.Mirror) MirrorSource { return mirrorSource{m} }

type mirrorSource struct{ m *zkmirror.Mirror }

func (s mirrorSource) GetAllReplicas(serverType string) map[string][]datadef.ReplicaMeta {
	st, err := zkmirror.ParseServerType(serverType)
	if err != nil {
		return map[string][]datadef.ReplicaMeta{}
	}
	return s.m.AllReplicas(st)
}

func (s mirrorSource) GetTaskReplicas(model, serverType string, task int) []datadef.ReplicaMeta {
	st, err := zkmirror.ParseServerType(serverType)
	if err != nil {
		return nil
	}
	return s.m.TaskReplicas(model, st, task)
}

func (s mirrorSource) DataVersion() uint64 { return s.m.DataVersion() }

var (
	_ Versioned = watcherSource{}
	_ Versioned = mirrorSource{}
)
