package agentv3

import (
	"context"
	"sort"

	tfprotobuf "github.com/monolith-go/monolith/gen/pb/tensorflow/core/protobuf"
	agentstatus "github.com/monolith-go/monolith/pkg/agent/status"
	"github.com/monolith-go/monolith/pkg/errkind"
)

var _ agentstatus.Source = (*Agent)(nil)

// Status implements agentstatus.Source: the configuration, the ZooKeeper connection, the layout,
// TF Serving's models with their states and the versions that failed to load (read now, within
// ctx), TF Serving's process (its restarts), the bindings and the last reload.
func (a *Agent) Status(ctx context.Context) agentstatus.Report {
	r := agentstatus.NewReport(a.conf, a.opts.ConfPath, a.opts.TFSLog, "NOT_STARTED")
	r.Agent.Container, r.Agent.ModelConfigFile, r.Agent.Addresses = a.container.String(), a.configFile, a.addrs
	a.mu.Lock()
	r.Agent.StartedAt = a.startedAt
	r.Agent.Running = a.started && !a.stopped
	if a.svc != nil {
		r.Agent.AgentService = a.svc.Addr().String()
	}
	client := a.client
	layout := a.layout
	layout.Entries = append([]agentstatus.LayoutEntry(nil), a.layout.Entries...)
	r.Bound = append([]string{}, a.bound...)
	a.mu.Unlock()
	r.Layout = &layout
	if client != nil {
		r.ZooKeeper.State = client.State().String()
		r.ZooKeeper.SessionID = agentstatus.ZKSessionID(client)
	}
	if a.reloader != nil {
		r.LastReload = a.reloader.summary()
	}
	r.TFS = a.tfsSummary()
	if r.Agent.Running {
		proc := a.TFS()
		if msg := a.restartPending(proc); msg != "" {
			r.ModelsError = msg
		} else if versions, err := modelVersions(ctx, proc); err != nil {
			r.ModelsError = err.Error()
		} else {
			r.FailedLoads = failedLoads(versions)
			for name, st := range newestAvailable(versions) {
				m := agentstatus.ModelStatus{Name: name, Version: st.GetVersion(), State: st.GetState().String()}
				if code := st.GetStatus().GetErrorCode(); code != tfprotobuf.Code_OK {
					m.ErrorCode, m.ErrorMessage = code.String(), st.GetStatus().GetErrorMessage()
				}
				r.Models = append(r.Models, m)
			}
			sort.Slice(r.Models, func(i, j int) bool { return r.Models[i].Name < r.Models[j].Name })
		}
	}
	a.eachBinding(func(model, sub string, addrs []string) {
		if r.Bindings[model] == nil {
			r.Bindings[model] = map[string][]string{}
		}
		r.Bindings[model][sub] = addrs
	})
	return r
}

// Healthy implements agentstatus.Source: nil while started, not stopped, and TF Serving runs, or
// exited and is being restarted (Options.TFSRestart: the agent is doing its job; Ready says so).
func (a *Agent) Healthy() error {
	a.mu.Lock()
	started, stopped := a.started, a.stopped
	a.mu.Unlock()
	switch {
	case !started:
		return errkind.New(errkind.Runtime, "agent v3 not started")
	case stopped:
		return errkind.New(errkind.Runtime, "agent v3 stopped")
	}
	if exited, code := a.TFS().Exited(); exited && !a.opts.TFSRestart {
		return errkind.New(errkind.Runtime, "tf serving exited with code %d", code)
	}
	return nil
}
