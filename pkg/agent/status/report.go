// Package agentstatus is the agent's HTTP status endpoint and its Prometheus metrics:
//
//	/          an HTML page for on-call humans: the Report and the readiness, refreshing itself
//	/healthz   200 "ok" while the agent serves, 503 and the reason otherwise (a liveness probe)
//	/readyz    200 when the agent can serve (ZooKeeper connected, layout applied, TF Serving
//	           answering, and for agent v3 every saved model the layout's filters pass with an
//	           AVAILABLE version), 503 otherwise; a JSON Readiness either way (a readiness probe)
//	/status    the agent's state as JSON (Report): its config and build, ZooKeeper connection,
//	           layout, the models in TF Serving with their states and failed loads, TF Serving's
//	           restarts, the bindings, recent errors
//	/metrics   Prometheus text format: AgentService RPC counts and latency, TF Serving reloads,
//	           failed loads and restarts, layout updates, binding syncs, ZooKeeper state changes
//	           and watch events, build info
//	/debug/pprof/, /debug/vars   Go's profiles and expvar, as every Go server serves them
//
// The reference has no such endpoint; it is an addition of the port.
package agentstatus

import (
	"context"
	"time"

	"github.com/monolith-go/monolith/internal/buildinfo"
	"github.com/monolith-go/monolith/pkg/agentconf"
)

// Report is the agent's state as /status serves it. Agents fill what applies to them; empty parts
// are left out of the JSON.
type Report struct {
	Agent     AgentSummary `json:"agent"`
	ZooKeeper ZKSummary    `json:"zookeeper"`
	// Layout is agent v3's layout: the saved models it lists and which of them are loaded.
	Layout *LayoutSummary `json:"layout,omitempty"`
	// Models are the models of TF Serving's config with the state TF Serving reports.
	Models []ModelStatus `json:"models"`
	// ModelsError says why Models could not be read ("" when they were).
	ModelsError string `json:"models_error,omitempty"`
	// FailedLoads are the versions TF Serving reports failed to load (END with an error), by
	// model, newest first; the model may serve an older version meanwhile (ServingVersion).
	FailedLoads []FailedLoad `json:"failed_loads,omitempty"`
	// TFS is TF Serving's process as the agent runs it: its exits and restarts.
	TFS *TFSSummary `json:"tfs,omitempty"`
	// Bound are the saved models ("model:sub_graph") this container advertises as served.
	Bound []string `json:"bound"`
	// Bindings: model -> sub graph -> the addresses of the containers bound to it (the
	// AgentService's address table).
	Bindings map[string]map[string][]string `json:"bindings"`
	// LastReload is the last model server config sent to TF Serving.
	LastReload *ReloadSummary `json:"last_reload,omitempty"`
	// Readiness is what /readyz answers (the handler fills it).
	Readiness *Readiness `json:"readiness,omitempty"`
	// RecentErrors are the newest WARN and ERROR records of the agent's log, oldest first (the
	// handler fills them from its ErrorRing, when it has one).
	RecentErrors []LogRecord `json:"recent_errors,omitempty"`
	// RecentErrorsTotal is how many such records were logged since start (RecentErrors keeps
	// only the newest).
	RecentErrorsTotal uint64 `json:"recent_errors_total,omitempty"`
}

