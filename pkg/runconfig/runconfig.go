// Package runconfig is the configuration a training run starts from: runner_utils.RunnerConfig
// (with the cpu_training config fields it inherits) and estimator.RunConfig, generated from
// specs/native_training/{runner_utils,cpu_training,estimator}.yaml, plus what the reference does
// around them:
//
//   - the merge rule: a RunnerConfig is built from its defaults, the values the user's code or config
//     file set, and the command-line flags; a flag that differs from its default wins over a field
//     the user left at its default, never over one the user set (gflags_utils.update); Explicit lists
//     the fields the user set;
//   - __post_init__ without hidden side effects: the environment exports are returned (EnvExports)
//     or applied through a setter (ExportEnv), the restore flow is an explicit step (PrepareRestore:
//     the chief copies restore_dir's checkpoint state into model_dir, the others wait for it with a
//     timeout);
//   - RunConfig.ToRunnerConfig with its own merge rule, the CPU defaults and the discovery mapping;
//   - get_checkpoint_state with the reference's retries and restore_ckpt override (GetCheckpointState)
//     and isabs (IsAbs), both implemented by pkg/runner/checkpoint, the one package reading state files.
package runconfig

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	tftraining "github.com/monolith-go/monolith/gen/pb/tensorflow/python/training"
	"github.com/monolith-go/monolith/gen/spec/fieldspec"
	runnerutilsspec "github.com/monolith-go/monolith/gen/spec/native_training/runner_utils"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pathutil"
	"github.com/monolith-go/monolith/pkg/pyfmt"
	"github.com/monolith-go/monolith/pkg/pyint"
	"github.com/monolith-go/monolith/pkg/runner/checkpoint"
)

// Discovery types (ServiceDiscoveryType, by the lower-case name its flag takes).
const (
	DiscoveryPrimus = "primus"
	DiscoveryConsul = "consul"
	DiscoveryZK     = "zk"
	DiscoveryMLP    = "mlp"
)

// Address families of zk_watch_address_family (net_utils.AddressFamily).
const (
	IPv4 = "ipv4"
	IPv6 = "ipv6"
)

// linkedFlags are the fields whose default another module's flag overrides
// (gflags_utils.LinkDataclassToFlags on CpuTrainingConfig): field -> flag, and the flag's default.
var linkedFlags = []struct {
	field, flag string
	flagDefault any
}{
	{field: "use_dataservice", flag: "dataset_use_dataservice", flagDefault: false},
}

// RunnerConfig is runner_utils.RunnerConfig: the generated fields, and which of them the user set.
type RunnerConfig struct {
	runnerutilsspec.RunnerConfig
	explicit map[string]bool
}

// Sources are what a RunnerConfig is built from, besides its defaults.
type Sources struct {
	// Values are the fields the user's code or config file set (RunnerConfig(**kwargs)), by field
	// name: Go values of the field's type, or JSON-decoded values (see Coerce); nil is None.
	Values map[string]any
	// Flags are command-line flag values by flag name (FlagValues of a parsed RunnerFlags); a flag
	// not in the map was not given. Another module's flag that a field is linked to
	// (dataset_use_dataservice) may be included.
	Flags map[string]any
	// Env reads environment variables (OMPI_COMM_WORLD_RANK); nil reads none.
	Env func(string) (string, bool)
}

// New builds a RunnerConfig as RunnerConfig(**values) does in a process whose flags are src.Flags:
// the defaults, then src.Values, then each flag that differs from its default for a field still at
// its default, then __post_init__'s derivations (the worker index of partial-sync GPU training from
// OMPI_COMM_WORLD_RANK, kafka_topics split at commas) and checks. An unknown field is an error of
// kind Type, a value of the wrong type one of kind Type, an address family other than ipv4/ipv6 one
// of kind Precondition (the reference asserts), another invalid value one of kind Value.
func New(src Sources) (*RunnerConfig, error) {
	c := &RunnerConfig{RunnerConfig: runnerutilsspec.DefaultRunnerConfig(), explicit: map[string]bool{}}
	if err := setValues(&c.RunnerConfig, runnerutilsspec.RunnerConfigFields, "RunnerConfig", src.Values); err != nil {
		return nil, err
	}
	for k := range src.Values {
		c.explicit[k] = true
	}
	if err := c.mergeFlags(src.Flags); err != nil {
		return nil, err
	}
	if err := c.postInit(src.Env); err != nil {
		return nil, err
	}
	if err := c.linkFlags(src.Flags); err != nil {
		return nil, err
	}
	return c, nil
}

