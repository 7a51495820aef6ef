// Package agentsvc ports monolith/agent_service/agent_service.py and svr_client.py: the AgentService
// gRPC server that tells entry servers where the PS / dense replicas are (GetReplicas, HeartBeat)
// and what the local process has (GetResource), and a client for it.
//
// The server answers from one of the reference's three data sources, each behind a small interface
// so this package depends on neither ZooKeeper watcher:
//   - v1, ReplicaSource: replica.ReplicaWatcher (get_replicas / get_all_replicas);
//   - v2, MirrorSource: zkmirror.ZKMirror (get_task_replicas / get_all_replicas);
//   - v3, AddrsFunc: AgentDataProvider's callback (saved model name -> addresses).
package agentsvc

import (
	"strings"

	pb "github.com/monolith-go/monolith/gen/pb/monolith/serving/agent_service"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/datadef"
)

// ReplicaSource is what the v1 service reads from a ReplicaWatcher. idc and cluster are the
// watcher's own location (nil when unknown: every location qualifies).
type ReplicaSource interface {
	// GetReplicas is ReplicaWatcher.get_replicas(server_type, task, idc, cluster): the addresses of
	// the AVAILABLE replicas of task server_type:task (of location idc:cluster when dc_aware).
	GetReplicas(st pb.ServerType, task int, idc, cluster *string) []string
	// GetAllReplicas is ReplicaWatcher.get_all_replicas(server_type, idc, cluster): for each task of
	// server_type, the addresses of its AVAILABLE replicas, keyed "ps:0", or "idc:cluster/ps:0"
	// when dc_aware.
	GetAllReplicas(st pb.ServerType, idc, cluster *string) map[string][]string
}

// MirrorSource is what the v2 service reads from a ZKMirror. serverType is the lower-case name used
// in ZooKeeper paths: "ps", "entry" or "dense" (ServerTypeName).
type MirrorSource interface {
	// GetAllReplicas is ZKMirror.get_all_replicas(server_type): the AVAILABLE replicas of every
	// model's tasks of serverType, keyed "{model}:{server_type}:{task}".
	GetAllReplicas(serverType string) map[string][]datadef.ReplicaMeta
	// GetTaskReplicas is ZKMirror.get_task_replicas(model_name, server_type, task): the AVAILABLE
	// replicas of one task.
	GetTaskReplicas(modelName, serverType string, task int) []datadef.ReplicaMeta
}

// AddrsFunc is AgentDataProvider's addrs_fn (v3): saved model name -> replica addresses. A nil or
// empty map answers an empty table.
type AddrsFunc func() map[string][]string

// Versioned is implemented by data sources that can tell when their data changed. DataVersion must
// return a different value once a change is visible to the source's getters (change it after the
// update, not before); the service then reuses the responses it built for the same version instead
// of building them again on every call.
type Versioned interface {
	DataVersion() uint64
}

// WatcherConfig is what the v1 service reads from the watcher's AgentConfig (`_watcher._conf`).
type WatcherConfig struct {
	// IDC and Cluster are the watcher's location (AgentConfig.idc / cluster); nil when unknown.
	IDC, Cluster *string
	// DCAware trims "idc:cluster/" from HeartBeat keys.
	DCAware bool
}

// WatcherConfigFrom reads a WatcherConfig from the watcher's agent config.
func WatcherConfigFrom(conf *agentconf.AgentConfig) WatcherConfig {
	return WatcherConfig{IDC: conf.IDC(), Cluster: conf.Cluster(), DCAware: conf.DCAware}
}

// ServerTypeName is the lower-case name of st used in ZooKeeper paths ("ps", "entry", "dense"), as
// ServerType.Name(st).lower() gives; "" for a value the enum does not define.
func ServerTypeName(st pb.ServerType) string {
	name, ok := pb.ServerType_name[int32(st)]
	if !ok {
		return ""
	}
	return strings.ToLower(name)
}
