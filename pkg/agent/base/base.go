// Package agentbase holds what the agents share (monolith/agent_service/agent_base.py): the command
// lines of the serving binaries (TF Serving and the proxy), the per-process serving log, how a
// serving process is started, and the Agent interface that agent v1 and v3 implement.
package agentbase

import (
	"context"
	"fmt"
	"os"

	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pathutil"
)

// Paths of the serving binaries on a serving host.
const (
	// BinDir holds the binaries; serving processes run in it, since their command lines name
	// files relative to it (--log_conf=../conf/log4j.properties).
	BinDir = agentconf.TFSHome + "/bin"
	// TFSBinary is TF Serving (the reference's TFS_BINARY).
	TFSBinary = BinDir + "/tensorflow_model_server"
	// ProxyBinary is the serving proxy (PROXY_BINARY).
	ProxyBinary = BinDir + "/server"
	// ProxyConfName is the proxy's optional config file, looked up in the agent conf's directory.
	ProxyConfName = "proxy.conf"
)

// CmdOptions are get_cmd_and_port's optional arguments.
type CmdOptions struct {
	// ServerType is ps, entry or dense for TF Serving; anything else (usually "") is the proxy.
	ServerType string
	// ConfPath is the agent conf's directory, where the proxy's proxy.conf may be. The proxy
	// needs it.
	ConfPath string
	// ConfigFile is TF Serving's model config file; "" writes one first (agentconf.CmdAndPort).
	ConfigFile string
	// TFSBinary and ProxyBinary default to the constants of the same names.
	TFSBinary, ProxyBinary string
}

// CmdAndPort returns the command line of the serving binary for o.ServerType and the port it
// serves on (the reference's get_cmd_and_port). TF Serving's comes from agentconf.CmdAndPort; the
// proxy's is "{proxy} --port={proxy_port} --grpc_target=localhost:{tfs_entry_port}
// [--conf_file={conf_path}/proxy.conf] &", the conf file passed when it exists. The string is the
// reference's, trailing "&" included; StartProcess knows what to do with it.
func CmdAndPort(c *agentconf.AgentConfig, o CmdOptions) (string, int, error) {
	if o.TFSBinary == "" {
		o.TFSBinary = TFSBinary
	}
	if o.ProxyBinary == "" {
		o.ProxyBinary = ProxyBinary
	}
	switch o.ServerType {
	case agentconf.ServerPS, agentconf.ServerEntry, agentconf.ServerDense:
		cmd, port, err := c.CmdAndPort(o.TFSBinary, o.ServerType, o.ConfigFile)
		if err != nil {
			return "", 0, fmt.Errorf("%s command: %w", o.ServerType, err)
		}
		return cmd, port, nil
	}
	if o.ConfPath == "" {
		// The reference fails on os.path.join(None, ...).
		return "", 0, errkind.New(errkind.Type, "proxy command: conf_path is not set")
	}
	if c.ProxyPort == nil {
		return "", 0, errkind.New(errkind.Runtime, "proxy command: no proxy port assigned")
	}
	if c.TFSEntryPort == nil {
		return "", 0, errkind.New(errkind.Runtime, "proxy command: no entry port assigned under deploy type %s", c.Deploy)
	}
	cmd := fmt.Sprintf("%s --port=%d --grpc_target=localhost:%d", o.ProxyBinary, *c.ProxyPort, *c.TFSEntryPort)
	proxyConf := pathutil.Join(o.ConfPath, ProxyConfName)
	if _, err := os.Stat(proxyConf); err == nil {
		cmd += " --conf_file=" + proxyConf
	}
	return cmd + " &", *c.ProxyPort, nil
}

// Agent is what the agent command runs (the reference's AgentBase): agent v1, which supervises the
// serving processes, and agent v3, the unified agent.
type Agent interface {
	// Start starts the agent's processes and background work and returns once they run.
	Start(ctx context.Context) error
	// WaitForTermination blocks until ctx ends (the process was told to stop) or the agent can no
	// longer serve (a serving process died), stops everything it started and says why it returned.
	WaitForTermination(ctx context.Context) error
}

// Run starts a and waits for its termination, as the reference's run_agent ends.
func Run(ctx context.Context, a Agent) error {
	if err := a.Start(ctx); err != nil {
		return fmt.Errorf("start agent: %w", err)
	}
	return a.WaitForTermination(ctx)
}
