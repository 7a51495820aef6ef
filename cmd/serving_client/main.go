// Command serving_client is the reference's client.py: it loads a model into a bzid's portal
// (/{bzid}/portal/{model} holding the ModelMeta), unloads it, or prints its load state as the
// reference prints its LoadSate dataclass:
//
//	LoadSate(portal=True, publish=True, service={'ps:0:0': 30, 'entry:0:0': 30})
//
// --cmd_type load and unload change the portal; every other value prints the status. Exit status:
// 0 on success, 1 on any failure (as the reference, under absl, exits on an exception or a flag
// error).
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	clientspec "github.com/monolith-go/monolith/gen/spec/agent_service/client"
	"github.com/monolith-go/monolith/internal/cli"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkreal"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr, dialZK))
}

// dialFunc opens a ZooKeeper session on servers (the --zk_servers text); the caller closes it.
type dialFunc func(ctx context.Context, servers string, log *slog.Logger) (zk.Client, error)

// dialZK connects to a real ensemble.
func dialZK(ctx context.Context, servers string, log *slog.Logger) (zk.Client, error) {
	// The library's connection chatter is not the command's output.
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	if log.Enabled(ctx, slog.LevelDebug) {
		quiet = log
	}
	return zkreal.ConnectHosts(ctx, servers, zkreal.Options{Logger: quiet})
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer, dial dialFunc) int {
	var c struct {
		cli.Common
		clientspec.ServingClientFlags
	}
	if code, done := cli.Parse("serving_client", "Load or unload a model through ZooKeeper (/{bzid}/portal), or print its load state.", &c, args, stdout, stderr, 2); done {
		return code
	}
	log := c.Logger(stderr, nil)
	// Packages that log through slog's default logger log in the same format.
	slog.SetDefault(log)
	// A bad command line exits 2, as in every command of the project (absl's reference exits 1).
	return cli.Exit("serving_client", connectAndExecute(ctx, c.ServingClientFlags, stdout, log, dial), stderr)
}

// check validates the flags as the reference's main does, before anything is contacted.
func check(f clientspec.ServingClientFlags) error {
	switch {
	case f.ZKServers == "":
		return errkind.New(errkind.Value, "zk_servers is None (set --zk_servers)")
	case f.Bzid == "":
		return errkind.New(errkind.Value, "bzid is None (set --bzid)")
	case f.ModelName == "":
		return errkind.New(errkind.Precondition, "--model_name is required")
	case f.CmdType == "load" && f.ModelDir == "":
		return errkind.New(errkind.Precondition, "--model_dir is required for load")
	case f.Timeout <= 0:
		return errkind.New(errkind.Value, "--timeout %v is not positive", f.Timeout)
	}
	return nil
}

func connectAndExecute(ctx context.Context, f clientspec.ServingClientFlags, stdout io.Writer, log *slog.Logger, dial dialFunc) error {
	if err := check(f); err != nil {
		return cli.Usage(err)
	}
	ctx, cancel := context.WithTimeout(ctx, f.Timeout)
	defer cancel()
	c, err := dial(ctx, f.ZKServers, log)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", f.ZKServers, err)
	}
	defer c.Close()
	return execute(ctx, f, c, stdout, log)
}

// execute runs the command, its flags checked, on an open session: the reference's main after
// connecting.
func execute(ctx context.Context, f clientspec.ServingClientFlags, c zk.Client, stdout io.Writer, log *slog.Logger) error {
	client, err := newServingClient(c, f.Bzid, log)
	if err != nil {
		return err
	}
	defer client.Close()
	switch f.CmdType {
	case "load":
		var ckpt *string
		if f.Ckpt != "" {
			ckpt = &f.Ckpt
		}
		return client.load(ctx, f.ModelName, f.ModelDir, ckpt, f.NumShard)
	case "unload":
		return client.unload(ctx, f.ModelName)
	}
	st, err := client.status(ctx, f.ModelName)
	if err != nil {
		return fmt.Errorf("status of %s: %w", f.ModelName, err)
	}
	if _, err := fmt.Fprintln(stdout, st); err != nil {
		return fmt.Errorf("write the status: %w", err)
	}
	return nil
}
