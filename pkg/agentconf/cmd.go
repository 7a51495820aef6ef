package agentconf

import (
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"

	"github.com/monolith-go/monolith/gen/spec/agent_service/utils"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pyfmt"
	"github.com/monolith-go/monolith/pkg/pyint"
)

func (c *AgentConfig) getenv(key string) string {
	v, _ := c.env(key)
	return v
}

// CmdAndPort builds the TF Serving command line for serverType ("" = the deploy type's own) and
// returns it with the gRPC port it serves on. Flags, their order and values are the reference's.
// An empty configFile makes it write the model server config for serverType to a temporary file
// first, as the reference does.
func (c *AgentConfig) CmdAndPort(binary, serverType, configFile string) (string, int, error) {
	st, err := c.Deploy.CompatServerType(serverType)
	if err != nil {
		return "", 0, err
	}
	if configFile == "" {
		if configFile, err = c.writeModelServerConfig(st); err != nil {
			return "", 0, err
		}
	}
	flags := []string{"--model_config_file=" + configFile}
	psm := c.getenv("TCE_PSM")
	cluster := c.getenv("TCE_CLUSTER")
	prefix := psm
	logConf := "../conf/log4j.properties"
	if c.Deploy == DeployMixed && st != ServerEntry {
		psm = psm + "_" + strings.ToLower(st)
		prefix = psm
		logConf = "../conf/log4j_" + strings.ToLower(st) + ".properties"
	}
	flags = append(flags, "--archon_rpc_psm="+psm, "--archon_rpc_cluster="+cluster,
		"--metrics_namespace_prefix="+prefix, "--log_conf="+logConf)

	entryToPS := func() {
		flags = append(flags,
			"--archon_entry_to_ps_rpc_timeout="+strconv.Itoa(c.FetchPSTimeoutMs),
			"--archon_entry_to_ps_long_conn_num="+strconv.Itoa(c.FetchPSLongConnNum),
			"--archon_entry_to_ps_rpc_retry="+strconv.Itoa(c.FetchPSRetry),
			"--archon_async_dispatcher_threads="+strconv.Itoa(c.AioThreadNum))
		if !c.FetchPSLongConnEnable {
			flags = append(flags, "--archon_entry_to_ps_long_conn_enable=false")
		}
	}
	var port *int
	switch st {
	case ServerPS:
		flags = append(flags, "--port="+pyfmt.OptInt(c.TFSPSPort), "--rest_api_port="+pyfmt.OptInt(c.TFSPSHTTPPort), "--archon_port="+pyfmt.OptInt(c.TFSPSArchonPort))
		port = c.TFSPSPort
	case ServerDense:
		flags = append(flags, "--port="+pyfmt.OptInt(c.TFSDensePort), "--rest_api_port="+pyfmt.OptInt(c.TFSDenseHTTPPort), "--archon_port="+pyfmt.OptInt(c.TFSDenseArchonPort))
		if c.EnableBatching {
			flags = append(flags, "--enable_batching=true")
		}
		entryToPS()
		port = c.TFSDensePort
	default:
		flags = append(flags, "--port="+pyfmt.OptInt(c.TFSEntryPort), "--rest_api_port="+pyfmt.OptInt(c.TFSEntryHTTPPort), "--archon_port="+pyfmt.OptInt(c.TFSEntryArchonPort))
		entryToPS()
		port = c.TFSEntryPort
	}
	if c.AgentVersion != 1 {
		flags = append(flags, "--model_config_file_poll_wait_seconds=0")
	}
	for _, o := range TFSOptions(&c.TfServingConfig) {
		if o.Name == "file_system_poll_wait_seconds" {
			// Agent v1 gives PS its own poll interval; later versions leave polling to the agent.
			if c.AgentVersion == 1 {
				if st == ServerPS {
					flags = append(flags, "--file_system_poll_wait_seconds="+strconv.Itoa(c.FileSystemPollWaitSecondsPS))
				} else if !o.Default {
					flags = append(flags, o.Flag())
				}
			}
			continue
		}
		if !o.Default {
			flags = append(flags, o.Flag())
		}
	}
	if port == nil {
		return "", 0, errkind.New(errkind.Runtime, "no %s port assigned under deploy type %s", st, c.Deploy)
	}
	return binary + " " + strings.Join(flags, " "), *port, nil
}

// Cmd is CmdAndPort without the port.
func (c *AgentConfig) Cmd(binary, serverType, configFile string) (string, error) {
	cmd, _, err := c.CmdAndPort(binary, serverType, configFile)
	return cmd, err
}

// TFSOption is one TF Serving option of a TfServingConfig.
type TFSOption struct {
	Name  string
	Value any // nil for an unset optional value
	// Default is true when Value is the option's default (the reference passes only the others).
	Default bool
}

