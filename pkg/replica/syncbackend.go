package replica

import (
	"strings"
	"sync"

	agentpb "github.com/monolith-go/monolith/gen/pb/monolith/serving/agent_service"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pyint"
)

// SyncBackend gives parameter sync its targets from a Watcher (the reference's SyncBackendWrapper,
// a SyncBackend): the PS replicas of a sub graph with where they run.
type SyncBackend struct {
	w     *Watcher
	mu    sync.Mutex
	model string
}

// SyncBackend wraps w (the reference's to_sync_wrapper).
func (w *Watcher) SyncBackend() *SyncBackend { return &SyncBackend{w: w} }

// SubscribeModel records the model to sync (the targets do not depend on it).
func (s *SyncBackend) SubscribeModel(name string) {
	s.mu.Lock()
	s.model = name
	s.mu.Unlock()
}

// Model is the subscribed model, "" before SubscribeModel.
func (s *SyncBackend) Model() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.model
}

// GetSyncTargets returns subGraph and the targets of PS task i for a sub graph "ps_{i}[_...]":
// each AVAILABLE replica's address with its location and replica id, in every location. Another
// sub graph is an error of kind Precondition (the reference asserts), an index that is not an
// integer one of kind Value.
func (s *SyncBackend) GetSyncTargets(subGraph string) (string, map[string]TargetExtraInfo, error) {
	parts := strings.Split(subGraph, "_")
	if len(parts) < 2 {
		return "", nil, errkind.New(errkind.Value, "sub graph %q: want ps_{index}", subGraph)
	}
	if parts[0] != "ps" {
		return "", nil, errkind.New(errkind.Precondition, "sub graph %q is not a PS sub graph", subGraph)
	}
	i, err := pyint.Atoi(parts[1])
	if err != nil {
		return "", nil, errkind.New(errkind.Value, "sub graph %q: %q is not a task index", subGraph, parts[1])
	}
	return subGraph, s.w.GetReplicasWithExtraInfo(agentpb.ServerType_PS, i, nil), nil
}

// Start starts the watcher (the reference's start: watch_data).
func (s *SyncBackend) Start() error { return s.w.Start() }

// Stop stops the watcher.
func (s *SyncBackend) Stop() { s.w.Stop() }
