// Package zkmirror is the port of monolith/agent_service/zk_mirror.py: a local mirror of the
// agent-v2 ZooKeeper trees of one business id (bzid), the event queue the agent's handlers
// consume, and the scheduling helpers built on them.
//
// Trees (all under /{bzid}):
//
//	portal/{model_name}                                  ModelMeta     (watched: PORTAL events)
//	publish/{shard_id}:{replica_id}:{model_name}         PublishMeta   (mirrored when LOAD; PUBLISH events)
//	service/{model_name}/{server_type}:{task}/{replica}  ReplicaMeta   (mirrored; ephemeral)
//	resource/{shard_id}:{replica_id}                     ResourceSpec  (mirrored; ephemeral)
//	election                                             leader election (kazoo's Election recipe)
//
// Get, Children and the queries read only the local mirror (the reference's _data), which the
// watches keep up to date; Create, Set, Delete, Exists and EnsurePath go to ZooKeeper. Watch
// callbacks treat every call as "the node is now in this state", so the mirror converges after a
// session expiry (a real client re-reads every watch) without restarting.
//
// Lifecycle: New, then Start (or the Watch* methods one by one), then Stop, which ends the
// watches, the election and the queue: consumers blocked in Queue.Get return ErrStopped. The
// zk.Client belongs to the caller, who closes it after Stop (the ephemeral nodes the mirror
// created go with its session).
package zkmirror
