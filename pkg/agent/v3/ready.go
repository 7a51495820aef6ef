package agentv3

import (
	"context"
	"fmt"

	agentstatus "github.com/monolith-go/monolith/pkg/agent/status"
	"github.com/monolith-go/monolith/pkg/zk"
)

var _ agentstatus.Readier = (*Agent)(nil)

// Ready implements agentstatus.Readier (/readyz): the agent can serve when it is live (Healthy),
// its ZooKeeper session is connected, its layout has arrived and was applied, TF Serving runs (not
// restarting), accepted the model server config made from it (when the agent sends configs) and
// answers a model status call now, within ctx, and every saved model of the layout that the
// filters passed has an AVAILABLE version (one whose versions are loading, failed to load, or that
// is not in TF Serving's config at all, is a reason naming its versions' states and errors). It
// returns every condition that fails.
func (a *Agent) Ready(ctx context.Context) []string {
	if err := a.Healthy(); err != nil {
		return []string{err.Error()}
	}
	var reasons []string
	a.mu.Lock()
	client, layout := a.client, a.layout
	entries := append([]agentstatus.LayoutEntry(nil), a.layout.Entries...)
	a.mu.Unlock()
	proc := a.TFS()

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
	if r := a.restartPending(proc); r != "" {
		return append(reasons, r)
	}
	if r := a.reloader.notApplied(); r != "" {
		reasons = append(reasons, r)
	}
	versions, err := modelVersions(ctx, proc)
	if err != nil {
		return append(reasons, fmt.Sprintf("tf serving: model status: %v", err))
	}
	if layout.Error == "" {
		reasons = append(reasons, unavailable(entries, versions)...)
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