// setValues assigns values (sorted by field order) to a generated config through its Set.
func setValues(c interface{ Set(string, any) error }, fields []fieldspec.Field, typeName string, values map[string]any) error {
	known := map[string]*fieldspec.Field{}
	for i := range fields {
		known[fields[i].Name] = &fields[i]
	}
	for name := range values {
		if known[name] == nil {
			return errkind.New(errkind.Type, "%s.__init__() got an unexpected keyword argument '%s'", typeName, name)
		}
	}
	for i := range fields {
		f := &fields[i]
		v, ok := values[f.Name]
		if !ok {
			continue
		}
		x, err := Coerce(f, v)
		if err != nil {
			return err
		}
		if err := c.Set(f.Name, x); err != nil {
			return errkind.Wrap(errkind.Type, err)
		}
	}
	return nil
}

// fieldByName finds a field of RunnerConfig.
func fieldByName(name string) *fieldspec.Field {
	for i := range runnerutilsspec.RunnerConfigFields {
		if runnerutilsspec.RunnerConfigFields[i].Name == name {
			return &runnerutilsspec.RunnerConfigFields[i]
		}
	}
	return nil
}

// mergeFlags is gflags_utils.update: a flag whose value differs from the default overrides a field
// still at its default.
func (c *RunnerConfig) mergeFlags(flags map[string]any) error {
	defaults := runnerutilsspec.DefaultRunnerConfig()
	for _, name := range FlagNames() {
		v, given := flags[name]
		if !given {
			continue
		}
		f := fieldByName(name)
		fromCmd, err := Coerce(f, v)
		if err != nil {
			return fmt.Errorf("flag --%s: %w", name, err)
		}
		def, _ := defaults.Get(name)
		cur, _ := c.Get(name)
		if equal(cur, def) && !equal(fromCmd, def) {
			if err := c.Set(name, fromCmd); err != nil {
				return errkind.Wrap(errkind.Type, err)
			}
			c.explicit[name] = true
		}
	}
	return nil
}

// linkFlags is gflags_utils.update_by_flags for the linked fields, applied after __post_init__ as
// the reference's wrapped __init__ does.
func (c *RunnerConfig) linkFlags(flags map[string]any) error {
	defaults := runnerutilsspec.DefaultRunnerConfig()
	for _, l := range linkedFlags {
		v, given := flags[l.flag]
		if !given || equal(v, l.flagDefault) {
			continue
		}
		def, _ := defaults.Get(l.field)
		if cur, _ := c.Get(l.field); !equal(cur, def) {
			continue
		}
		x, err := Coerce(fieldByName(l.field), v)
		if err != nil {
			return fmt.Errorf("flag --%s: %w", l.flag, err)
		}
		if err := c.Set(l.field, x); err != nil {
			return errkind.Wrap(errkind.Type, err)
		}
		c.explicit[l.field] = true
	}
	return nil
}

// postInit is what RunnerConfig.__post_init__ derives and checks without side effects on the
// process (the restore flow is PrepareRestore; the flags it writes back are not global here).
func (c *RunnerConfig) postInit(env func(string) (string, bool)) error {
	if c.EnableGPUTraining && c.EnablePartialSyncTraining && c.Index <= 0 && c.ServerType == "worker" {
		rank := ""
		if env != nil {
			rank, _ = env("OMPI_COMM_WORLD_RANK")
		}
		if rank == "" {
			rank = "0"
		}
		// int() as the reference reads it ("+1_0" is 10); the message is int()'s own, as the spec
		// claims exact messages for RunnerConfig.
		n, err := pyint.Atoi(rank)
		if err != nil {
			return errkind.Wrap(errkind.Value, err)
		}
		c.Index = n
	}
	if c.ZKWatchAddressFamily != IPv4 && c.ZKWatchAddressFamily != IPv6 {
		return errkind.New(errkind.Precondition, "zk_watch_address_family %q: want %s or %s", c.ZKWatchAddressFamily, IPv4, IPv6)
	}
	if err := c.Validate(); err != nil {
		return errkind.Wrap(errkind.Value, err)
	}
	return nil
}

