// Package runconfig adapts pkg/runconfig and pkg/runner/checkpoint to the parity cases of
// monolith/native_training/runner_utils.py, estimator.py (RunConfig) and save_utils.py
// (get_monolith_checkpoint_state).
package runconfig

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/alecthomas/kong"

	"github.com/monolith-go/monolith/gen/spec/fieldspec"
	runnerutilsspec "github.com/monolith-go/monolith/gen/spec/native_training/runner_utils"
	trainenvadapter "github.com/monolith-go/monolith/parity/adapters/trainenv"
	"github.com/monolith-go/monolith/parity/harness"
	"github.com/monolith-go/monolith/pkg/discovery"
	"github.com/monolith-go/monolith/pkg/pytext"
	"github.com/monolith-go/monolith/pkg/runconfig"
	"github.com/monolith-go/monolith/pkg/runner/checkpoint"
	"github.com/monolith-go/monolith/pkg/trainenv"
	"github.com/monolith-go/monolith/pkg/zk/zktest"
)

// quiet drops the log of the code under test, so the checker prints one line per case.
var quiet = slog.New(slog.DiscardHandler)

// Register adds the ported calls.
func Register(r *harness.Registry) {
	r.Register("RunnerConfig(**values) after FLAGS(argv)", runnerConfig)
	r.Register("Estimator.__init__ env exports (TF_GRPC_WORKER_CACHE_THREADS, MONOLITH_GRPC_WORKER_SERVICE_HANDLER_MULTIPLIER)", envExports)
	r.Register("isabs(path)", func(_ *harness.Ctx, in harness.Input) (any, error) {
		p, err := in.Str("path")
		if err != nil {
			return nil, err
		}
		return runconfig.IsAbs(p), nil
	})
	r.Register("get_checkpoint_state(checkpoint_dir, latest_filename) after FLAGS(argv)", getCheckpointState)
	r.Register("RunnerConfig(restore_dir=..., model_dir=...) restore flow (__post_init__ / _copy_ckpt_file)", restoreFlow)
	r.Register("RunConfig(**values).to_runner_config() after FLAGS(argv)", toRunnerConfig)
	r.Register("RunConfig(**values) user params (DumpUtils.add_user_params)", userParams)
	r.Register("get_monolith_checkpoint_state(checkpoint_dir, remove_invalid_path)", getMonolithState)
	r.Register("monolith_discovery(RunnerConfig(**values)) after FLAGS(argv)", monolithDiscovery)
}

// commandLine is the training command's flags: RunnerConfig's and the dataset flag a field is
// linked to (data/datasets.py defines it).
type commandLine struct {
	runconfig.RunnerFlags
	DatasetUseDataservice bool `name:"dataset_use_dataservice" help:"bool, whether use dataservice"`
}

// flags parses input.argv with kong as the training command would.
func flags(in harness.Input) (map[string]any, error) {
	var argv []string
	if in.Has("argv") {
		if err := in.Decode("argv", &argv); err != nil {
			return nil, err
		}
	}
	var cl commandLine
	parser, err := kong.New(&cl, kong.Name("train"), kong.Writers(io.Discard, io.Discard), kong.Exit(func(int) {}))
	if err != nil {
		return nil, fmt.Errorf("adapter: flags: %w", err)
	}
	if _, err := parser.Parse(argv); err != nil {
		return nil, &harness.InputError{Key: "argv", Msg: err.Error()}
	}
	out := runconfig.FlagValues(&cl.RunnerFlags)
	out["dataset_use_dataservice"] = cl.DatasetUseDataservice
	return out, nil
}

// values decodes input.values (numbers kept as json.Number), "<tmp>" filled in.
func values(c *harness.Ctx, in harness.Input) (map[string]any, error) {
	out := map[string]any{}
	if !in.Has("values") {
		return out, nil
	}
	raw, _ := in.Raw("values")
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil {
		return nil, &harness.InputError{Key: "values", Msg: err.Error()}
	}
	for k, v := range out {
		if s, ok := v.(string); ok {
			out[k] = strings.ReplaceAll(s, "<tmp>", c.TempDir())
		}
	}
	return out, nil
}

