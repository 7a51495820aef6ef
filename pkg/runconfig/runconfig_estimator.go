package runconfig

import (
	estimatorspec "github.com/monolith-go/monolith/gen/spec/native_training/estimator"
	runnerutilsspec "github.com/monolith-go/monolith/gen/spec/native_training/runner_utils"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// RunConfig is estimator.RunConfig, the user's entry point to the estimator's configuration.
type RunConfig struct {
	estimatorspec.RunConfig
}

// NewRunConfig is RunConfig(**values) (values as for Sources.Values).
func NewRunConfig(values map[string]any) (*RunConfig, error) {
	c := &RunConfig{RunConfig: estimatorspec.DefaultRunConfig()}
	if err := setValues(&c.RunConfig, estimatorspec.RunConfigFields, "RunConfig", values); err != nil {
		return nil, err
	}
	return c, nil
}

// UserParams lists the fields whose value differs from the default, in declaration order: the user
// params RunConfig.__post_init__ records.
func (c *RunConfig) UserParams() []string {
	def := estimatorspec.DefaultRunConfig()
	var out []string
	for _, f := range estimatorspec.RunConfigFields {
		v, _ := c.Get(f.Name)
		d, _ := def.Get(f.Name)
		if !equal(v, d) {
			out = append(out, f.Name)
		}
	}
	return out
}

// toRunnerKwargs are the fields to_runner_config passes to RunnerConfig's constructor.
var toRunnerKwargs = []string{"restore_dir", "restore_ckpt", "model_dir", "enable_fused_layout", "enable_model_dump",
	"warmup_file", "enable_alias_map_auto_gen", "kafka_topics", "kafka_group_id", "kafka_servers",
	"save_summary_steps", "log_step_count_steps", "disable_native_metrics"}

// ToRunnerConfig is RunConfig.to_runner_config in a process with the given flags and environment:
// a RunnerConfig built from some of c's fields (New, so command-line flags still override its
// defaults), then each of c's fields that RunnerConfig has, is not None and differs from
// RunConfig's default overrides the RunnerConfig's value; then consul discovery becomes zk, CPU
// training gets embedding prefetch (capacity at least 1) and post-push, and enable_parameter_sync
// turns on realtime training. The restore flow is the caller's PrepareRestore.
//
// One difference, on purpose: kafka_topics stays the list RunnerConfig made of it (the reference
// overwrites that list with RunConfig's comma-separated string again).
func (c *RunConfig) ToRunnerConfig(flags map[string]any, env func(string) (string, bool)) (*RunnerConfig, error) {
	runnerDefaults := runnerutilsspec.DefaultRunnerConfig()
	values := map[string]any{}
	for _, name := range toRunnerKwargs {
		v, _ := c.Get(name)
		f := fieldByName(name)
		x, err := Coerce(f, v)
		if err != nil {
			return nil, err
		}
		// Passing a RunnerConfig default is the same as not passing it; leaving it out keeps
		// Explicit to what the user changed.
		if d, _ := runnerDefaults.Get(name); !equal(x, d) {
			values[name] = x
		}
	}
	conf, err := New(Sources{Values: values, Flags: flags, Env: env})
	if err != nil {
		return nil, err
	}
	def := estimatorspec.DefaultRunConfig()
	for _, f := range estimatorspec.RunConfigFields {
		rf := fieldByName(f.Name)
		v, _ := c.Get(f.Name)
		if rf == nil || v == nil {
			continue
		}
		d, _ := def.Get(f.Name)
		x, err := Coerce(rf, v)
		if err != nil {
			return nil, err
		}
		if cur, _ := conf.Get(f.Name); !equal(v, d) && !equal(cur, x) {
			if err := conf.Set(f.Name, x); err != nil {
				return nil, errkind.Wrap(errkind.Type, err)
			}
			conf.explicit[f.Name] = true
		}
	}
	if conf.DiscoveryType == DiscoveryConsul {
		conf.DiscoveryType = DiscoveryZK
	}
	if !conf.EnableGPUTraining {
		if conf.EmbeddingPrefetchCapacity <= 0 {
			conf.EmbeddingPrefetchCapacity = 1
		}
		if !conf.EnableEmbeddingPostpush {
			conf.EnableEmbeddingPostpush = true
		}
	}
	if c.EnableParameterSync {
		conf.EnableRealtimeTraining = true
	}
	return conf, nil
}