// Explicit lists the fields the user set, in field order: those given as values, and those a
// command-line flag (or a linked flag, or RunConfig.ToRunnerConfig) overrode.
func (c *RunnerConfig) Explicit() []string {
	var out []string
	for _, f := range runnerutilsspec.RunnerConfigFields {
		if c.explicit[f.Name] {
			out = append(out, f.Name)
		}
	}
	return out
}

// EnvVar is an environment variable to export.
type EnvVar struct {
	Name, Value string
}

// EnvExports are the variables the reference exports for TensorFlow's gRPC runtime when the
// estimator starts (Estimator.__init__): the worker cache threads and the service handler
// multiplier, formatted as Python's str does.
func (c *RunnerConfig) EnvExports() []EnvVar {
	return []EnvVar{
		{Name: "TF_GRPC_WORKER_CACHE_THREADS", Value: strconv.Itoa(c.TfGRPCWorkerCacheThreads)},
		{Name: "MONOLITH_GRPC_WORKER_SERVICE_HANDLER_MULTIPLIER", Value: pyfmt.Float(c.MonolithGRPCWorkerServiceHandlerMultiplier)},
	}
}

// ExportEnv applies EnvExports through setenv (os.Setenv for the process, or a child's environment).
func (c *RunnerConfig) ExportEnv(setenv func(name, value string) error) error {
	for _, v := range c.EnvExports() {
		if err := setenv(v.Name, v.Value); err != nil {
			return fmt.Errorf("runconfig: export %s: %w", v.Name, err)
		}
	}
	return nil
}

// IsChief is the restore flow's chief: a local run, or worker 0.
func (c *RunnerConfig) IsChief() bool {
	return c.IsLocal || (c.ServerType == "worker" && c.Index == 0)
}

// Discovery is the service discovery get_discovery picks: "" for a local run (none), else primus,
// consul, mlp or zk (any other type). Primus needs tf_config (an error of kind Precondition).
func (c *RunnerConfig) Discovery() (string, error) {
	switch {
	case c.IsLocal:
		return "", nil
	case c.DiscoveryType == DiscoveryPrimus:
		if c.TfConfig == nil {
			return "", errkind.New(errkind.Precondition, "primus discovery needs tf_config")
		}
		return DiscoveryPrimus, nil
	case c.DiscoveryType == DiscoveryConsul, c.DiscoveryType == DiscoveryMLP:
		return c.DiscoveryType, nil
	default:
		return DiscoveryZK, nil
	}
}

// RestoreOptions tune PrepareRestore.
type RestoreOptions struct {
	// Timeout bounds a non-chief's wait for the chief; 0 means chief_timeout_secs.
	Timeout time.Duration
	// Poll is how often a non-chief looks; 0 means 30 s, as the reference.
	Poll time.Duration
	// Log receives progress; nil means slog.Default().
	Log *slog.Logger
}

// DefaultRestorePoll is how often a worker looks for the chief's restore (the reference's 30 s).
const DefaultRestorePoll = 30 * time.Second

