// Package jobdiscovery is what the training side's commands (cmd/train workers, cmd/ps parameter
// servers) share about finding their place in a job through the service discovery: the discovery
// their RunnerConfig asks for (runner_utils' get_discovery), and the role and address a platform's
// discovery fixes for the process (Primus' TF_CONFIG, MLP's variables). Its errors name the
// command-line flags to fix.
package jobdiscovery

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/monolith-go/monolith/pkg/discovery"
	"github.com/monolith-go/monolith/pkg/runconfig"
	"github.com/monolith-go/monolith/pkg/trainenv"
)

// Options are the discovery rc asks for (none for a local run), checked for what each type needs
// before anything connects. env is the environment the discovery reads.
func Options(rc *runconfig.RunnerConfig, env trainenv.Env, log *slog.Logger) (discovery.Options, error) {
	o := discovery.Options{IsLocal: rc.IsLocal, UUID: rc.Uuid, Env: env, Logger: log}
	which, err := rc.Discovery()
	if err != nil {
		return o, fmt.Errorf("--discovery_type %s: %w (give --tf_config)", rc.DiscoveryType, err)
	}
	if which == "" {
		// Local: no discovery; the type is still the configured one, for the log.
		which = rc.DiscoveryType
	}
	if o.Type, err = discovery.ParseType(which); err != nil {
		return o, err
	}
	if o.IsLocal {
		return o, nil
	}
	o.TFConfig = deref(rc.TfConfig)
	o.JobName = deref(rc.DeepInsightName)
	o.ZKServer = deref(rc.ZKServer)
	if o.Type == discovery.ZK && (o.ZKServer == "" || o.JobName == "") {
		return o, errors.New("--discovery_type zk needs --zk_server and --deep_insight_name (the job's directory /monolith/<deep_insight_name>)")
	}
	return o, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// roleOwner is a discovery whose platform fixes this process's role (Primus, MLP): the reference
// takes server_type and index from it.
type roleOwner interface {
	ServerType() (string, error)
	Index() (int, error)
}

// addrOwner is a discovery whose platform fixes this process's address (Primus, MLP): the
// reference registers that address there.
type addrOwner interface {
	Addr() (string, error)
}

// FixedRole is the role the discovery fixes for this process: task (what TF_CONFIG describes,
// from discovery.WithDiscovery) when given, else the discovery's own when its platform fixes one;
// nil when neither does (the flags say). t names the discovery in errors.
func FixedRole(disc discovery.ServiceDiscovery, task *discovery.Task, t discovery.Type) (*discovery.Task, error) {
	if task != nil {
		return task, nil
	}
	o, ok := disc.(roleOwner)
	if !ok {
		return nil, nil
	}
	typ, err := o.ServerType()
	if err != nil {
		return nil, fmt.Errorf("%v discovery: %w", t, err)
	}
	idx, err := o.Index()
	if err != nil {
		return nil, fmt.Errorf("%v discovery: %w", t, err)
	}
	return &discovery.Task{ServerType: typ, Index: idx}, nil
}

// FixedAddr is the address the discovery fixes for this process; fixed is false when it fixes
// none.
func FixedAddr(disc discovery.ServiceDiscovery) (addr string, fixed bool, err error) {
	o, ok := disc.(addrOwner)
	if !ok {
		return "", false, nil
	}
	if addr, err = o.Addr(); err != nil {
		return "", false, fmt.Errorf("discovery: this process's address: %w", err)
	}
	return addr, true, nil
}