func envOf(c *harness.Ctx) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := c.Env[k]
		return v, ok
	}
}

func newRunner(c *harness.Ctx, in harness.Input) (*runconfig.RunnerConfig, error) {
	vals, err := values(c, in)
	if err != nil {
		return nil, err
	}
	fl, err := flags(in)
	if err != nil {
		return nil, err
	}
	return runconfig.New(runconfig.Sources{Values: vals, Flags: fl, Env: envOf(c)})
}

// pyValue is a field's value as the goldens write it: floats as Python floats, the discovery type
// by its enum name.
func pyValue(f *fieldspec.Field, v any) any {
	switch {
	case v == nil:
		return nil
	case f.Type == fieldspec.Float:
		return harness.Float(v.(float64))
	case f.Name == "discovery_type":
		return strings.ToUpper(v.(string))
	}
	return v
}

func runnerDict(c *runconfig.RunnerConfig) map[string]any {
	out := map[string]any{}
	for i := range runnerutilsspec.RunnerConfigFields {
		f := &runnerutilsspec.RunnerConfigFields[i]
		v, _ := c.Get(f.Name)
		out[f.Name] = pyValue(f, v)
	}
	return out
}

func runnerConfig(c *harness.Ctx, in harness.Input) (any, error) {
	conf, err := newRunner(c, in)
	if err != nil {
		return nil, err
	}
	return runnerDict(conf), nil
}

func envExports(c *harness.Ctx, in harness.Input) (any, error) {
	conf, err := newRunner(c, in)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	err = conf.ExportEnv(func(k, v string) error {
		out[k] = v
		return nil
	})
	return out, err
}

// writeTree writes input.files (relative path -> content) under root.
func writeTree(root string, in harness.Input) error {
	files := map[string]string{}
	if in.Has("files") {
		if err := in.Decode("files", &files); err != nil {
			return err
		}
	}
	for rel, content := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(content, "<tmp>", root)), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// tree maps the files under root (relative paths) to their content; nil when root does not exist.
func tree(root string) (map[string]string, error) {
	if _, err := os.Stat(root); err != nil {
		return nil, nil
	}
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	return out, err
}

func getCheckpointState(c *harness.Ctx, in harness.Input) (any, error) {
	if err := writeTree(c.TempDir(), in); err != nil {
		return nil, err
	}
	conf, err := newRunner(c, in)
	if err != nil {
		return nil, err
	}
	latest := ""
	if in.Has("latest_filename") {
		if latest, err = in.Str("latest_filename"); err != nil {
			return nil, err
		}
	}
	// input.dir is the checkpoint directory relative to the case's directory; the recorder joined
	// it and stripped trailing slashes.
	dir := c.TempDir()
	if in.Has("dir") {
		rel, err := in.Str("dir")
		if err != nil {
			return nil, err
		}
		dir = strings.TrimRight(filepath.Join(dir, filepath.FromSlash(rel)), "/")
	}
	st, err := conf.GetCheckpointState(dir, latest, quiet)
	if err != nil {
		return nil, err
	}
	files, err := tree(c.TempDir())
	if err != nil {
		return nil, err
	}
	var text any
	if st != nil {
		text = checkpoint.FormatState(st)
	}
	return map[string]any{"state": text, "files": files}, nil
}

func restoreFlow(c *harness.Ctx, in harness.Input) (any, error) {
	if err := writeTree(c.TempDir(), in); err != nil {
		return nil, err
	}
	conf, err := newRunner(c, in)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := conf.PrepareRestore(ctx, runconfig.RestoreOptions{Timeout: 2 * time.Second, Poll: 10 * time.Millisecond, Log: quiet}); err != nil {
		return nil, err
	}
	files, err := tree(filepath.Join(c.TempDir(), "model"))
	if err != nil {
		return nil, err
	}
	return map[string]any{"model_dir": files}, nil
}

