// Package backend is the port of monolith/agent_service/backends.py: the saved models, layouts,
// bindings and service infos of a bzid in ZooKeeper, seen by a serving agent (AgentBackend), an
// operator's controller (CtrlBackend) and a parameter-sync client (SyncBackend). ZKBackend
// implements all three on any zk.Client (zkfake in tests, zkreal in production).
//
// The JSON stored in ZooKeeper is byte-identical to the reference's dataclasses-json output
// (SavedModelDeployConfig.Serialize, ContainerServiceInfo.Serialize), and node names are the same
// ("model:sub_graph" layout children, "sub_graph:cluster:id" bindings, "cluster:id" service
// infos), so Go and Python agents and controllers can share a bzid.
//
// Differences from the reference, all on purpose (specs/agent_service/backends.yaml lists them):
// every call takes a context and returns its error instead of logging and carrying on; bindings and
// service infos are restored as soon as a new session is up after an expiry; bindings that failed
// are retried by the next SyncAvailableSavedModels; malformed children and unreadable JSON are
// logged and skipped instead of raising inside a watch; ephemeral nodes held by a stale session of
// this process are taken over (on zkreal) instead of overwritten in place, where they would vanish
// with that session; a binding whose container has no service info yet is evaluated again as soon
// as the service info appears (the reference waited for the next change of the bindings, so a
// peer that wrote its binding first stayed out of the service map).
package backend