// PrepareRestore is __post_init__'s restore flow, run when restore_dir is set: the chief copies
// restore_dir's checkpoint state into model_dir (checkpoint.CopyRestoreState, atomic writes, a
// model_dir with its own state is left alone); the others wait until model_dir's monolith_checkpoint
// exists, for at most o.Timeout, then fail with an error naming the file and restore_dir (the
// reference waits forever).
func (c *RunnerConfig) PrepareRestore(ctx context.Context, o RestoreOptions) error {
	if c.RestoreDir == nil || *c.RestoreDir == "" {
		return nil
	}
	if c.IsChief() {
		return checkpoint.CopyRestoreState(*c.RestoreDir, c.ModelDir, c.RestoreCkpt, o.Log)
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = time.Duration(c.ChiefTimeoutSecs) * time.Second
	}
	poll := o.Poll
	if poll <= 0 {
		poll = DefaultRestorePoll
	}
	what := fmt.Sprintf("waiting for the chief to set up restore_dir %s in model_dir %s", *c.RestoreDir, c.ModelDir)
	return checkpoint.WaitForFile(ctx, pathutil.Join(c.ModelDir, checkpoint.MonolithStateFile), what, timeout, poll, o.Log)
}

// GetCheckpointState is runner_utils' get_checkpoint_state(dir, latest_filename) with this config's
// restore_ckpt and mode as the flags (checkpoint.GetState).
func (c *RunnerConfig) GetCheckpointState(dir, latestFilename string, log *slog.Logger) (*tftraining.CheckpointState, error) {
	return checkpoint.GetState(dir, checkpoint.GetStateOptions{LatestFilename: latestFilename, RestoreCkpt: c.RestoreCkpt, Mode: c.Mode, Log: log})
}

// IsAbs is runner_utils.isabs: hdfs:/ paths are absolute too.
func IsAbs(path string) bool { return checkpoint.IsAbs(path) }

// Coerce converts v to the Go value of field f: bool, int, float64, string, []string or
// map[string]string, or nil (None) for an optional field. It accepts those types and what
// encoding/json decodes (float64 or json.Number, []any, map[string]any). A string given for a
// string_list is split at commas (RunnerConfig.__post_init__ splits kafka_topics). A value of another
// type is an error of kind Type naming the field.
func Coerce(f *fieldspec.Field, v any) (any, error) {
	bad := func() error {
		return errkind.New(errkind.Type, "%s: want %s, got %T %v", f.Name, f.Type, v, v)
	}
	if v == nil {
		if !f.Optional {
			return nil, errkind.New(errkind.Type, "%s: None is not allowed (the field is not optional)", f.Name)
		}
		return nil, nil
	}
	if n, ok := v.(json.Number); ok {
		if f.Type == fieldspec.Int {
			i, err := strconv.Atoi(n.String())
			if err != nil {
				return nil, bad()
			}
			return i, nil
		}
		fl, err := n.Float64()
		if err != nil {
			return nil, bad()
		}
		v = fl
	}
	switch f.Type {
	case fieldspec.Bool:
		if b, ok := v.(bool); ok {
			return b, nil
		}
	case fieldspec.Int:
		switch x := v.(type) {
		case int:
			return x, nil
		case int64:
			return int(x), nil
		case float64:
			if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
				return int(x), nil
			}
		}
	case fieldspec.Float:
		switch x := v.(type) {
		case float64:
			return x, nil
		case int:
			return float64(x), nil
		}
	case fieldspec.String:
		if s, ok := v.(string); ok {
			return s, nil
		}
	case fieldspec.StringList:
		switch x := v.(type) {
		case string:
			if x == "" {
				return []string{}, nil
			}
			return strings.Split(x, ","), nil
		case []string:
			return x, nil
		case []any:
			out := make([]string, len(x))
			for i, e := range x {
				s, ok := e.(string)
				if !ok {
					return nil, bad()
				}
				out[i] = s
			}
			return out, nil
		}
	case fieldspec.StringMap:
		switch x := v.(type) {
		case map[string]string:
			return x, nil
		case map[string]any:
			out := make(map[string]string, len(x))
			for k, e := range x {
				s, ok := e.(string)
				if !ok {
					return nil, bad()
				}
				out[k] = s
			}
			return out, nil
		}
	}
	return nil, bad()
}

// equal is Python's == on field values (None only equals None).
func equal(a, b any) bool { return reflect.DeepEqual(a, b) }
