// Package zk is the ZooKeeper client interface the agent is written against, shaped by the
// reference's kazoo call sites (create/get/set/delete/exists/get_children/ensure_path, the
// DataWatch/ChildrenWatch/Election recipes, connection-state listeners and retry).
//
// Implementations: zk/zkfake (in memory, for tests) and zk/zkreal (github.com/go-zookeeper/zk).
// Both return the sentinel errors of this package (test them with errors.Is), wrapped in a
// *PathError that names the operation and the path, and classified with errkind.
//
// Paths are absolute ZooKeeper paths: they start with "/", have no empty segments, no "." or ".."
// segments and no trailing "/" except the root itself (ValidatePath).
package zk
