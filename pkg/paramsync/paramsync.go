// Package paramsync is real-time parameter sync (Monolith's parameter_sync runtime and its
// parameter_sync_job in cpu_training's _join_ps): while training runs, a training parameter server
// pushes the embeddings it updated to every serving replica of its shard, so that the model being
// served follows the one being trained without waiting for the next export.
//
// Every Interval a Pusher takes from its Source (the PS's tables: pkg/ps.Server, whose tables mark
// the entries that applies update, pkg/embedding's touched tracking) the ids updated since the last
// push, each once, with their current embeddings; builds PushRequests of at most MaxIDsPerRequest
// ids and MaxRequestBytes bytes (one table each: the reference's DeltaEmbeddingHashTable); and sends
// each to every target, the addresses of the serving replicas of "<Model>:ps_<Shard>" that Targets
// lists (a fixed list, or the AgentService's HeartBeat: pkg/modelserver/entry's AgentReplicas). A
// request travels as the reference's does (Convert): a TF Serving Predict of the PS sub-graph's
// hashtable_assign signature, which pkg/modelserver/psshard serves.
//
// Targets are pushed to in parallel, each with its own connection, and each request is tried up to
// 1+Retries times on UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED or ABORTED, with doubling
// backoff between tries, each try bounded by Timeout. A target whose request still fails with
// UNAVAILABLE or DEADLINE_EXCEEDED is taken as down: the rest of the cycle's requests skip it, so a
// down target costs one round of tries per cycle and never holds back the others; training never
// waits on a push (taking holds a table stripe's lock for at most 1024 ids). The ids of a request
// that no target took are marked touched again and go in the next cycle. Without any target the
// ids stay pending.
//
// Catch-up (beyond the reference, whose replicas keep what they missed until the next export): a
// target that is new to the pusher, missed a request, or answers from another load of its shard
// than before (psshard names each load in the assign answer's header: it was restarted or
// reloaded its export, losing the pushes since) gets every entry of the tables instead of the
// cycle's updates (a Source that is a Snapshotter: pkg/ps.Server), taken after the cycle's
// updates, so it holds what the trainer has once it took them. A cycle with no update asks each
// target with an empty request, which tells its load.
//
// Differences from the reference: targets come from the AgentService rather than the ZooKeeper
// sync backend; requests are bounded as they are built instead of being split after; tries are
// retried (the reference logs and drops); the reference's multi hash table form is not supported.
package paramsync

import (
	"context"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Source is where the pushed embeddings come from: a training parameter server's tables
// (pkg/ps.Server).
type Source interface {
	// SyncTables are the tables by name, with their dimensions.
	SyncTables() map[string]int
	// TakeTouched hands the entries of table updated since they were last taken to fn, in
	// batches of at most max ids, with their embeddings (rows of the table's dimension); fn must
	// not keep the slices.
	TakeTouched(table string, max int, fn func(ids []int64, embs []float32) error) (int, error)
	// Retouch marks entries touched again, for the next take.
	Retouch(table string, ids []int64)
}

// EventTimes is a Source that knows the newest event time of the updates it holds (pkg/ps.Server:
// the newest its applies carried). A push sends it with its last request to each target (gRPC
// metadata, pkg/eventtime), so that the serving replica knows the newest event its parameters
// include.
type EventTimes interface {
	// NewestEventTime is Unix milliseconds, 0 when unknown.
	NewestEventTime() int64
}

// Targets says where the serving replicas of a PS shard are (pkg/modelserver/entry's Replicas:
// its AgentReplicas asks the AgentService's HeartBeat).
type Targets interface {
	// Addrs returns the gRPC addresses of the replicas serving "<model>:ps_<shard>"; an error
	// when none is known.
	Addrs(ctx context.Context, model string, shard int) ([]string, error)
	// Failed reports that a push to addr failed (the addresses may be stale).
	Failed(addr string)
}

// StaticTargets are fixed addresses, the same for any model and shard (--sync_targets: the
// replicas of this PS's shard).
type StaticTargets []string

// Addrs implements Targets.
func (s StaticTargets) Addrs(_ context.Context, model string, shard int) ([]string, error) {
	if len(s) == 0 {
		return nil, status.Errorf(codes.Unavailable, "no sync target of %s:ps_%d configured", model, shard)
	}
	return slices.Clone(s), nil
}

// Failed implements Targets; fixed addresses do not change.
func (StaticTargets) Failed(string) {}