// TFSOptions lists cfg's TF Serving options in declaration order, the order of their flags.
func TFSOptions(cfg *utilsspec.TfServingConfig) []TFSOption {
	defaults := utilsspec.DefaultTfServingConfig()
	out := make([]TFSOption, 0, len(utilsspec.TfServingConfigFields))
	for i := range utilsspec.TfServingConfigFields {
		name := utilsspec.TfServingConfigFields[i].Name
		v, _ := cfg.Get(name)
		d, _ := defaults.Get(name)
		out = append(out, TFSOption{Name: name, Value: v, Default: reflect.DeepEqual(v, d)})
	}
	return out
}

// Flag is "--name=value", the value formatted as the reference's f-string does (bools lower case,
// floats as Python prints them).
func (o TFSOption) Flag() string {
	var v string
	switch x := o.Value.(type) {
	case nil:
		v = "None"
	case bool:
		v = strings.ToLower(pyfmt.Bool(x))
	case float64:
		v = pyfmt.Float(x)
	default:
		v = fmt.Sprint(x)
	}
	return "--" + o.Name + "=" + v
}

// ServerSchedule lists what this host runs for serverType: the PS indices i with
// i % num_shard == shard_id under mixed/ps deploys, the replica id for dense under dense, else one
// nil entry (a single unindexed model).
func (c *AgentConfig) ServerSchedule(serverType string) ([]*int, error) {
	switch {
	case c.Deploy == DeployMixed || c.Deploy == ServerPS:
		if serverType != ServerPS {
			return []*int{nil}, nil
		}
		shard, err := c.ShardID()
		if err != nil {
			return nil, err
		}
		n := 1
		if c.NumShard != nil {
			n = *c.NumShard
		}
		if n <= 0 {
			return nil, errkind.New(errkind.Value, "num_shard %d: must be positive", n)
		}
		out := []*int{}
		for i := 0; i < c.NumPS; i++ {
			if pyint.FloorMod(i, n) == shard {
				v := i
				out = append(out, &v)
			}
		}
		return out, nil
	case c.Deploy == ServerDense && serverType == ServerDense:
		return []*int{c.ReplicaID}, nil
	}
	return []*int{nil}, nil
}

// PlatformConfigText is the TF Serving platform config (PlatformConfigMap text format, byte-identical
// to the reference's text_format output): session threads from the config, else MY_CPU_LIMIT, else 16;
// the fixed batching parameters when dense_alone and enable_batching.
func (c *AgentConfig) PlatformConfigText() (string, error) {
	cpu, err := envInt(c.env, "MY_CPU_LIMIT", 0)
	if err != nil {
		return "", err
	}
	threads := func(v int) int {
		if v != 0 {
			return v
		}
		if cpu != 0 {
			return cpu
		}
		return 16
	}
	var b strings.Builder
	w := func(indent int, s string) { b.WriteString(strings.Repeat("  ", indent) + s + "\n") }
	w(0, "platform_configs {")
	w(1, `key: "tensorflow"`)
	w(1, "value {")
	w(2, "source_adapter_config {")
	w(3, "[type.googleapis.com/tensorflow.serving.SavedModelBundleSourceAdapterConfig] {")
	w(4, "legacy_config {")
	w(5, "session_config {")
	if n := threads(c.TensorflowIntraOpParallelism); n != 0 {
		w(6, fmt.Sprintf("intra_op_parallelism_threads: %d", n))
	}
	if n := threads(c.TensorflowInterOpParallelism); n != 0 {
		w(6, fmt.Sprintf("inter_op_parallelism_threads: %d", n))
	}
	w(6, "gpu_options {")
	if c.AllowGrowth {
		w(7, "allow_growth: true")
	}
	w(6, "}")
	w(6, "allow_soft_placement: true")
	w(5, "}")
	if c.DenseAlone && c.EnableBatching {
		w(5, "batching_parameters {")
		for _, p := range []struct {
			name string
			v    int
		}{{"max_batch_size", 1024}, {"batch_timeout_micros", 800}, {"max_enqueued_batches", 100000}, {"num_batch_threads", 8}} {
			w(6, p.name+" {")
			w(7, fmt.Sprintf("value: %d", p.v))
			w(6, "}")
		}
		w(6, "support_diff_dim_size_inputs: true")
		w(5, "}")
	}
	if c.EnableModelWarmup {
		w(5, "enable_model_warmup: true")
	}
	w(4, "}")
	w(3, "}")
	w(2, "}")
	w(1, "}")
	w(0, "}")
	return b.String(), nil
}

// WritePlatformConfig writes PlatformConfigText to platform_config_file.
func (c *AgentConfig) WritePlatformConfig() error {
	text, err := c.PlatformConfigText()
	if err != nil {
		return err
	}
	if c.PlatformConfigFile == nil {
		return errkind.New(errkind.Attribute, "platform_config_file is not set")
	}
	if err := os.WriteFile(*c.PlatformConfigFile, []byte(text), 0o644); err != nil {
		return fmt.Errorf("write platform config: %w", err)
	}
	return nil
}
