// Command agent is the Monolith serving agent. Until the agent itself lands it loads and validates the
// configuration and prints the effective settings and the TF Serving command lines it would run:
// with --conf the operator's agent.conf, without it a built-in example.
package main

import (
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/alecthomas/kong"

	agentspec "github.com/monolith-go/monolith/gen/spec/agent_service/agent"
	utilsspec "github.com/monolith-go/monolith/gen/spec/agent_service/utils"
	"github.com/monolith-go/monolith/pkg/agentconf"
)

//go:embed example.conf
var exampleConf []byte

// cli is the agent's command line: the flags the specs declare.
type cli struct {
	utilsspec.ConfFlags
	agentspec.AgentFlags
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// usageError marks errors that exit with status 2 (bad flags or configuration).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }

func run(args []string, stdout, stderr io.Writer) int {
	var c cli
	exit := -1
	parser, err := kong.New(&c,
		kong.Name("agent"),
		kong.Description("Monolith serving agent: runs next to TensorFlow Serving, driven by ZooKeeper."),
		kong.Writers(stdout, stderr),
		kong.Exit(func(code int) { exit = code }),
	)
	if err != nil {
		fmt.Fprintln(stderr, "agent: internal error:", err)
		return 1
	}
	if _, err := parser.Parse(args); err != nil {
		fmt.Fprintln(stderr, "agent:", err)
		return 2
	}
	if exit >= 0 { // --help
		return exit
	}
	if err := describe(c, stdout); err != nil {
		fmt.Fprintln(stderr, "agent:", err)
		var ue usageError
		if errors.As(err, &ue) {
			return 2
		}
		return 1
	}
	return 0
}

func describe(c cli, w io.Writer) error {
	path := c.Conf
	source := path
	if path == "" {
		dir, err := os.MkdirTemp("", "monolith-agent")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		path = filepath.Join(dir, "example.conf")
		if err := os.WriteFile(path, exampleConf, 0o644); err != nil {
			return err
		}
		source = "built-in example (pass --conf FILE for your own)"
	}
	cfg, err := agentconf.FromFile(path, agentconf.Options{})
	if err != nil {
		return usageError{err}
	}
	fmt.Fprintf(w, "agent configuration from %s\n", source)
	fmt.Fprintf(w, "tfs log: %s\n\n[config]\n", c.TFSLog)
	for _, s := range cfg.Settings() {
		fmt.Fprintf(w, "%s = %s\n", s.Name, s.Value)
	}
	fmt.Fprintln(w, "\n[properties]")
	for _, s := range cfg.Properties() {
		fmt.Fprintf(w, "%s = %s\n", s.Name, s.Value)
	}
	fmt.Fprintln(w, "\n[TF Serving command lines]")
	for _, st := range cfg.ServerTypes() {
		cmd, port, err := cfg.CmdAndPort("tensorflow_model_server", st, "<model_config_file>")
		if err != nil {
			return err
		}
		name := st
		if name == "" {
			name = string(cfg.Deploy)
		}
		fmt.Fprintf(w, "%s (gRPC port %d):\n  %s\n", name, port, cmd)
	}
	fmt.Fprintln(w, "\nThe agent itself (ZooKeeper registration, TF Serving supervision, AgentService) is not built yet;")
	fmt.Fprintln(w, "this binary validates configurations. Try: agent --help, agent --conf path/to/agent.conf")
	return nil
}
