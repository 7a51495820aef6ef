// Package zkreal implements zk.Client on github.com/go-zookeeper/zk and closes the gaps that
// library leaves (its issues #90, #83, #153):
//
//   - Session events are drained continuously (an event callback feeding an unbounded queue) so none
//     is dropped; the library's own event channel, which drops events when full, is not used.
//   - Session expiry becomes an explicit LOST, then CONNECTED once the library has opened a new
//     session (it does so silently); every DataWatch and ChildrenWatch is re-armed on the new
//     session and delivers the current state once (event type NONE), so callers converge without
//     restarting, like kazoo with allow_session_lost.
//   - An idle watch costs no goroutine: the library's watch events reach the client's event
//     callback, which hands the fired watches to a few workers (Options.WatchWorkers, started only
//     while there is work) that re-arm them and call their functions. Calls of one watch never
//     overlap and come in order; changes made while a watch is re-armed or called may be coalesced.
//   - Ephemeral ownership (RegisterEphemeral): registered nodes are re-created on every new session,
//     in the order of their first registration, before the session is announced.
//     A node that exists but belongs to another session is deleted and re-created, never just
//     overwritten (an overwritten node would still vanish when its old session expires).
//   - Idempotent reads (Get, Exists, Children) are retried with backoff on connection loss; writes
//     are not: a write that failed with a lost connection reports the ambiguity (ErrConnectionLoss,
//     "outcome unknown") instead of guessing.
//   - An optional chroot prefixes every path; digest auth is re-sent on every new connection.
//   - Connect waits at most Options.ConnectTimeout (15 s, kazoo's start timeout) for the first
//     session, then fails with ErrConnectTimeout naming the servers, the time waited and the
//     failed attempts. Failed connection attempts (refused dials, connections that give no
//     session), initial or after a lost connection, are logged at WARN, at most one line per
//     Options.ConnectWarnInterval, each line counting the attempts since the previous one.
//   - Every goroutine stops on Close.
//
// The library's calls do not take a context: a call whose context ends returns at once with the
// context's error, and the library call finishes in the background (bounded by its request
// timeout).
package zkreal
