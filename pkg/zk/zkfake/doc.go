// Package zkfake is an in-memory ZooKeeper implementing zk.Client, the port of the reference's
// mocked_zkclient.py (FakeKazooClient) used by the agent's tests.
//
//	srv := zkfake.NewServer()
//	a, b := srv.Client(), srv.Client() // two agents, two sessions, one tree
//	defer a.Close()
//
// It keeps the reference fake's observable behaviour that tests rely on: watch functions are
// called synchronously, at registration with the current state and then after every change;
// data watches get CREATED / CHANGED / DELETED, the DELETED call carrying the node's last data;
// children watches fire when a child is added or removed; sequence suffixes are 10 zero-padded
// digits starting at 0000000000 under a new parent; missing and existing nodes give
// zk.ErrNoNode and zk.ErrNodeExists. Beyond the reference fake it has sessions (ephemeral nodes
// go with Close and ExpireSession), versions checked by Set and Delete, several clients on one
// tree, listeners, Suspend/Resume, and a real election queue.
//
// # Differences from a real ZooKeeper server (and kazoo)
//
// Watches and listeners:
//   - Watch functions run synchronously, in the goroutine that made the change, after the change
//     is applied and with no lock held, before that call returns. The one exception: if the
//     watch's function is already running (a callback changing what it watches, or another
//     goroutine's change), the call is queued and made by the goroutine running it, once that
//     call and the other calls of its own change are done. A real client calls them later, from
//     its event goroutine, usually after the call that caused them has returned.
//   - Every change is delivered, in order, with a snapshot of the state right after it. Real
//     watches are one-shot and the recipes read the node again, so a real client may skip
//     intermediate states and pass data newer than the event.
//   - On EventDeleted a data watch gets the deleted node's last data (as the reference fake
//     does); a real client gives nil data. The stat is nil in both.
//   - A recursive Delete is one atomic step: deepest nodes first, each deleted node's watches
//     get EventDeleted (the children watches of deleted inner nodes get no EventChild on the
//     way), and the surviving parent's children watches get one EventChild. A real recursive
//     delete is a series of deletes: other clients can see (and create into) the subtree while
//     it runs, and parents get an event per child.
//   - The order of the calls for one create is: the node's data watches (CREATED), its children
//     watches (CREATED, empty list), then the parent's children watches (CHILD).
//   - Listeners are called synchronously by ExpireSession, Suspend and Resume.
//   - While the client is suspended its watches still fire; a real client gets the events (or a
//     fresh read) after reconnecting. Registering a watch while suspended fails with
//     zk.ErrConnectionLoss (kazoo would retry).
//
// Sessions and connections:
//   - There is no network, no heartbeat and no session timeout: a session ends only by Close
//     or ExpireSession, and ExpireSession reconnects at once with a new session id. Listeners
//     get LOST then CONNECTED; kazoo usually reports SUSPENDED first, and a real client only
//     learns of the expiry when it reconnects (its own watches are then re-read; the fake calls
//     them when the ephemeral nodes go).
//   - Calls fail with zk.ErrConnectionLoss only between Suspend and Resume, and with
//     zk.ErrSessionExpired only while the listeners handle LOST in ExpireSession; no call is
//     ever half applied.
//   - Close calls no listener (kazoo reports LOST on stop; the zk.Client contract says none).
//     State reports zk.StateLost after Close.
//   - ctx is only checked when a call starts: every operation is instantaneous.
//
// Data model:
//   - No ACLs (AVersion stays 0, no auth), no quotas, no size limit on data (a real server
//     refuses more than jute.maxbuffer, 1 MiB by default), no chroot, no multi/transactions,
//     no sync, no container or TTL nodes, no watches of the kind "persistent/recursive".
//   - The root holds no "/zookeeper" system node: Children("/") lists only what tests made.
//   - Children are returned sorted; a real server returns them in no particular order.
//   - Zxids come from one counter per Server starting at 1 and only changes (create, set,
//     delete) advance it; session ids start at 0x1000; times are the local clock in ms.
//   - Sequence numbers are the parent's cversion, as on a real server: a new parent starts at
//     0000000000 and every child creation or deletion advances it. (The reference fake kept one
//     counter per path prefix that only sequence creates advanced.)
//   - Deleting "/" fails with zk.ErrInvalidPath (a real server answers BadArguments).
//
// Differences from the reference fake kept on purpose, because a real server behaves so: Delete
// is not recursive unless asked (kazoo's delete is not either; the reference fake's was), a
// node cannot be created under an ephemeral node (zk.ErrNoChildrenForEphemerals), Set and Delete
// check versions, and Election is kazoo's queue (ephemeral sequence nodes named
// "<hex>__lock__<seq>", zk.NewElection) instead of a process-local lock.
package zkfake
