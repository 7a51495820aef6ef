// Package replica is the port of monolith/agent_service/replica_manager.py: how serving replicas
// find each other through ZooKeeper.
//
// Layout, as in the reference: every replica registers an ephemeral node holding its ReplicaMeta
// (JSON) at {path_prefix}/{server_type}:{task}/{replica}, where path_prefix is
// /{bzid}/service/{base_name}, plus /{idc}:{cluster} under dc_aware. The entry registers under
// entry:0/{replica_id:011d}, as a sequence node when its replica id is -1.
//
//   - Updater (ReplicaUpdater) registers this host's nodes and keeps their stat equal to what its
//     TF Serving reports (newest AVAILABLE version, else the highest; UNKNOWN when the status RPC
//     fails).
//   - Watcher (ReplicaWatcher) keeps a cache of every replica under /{bzid}/service/{base_name}
//     through a chain of children watches ending in one data watch per replica node, plus a
//     periodic reconciliation, and answers GetReplicas / GetAllReplicas / GetReplica with the
//     AVAILABLE replicas' addresses.
//   - Manager (ReplicaManager) runs both and follows the connection: on LOST it pauses the status
//     updates and the reconciliation; on CONNECTED after LOST a goroutine registers the replicas
//     again, then resumes both.
//
// Differences from the reference (each listed in specs/agent_service/replica_manager.yaml): the
// initial load and the reconciliation read in parallel; Stop returns at once; the connection
// listener never blocks; re-registration happens once per new session instead of every 10 s
// forever; the reconciliation never overwrites fresher watch news and re-creates own missing nodes
// with their real data; replicas are listed in ZooKeeper creation order; a node's NONE delivery
// (its state read again on a new session) is taken as current; a re-registration keeps the stat
// last written (not UNKNOWN), and the watcher keeps this process's own replicas in its answers
// while they are registered again on a new session.
package replica
