// Command agentctl is the reference's agent_controller.py, the operator's tool for a bzid's saved
// models and layouts in ZooKeeper:
//
//	--cmd=decl --export_base=DIR               declare every sub-graph of an export as a saved model
//	--cmd=pub --model_name=M:PATTERN --layout=L   add the sub-graphs matching PATTERN to /{bzid}/layouts/L
//	--cmd=unpub --model_name=M:PATTERN --layout=L remove them
//	--cmd=bzid_info                            print the bzid's saved models, containers and layouts (JSON)
//
// Like the reference it prints an empty line first. The options are checked before connecting;
// --timeout bounds connecting and every ZooKeeper call. Exit status: 0 on success, 2 for bad flags
// or input, 1 when ZooKeeper or the command failed.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	ctlspec "github.com/monolith-go/monolith/gen/spec/agent_service/agent_controller"
	"github.com/monolith-go/monolith/internal/cli"
	"github.com/monolith-go/monolith/pkg/agentctl"
	"github.com/monolith-go/monolith/pkg/backend"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkreal"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr, dialZK))
}

// dialFunc opens a ZooKeeper session on servers (kazoo's hosts string); the caller closes it.
// Tests pass one that returns an in-memory fake.
type dialFunc func(ctx context.Context, servers string, log *slog.Logger) (zk.Client, error)

// dialZK connects to a real ensemble.
func dialZK(ctx context.Context, servers string, log *slog.Logger) (zk.Client, error) {
	return zkreal.ConnectHosts(ctx, servers, zkreal.Options{Logger: log})
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer, dial dialFunc) int {
	var c struct {
		cli.Common
		ctlspec.AgentCtlFlags
	}
	if code, done := cli.Parse("agentctl", "Declare exported saved models in ZooKeeper, publish them into layouts, or print a bzid's overview.", &c, args, stdout, stderr, 2); done {
		return code
	}
	log := c.Logger(stderr, nil)
	// Packages that log through slog's default logger log in the same format.
	slog.SetDefault(log)
	// Errors of the packages used may already name the command: cli.Exit does not repeat it.
	return cli.Exit("agentctl", execute(ctx, c.AgentCtlFlags, stdout, log, dial), stderr)
}

// options turns the flags into agentctl.Options.
func options(f ctlspec.AgentCtlFlags) agentctl.Options {
	return agentctl.Options{
		Cmd: f.Cmd, Bzid: f.Bzid, ExportBase: f.ExportBase, Overwrite: f.Overwrite != 0,
		ModelName: f.ModelName, Layout: f.Layout, Arch: f.Arch,
	}
}

// check validates what the command needs before anything is contacted: the reference asserted
// these only after connecting.
func check(f ctlspec.AgentCtlFlags) error {
	if f.Timeout <= 0 {
		return fmt.Errorf("--timeout %v is not positive", f.Timeout)
	}
	if strings.TrimSpace(f.ZKServers) == "" {
		return errors.New("--zk_servers is empty")
	}
	if f.Bzid == "" || strings.Contains(f.Bzid, "/") {
		return fmt.Errorf("--bzid %q: want a non-empty name without '/'", f.Bzid)
	}
	switch f.Cmd {
	case "decl":
		if f.ExportBase == "" {
			return errors.New("decl needs --export_base")
		}
		if f.Arch != agentctl.ArchEntryPS {
			return fmt.Errorf("--arch %q: only entry + ps architecture (%s) supported", f.Arch, agentctl.ArchEntryPS)
		}
		// decl takes the model name from the export (the reference's main passes none).
		name, found, err := agentctl.FindModelName(f.ExportBase)
		if err != nil {
			return err
		}
		if !found || name == "" {
			return fmt.Errorf("Model name is None: no %s node in %s", agentctl.RemotePredictOp, f.ExportBase)
		}
	case agentctl.ActionPub, agentctl.ActionUnpub:
		if f.Layout == "" || f.ModelName == "" {
			return fmt.Errorf("%s needs --layout and --model_name", f.Cmd)
		}
		if model, _, ok := strings.Cut(f.ModelName, ":"); !ok || model == "" {
			return fmt.Errorf("--model_name %q: want model_name:sub_graph_pattern", f.ModelName)
		}
	}
	return nil
}

func execute(ctx context.Context, f ctlspec.AgentCtlFlags, stdout io.Writer, log *slog.Logger, dial dialFunc) error {
	if err := check(f); err != nil {
		return cli.Usage(err)
	}
	// main's print(): an empty line before anything else.
	if _, err := io.WriteString(stdout, "\n"); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, f.Timeout)
	defer cancel()
	client, err := dial(ctx, f.ZKServers, log)
	if err != nil {
		return fmt.Errorf("connect to ZooKeeper %s: %w", f.ZKServers, err)
	}
	defer client.Close()
	bd, err := backend.New(client, backend.Config{Bzid: f.Bzid, CallTimeout: f.Timeout, Logger: log})
	if err != nil {
		return err
	}
	defer bd.Close()
	return agentctl.Run(ctx, bd, options(f), stdout)
}