func newRunConfig(c *harness.Ctx, in harness.Input) (*runconfig.RunConfig, error) {
	vals, err := values(c, in)
	if err != nil {
		return nil, err
	}
	return runconfig.NewRunConfig(vals)
}

func toRunnerConfig(c *harness.Ctx, in harness.Input) (any, error) {
	rc, err := newRunConfig(c, in)
	if err != nil {
		return nil, err
	}
	fl, err := flags(in)
	if err != nil {
		return nil, err
	}
	conf, err := rc.ToRunnerConfig(fl, envOf(c))
	if err != nil {
		return nil, err
	}
	return runnerDict(conf), nil
}

func userParams(c *harness.Ctx, in harness.Input) (any, error) {
	rc, err := newRunConfig(c, in)
	if err != nil {
		return nil, err
	}
	if p := rc.UserParams(); p != nil {
		return p, nil
	}
	return []string{}, nil
}

func getMonolithState(c *harness.Ctx, in harness.Input) (any, error) {
	if err := writeTree(c.TempDir(), in); err != nil {
		return nil, err
	}
	remove, err := in.Bool("remove_invalid_path")
	if err != nil {
		return nil, err
	}
	st, err := checkpoint.ReadMonolithState(c.TempDir(), remove, quiet)
	if err != nil || st == nil {
		return nil, err
	}
	return pytext.Format(st), nil
}

// zkPlaceholder is a zk_server the recorder's own ZooKeeper stood for; the adapter starts one.
const zkPlaceholder = "<zk>"

// pyDiscoveryClass names each Go discovery by the reference class get_discovery constructs.
func pyDiscoveryClass(d discovery.ServiceDiscovery) (string, error) {
	switch d.(type) {
	case *discovery.TFConfig:
		return "TfConfigServiceDiscovery", nil
	case *discovery.ConsulDiscovery:
		return "ConsulServiceDiscovery", nil
	case *discovery.MLPDiscovery:
		return "MLPServiceDiscovery", nil
	case *discovery.ZKDiscovery:
		return "ZKServiceDiscovery", nil
	}
	return "", fmt.Errorf("adapter: no reference class for %T", d)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// monolithDiscovery opens the discovery the RunnerConfig asks for, as the training command does
// (RunnerConfig.Discovery, then discovery.WithDiscovery), and reports which one it is and the
// server type and index the config has inside it (Primus's task overrides them, as get_discovery
// wrote them into the config).
func monolithDiscovery(c *harness.Ctx, in harness.Input) (any, error) {
	conf, err := newRunner(c, in)
	if err != nil {
		return nil, err
	}
	zkServer := deref(conf.ZKServer)
	if zkServer == zkPlaceholder {
		srv, err := zktest.Launch()
		if err != nil {
			return nil, fmt.Errorf("real ZooKeeper: %w", err)
		}
		defer srv.Close()
		zkServer = srv.Addr()
	}
	which, err := conf.Discovery()
	if err != nil {
		return nil, err
	}
	out := map[string]any{"discovery": nil, "server_type": conf.ServerType, "index": conf.Index}
	if which == "" {
		return out, nil
	}
	typ, err := discovery.ParseType(which)
	if err != nil {
		return nil, err
	}
	o := discovery.Options{Type: typ, UUID: conf.Uuid, TFConfig: deref(conf.TfConfig), JobName: deref(conf.DeepInsightName),
		ZKServer: zkServer, Env: trainenv.Env(c.Env), Resolver: trainenvadapter.NoResolve, Logger: quiet}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = discovery.WithDiscovery(ctx, o, func(_ context.Context, d discovery.ServiceDiscovery, task *discovery.Task) error {
		name, err := pyDiscoveryClass(d)
		if err != nil {
			return err
		}
		out["discovery"] = name
		if task != nil {
			out["server_type"], out["index"] = task.ServerType, task.Index
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
