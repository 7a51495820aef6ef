package agentv1

import (
	"context"
	"fmt"
	"time"

	agentstatus "github.com/monolith-go/monolith/pkg/agent/status"
	"github.com/monolith-go/monolith/pkg/zk"
)

var _ agentstatus.Readier = (*Agent)(nil)

// readyLockWait is how long Ready waits for the agent's lock, which Start holds until every
// process serves and Stop while it tears down; the getters hold it for an instant only.
const readyLockWait = 50 * time.Millisecond

// Ready implements agentstatus.Readier (/readyz): the agent can serve once Start has returned
// (every serving process was started and answers on its port), while its ZooKeeper session is
// connected, no serving process has exited and the agent service runs.
func (a *Agent) Ready(ctx context.Context) []string {
	deadline := time.Now().Add(readyLockWait)
	for !a.mu.TryLock() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return []string{"agent v1: starting or stopping"}
		}
		time.Sleep(time.Millisecond)
	}
	started, stopped, client, server := a.started, a.stopped, a.zk, a.server
	a.mu.Unlock()
	switch {
	case !started:
		return []string{"agent v1 not started"}
	case stopped:
		return []string{"agent v1 stopped"}
	}
	var reasons []string
	switch {
	case client == nil:
		reasons = append(reasons, "zookeeper: no session")
	case client.State() != zk.StateConnected:
		reasons = append(reasons, "zookeeper: "+client.State().String())
	}
	select {
	case <-a.pm.Done():
		reasons = append(reasons, fmt.Sprintf("serving processes down: %v", a.pm.Err()))
	default:
	}
	if server == nil {
		reasons = append(reasons, "agent service not started")
	} else {
		select {
		case <-a.serverDone:
			reasons = append(reasons, fmt.Sprintf("agent service stopped: %v", a.serverErr))
		default:
		}
	}
	return reasons
}
