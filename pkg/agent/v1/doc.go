// Package agentv1 is the port of monolith/agent_service/agent_v1.py: the v1 agent, which runs the
// TF Serving processes of one serving host itself and supervises them.
//
// The process graph (ProcessNode, ProcessMgr) follows the deploy type: mixed runs PS, then dense
// (when dense_alone), then the entry; entry, ps and dense deploys run one process. The entry
// starts only once every PS task (and, with dense_alone, the dense task) has an AVAILABLE replica
// in ZooKeeper, within a bounded wait; every process counts as started once its gRPC port
// accepts connections. The supervisor takes the whole graph down as soon as any child exits (the
// reference's rule; optional failover restarts the PS and dense processes that are not the
// host's main process instead), and stopping sends SIGTERM to every child, SIGKILL to those still
// running after a grace period, and reaps them all.
//
// Differences from the reference (each listed in specs/agent_service/agent_v1.yaml): no process
// signal handlers and no SIGKILL of the agent's own process (the command cancels a context and
// the agent returns an error when a child died); children are watched by their Wait instead of a
// 1 s poll; SIGTERM with a grace period instead of up to three SIGKILLs; a child that exits
// before its port opens fails its start at once; every wait ends when its context does; the
// model config files live in a directory the agent removes on Stop.
package agentv1
