package agentv3

import (
	"context"
	"fmt"

	agentstatus "github.com/monolith-go/monolith/pkg/agent/status"
	"github.com/monolith-go/monolith/pkg/zk"
)

var _ agentstatus.Readier = (*Agent)(nil)

// Ready implements agentstatus.Readier (/readyz): the agent can serve when it is live (Healthy),
// its ZooKeeper session is connected, its layout has arrived and was applied, TF Serving accepted
// the model server config made from it (when the agent sends configs), and TF Serving answers a
// model status call now, within ctx. It returns every condition that fails.
func (a *Agent) Ready(ctx context.Context) []string {
	if err := a.Healthy(); err != nil {
		return []string{err.Error()}
	}
	var reasons []string
	a.mu.Lock()
	client, layout := a.client, a.layout
	a.mu.Unlock()

	switch {
	case client == nil:
		reasons = append(reasons, "zookeeper: no session")
	case client.State() != zk.StateConnected:
		reasons = append(reasons, "zookeeper: "+client.State().String())
	}
	switch {
	case layout.UpdatedAt.IsZero():
		reasons = append(reasons, fmt.Sprintf("layout %s: not received from ZooKeeper yet", layout.Path))
	case layout.Error != "":
		reasons = append(reasons, fmt.Sprintf("layout %s: not applied: %s", layout.Path, layout.Error))
	}
	if r := a.reloader.notApplied(); r != "" {
		reasons = append(reasons, r)
	}
	if _, err := a.proc.ListSavedModelsStatus(ctx); err != nil {
		reasons = append(reasons, fmt.Sprintf("tf serving: model status: %v", err))
	}
	return reasons
}

// notApplied says why the newest config submitted is not TF Serving's yet ("" when it is, or
// when there is no reloader: TF Serving then reads the file at its own pace).
func (rl *reloader) notApplied() string {
	if rl == nil {
		return ""
	}
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if rl.gen == rl.applied {
		return ""
	}
	s := "tf serving: the layout's model server config is not accepted yet"
	if rl.attempts > 0 && rl.last != nil && !rl.last.OK { // last is about this config
		s += fmt.Sprintf(" (%d attempts, last: %s)", rl.last.Attempts, rl.last.Error)
	}
	return s
}