// NewReport is the part of an agent's Report that c and the agent's paths give: c's identity in
// Agent (num_shard 1 and replica_id -1 when unset), its zk_servers with state zkState, and no
// models, bound saved models or bindings yet; BuildVersion is this binary's build.
func NewReport(c *agentconf.AgentConfig, confPath, tfsLog, zkState string) Report {
	shard, _ := c.ShardID()
	return Report{
		Agent: AgentSummary{Version: c.AgentVersion, BuildVersion: buildinfo.Version(), DeployType: string(c.Deploy), Bzid: deref(c.Bzid),
			BaseName: deref(c.BaseName), ShardID: shard, NumShard: derefInt(c.NumShard, 1),
			ReplicaID: derefInt(c.ReplicaID, -1), ConfPath: confPath, TFSLog: tfsLog},
		ZooKeeper: ZKSummary{Servers: deref(c.ZKServers), State: zkState},
		Models:    []ModelStatus{},
		Bound:     []string{},
		Bindings:  map[string]map[string][]string{},
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func derefInt(p *int, def int) int {
	if p == nil {
		return def
	}
	return *p
}

// AgentSummary is the agent's configuration and identity.
type AgentSummary struct {
	// Version is agent_version (1 or 3).
	Version int `json:"version"`
	// BuildVersion is the binary's build: module version, VCS revision and time, Go version
	// (internal/buildinfo).
	BuildVersion string `json:"build_version,omitempty"`
	DeployType   string `json:"deploy_type"`
	Bzid         string `json:"bzid"`
	BaseName     string `json:"base_name,omitempty"`
	// Container is "cluster:id", the name of this container's bindings and service info.
	Container string `json:"container,omitempty"`
	ShardID   int    `json:"shard_id"`
	NumShard  int    `json:"num_shard"`
	ReplicaID int    `json:"replica_id"`
	ConfPath  string `json:"conf_path,omitempty"`
	TFSLog    string `json:"tfs_log,omitempty"`
	// ModelConfigFile is TF Serving's --model_config_file.
	ModelConfigFile string `json:"model_config_file,omitempty"`
	// Addresses this container advertises (its service info): grpc, http, archon, agent.
	Addresses map[string]string `json:"addresses,omitempty"`
	// AgentService is the address the AgentService listens on.
	AgentService string    `json:"agent_service,omitempty"`
	StartedAt    time.Time `json:"started_at"`
	Running      bool      `json:"running"`
}

// ZKSummary is the ZooKeeper connection.
type ZKSummary struct {
	Servers string `json:"servers"`
	// State is CONNECTED, SUSPENDED or LOST.
	State string `json:"state"`
	// SessionID is the current session's id as ZooKeeper's tools print it ("0x..."; "" when the
	// client does not tell, see ZKSessionID).
	SessionID string `json:"session_id,omitempty"`
}

// LayoutSummary is agent v3's layout as last delivered by ZooKeeper.
type LayoutSummary struct {
	Path    string        `json:"path"`
	Filters []string      `json:"filters"`
	Entries []LayoutEntry `json:"entries"`
	// UpdatedAt is when the layout callback last ran (zero before the first).
	UpdatedAt time.Time `json:"updated_at"`
	// Error is why the last layout could not be applied ("" when it was; the previous model
	// server config then stays).
	Error string `json:"error,omitempty"`
}

// LayoutEntry is one saved model of the layout.
type LayoutEntry struct {
	SavedModel    string  `json:"saved_model"`
	BasePath      *string `json:"model_base_path"`
	VersionPolicy *string `json:"version_policy"`
	// Loaded says whether the filters accept it on this host.
	Loaded bool `json:"loaded"`
	// Filter is the filter that accepted it ("" when there are no filters or none did).
	Filter string `json:"filter,omitempty"`
	// Error is why this entry was skipped although the filters accept it (a bad deploy config:
	// missing or unknown version_policy, ...); "" when it was not skipped.
	Error string `json:"error,omitempty"`
}

// ModelStatus is one model's newest AVAILABLE version (else its newest) as TF Serving reports it.
type ModelStatus struct {
	Name         string `json:"name"`
	Version      int64  `json:"version"`
	State        string `json:"state"`
	ErrorCode    string `json:"error_code,omitempty"`
	ErrorMessage string `json:"error_message,omitempty"`
}

// FailedLoad is a model version TF Serving failed to load.
type FailedLoad struct {
	Model        string `json:"model"`
	Version      int64  `json:"version"`
	ErrorCode    string `json:"error_code"`
	ErrorMessage string `json:"error_message"`
	// ServingVersion is the version the model serves instead (its newest AVAILABLE one), 0 when
	// it serves none.
	ServingVersion int64 `json:"serving_version,omitempty"`
}

// TFSSummary is TF Serving's process: whether the agent restarts it when it exits, how often it
// did, and the last exit.
type TFSSummary struct {
	// Restart says whether the agent restarts TF Serving when it exits (else it stops).
	Restart bool `json:"restart"`
	// Running is false between an exit and the restart.
	Running bool `json:"running"`
	// Restarts counts the processes started after one exited; RestartFailures the attempts that
	// failed to start one.
	Restarts        int `json:"restarts"`
	RestartFailures int `json:"restart_failures,omitempty"`
	// LastExit says how the last process that exited ended ("" when none did), at LastExitAt.
	LastExit   string    `json:"last_exit,omitempty"`
	LastExitAt time.Time `json:"last_exit_at,omitzero"`
	// NextRestartAt is when the next restart is due while one is pending.
	NextRestartAt time.Time `json:"next_restart_at,omitzero"`
}

// ReloadSummary is the outcome of the last reload sent to TF Serving.
type ReloadSummary struct {
	At     time.Time `json:"at"`
	Models int       `json:"models"`
	OK     bool      `json:"ok"`
	Error  string    `json:"error,omitempty"`
	// Attempts is how many times this config was sent (retries after failures included).
	Attempts int `json:"attempts"`
}

// Source is an agent seen by the status endpoint.
type Source interface {
	// Status returns the agent's state; ctx bounds the calls it makes (TF Serving's model status).
	Status(ctx context.Context) Report
	// Healthy returns nil while the agent serves, else why not.
	Healthy() error
}

// Readier is the optional interface of a Source that tells whether it can serve (/readyz).
// A Source without it is taken as ready while Healthy, so agents adopt it one at a time.
type Readier interface {
	// Ready returns why the agent cannot serve now (not started, ZooKeeper not connected, layout
	// not applied, TF Serving not answering, ...), none when it can; ctx bounds the calls it makes.
	Ready(ctx context.Context) []string
}

// Readiness is /readyz's answer.
type Readiness struct {
	Ready bool `json:"ready"`
	// Reasons say why not (empty when ready).
	Reasons []string `json:"reasons"`
}

// CheckReady asks src whether it can serve: through Ready when it is a Readier, else through
// Healthy.
func CheckReady(ctx context.Context, src Source) Readiness {
	var reasons []string
	switch s := src.(type) {
	case nil:
		reasons = []string{errNoAgent.Error()}
	case Readier:
		reasons = s.Ready(ctx)
	default:
		if err := src.Healthy(); err != nil {
			reasons = []string{err.Error()}
		}
	}
	if reasons == nil {
		reasons = []string{}
	}
	return Readiness{Ready: len(reasons) == 0, Reasons: reasons}
}
