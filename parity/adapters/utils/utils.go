// Package utils adapts pkg/agentconf to the parity cases of monolith/agent_service/utils.py.
package utils

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	utilsspec "github.com/monolith-go/monolith/gen/spec/agent_service/utils"
	"github.com/monolith-go/monolith/gen/spec/fieldspec"
	"github.com/monolith-go/monolith/parity/harness"
	"github.com/monolith-go/monolith/pkg/agentconf"
)

// Register adds the utils.py calls that are ported.
func Register(r *harness.Registry) {
	r.Register("conf_parser(file, args)", confParser)
	r.Register("AgentConfig.from_file", fromFile)
	r.Register("AgentConfig(**kwargs).get_cmd_and_port(binary, server_type, config_file)", cmdAndPort)
	r.Register("AgentConfig(...).generate_platform_config_file", platformConfig)
	r.Register("AgentConfig._update_zk_servers(zk_servers, use_ipv6)", updateZKServers)
	r.Register("DeployType(dtype)", deployType)
	r.Register("DeployType(dtype).compat_server_type(server_type)", compatServerType)
	r.Register("ZKPath(path) attributes + ship_in", zkPathShipIn)
	r.Register("ZKPath(path)", zkPath)
	r.Register("getattr(ZKPath(path), name)", zkPathGetattr)
	r.Register("normalize_regex(pattern)", normalizeRegex)
	r.Register("expand_pattern(pattern)", expandPattern)
	r.Register("pasre_sub_model_name(name)", parseSubModelName)
	r.Register("replica_id_from_pod_name()", func(*harness.Ctx, harness.Input) (any, error) {
		return agentconf.ReplicaIDFromPodName(os.LookupEnv), nil
	})
	r.Register("get_local_ip()", func(*harness.Ctx, harness.Input) (any, error) {
		return agentconf.LocalIP(os.LookupEnv), nil
	})
	r.Register("os.path.isabs (patched by utils)", isAbs)
	registerModelConfig(r)
	registerInstanceFormater(r)
}

// writeConf writes the case's include_files (name -> content, each at <tmp>/name) and file_content
// (placeholders <tmp> and <include> filled in) and returns the conf's path.
func writeConf(c *harness.Ctx, in harness.Input) (string, error) {
	if in.Has("include_files") {
		var files map[string]string
		if err := in.Decode("include_files", &files); err != nil {
			return "", err
		}
		for name, content := range files {
			content = strings.ReplaceAll(content, "<tmp>", c.TempDir())
			if err := os.WriteFile(filepath.Join(c.TempDir(), name), []byte(content), 0o644); err != nil {
				return "", err
			}
		}
	}
	if !in.Has("file_content") {
		return in.Str("file")
	}
	content, err := in.Str("file_content")
	if err != nil {
		return "", err
	}
	if in.Has("include_file_content") {
		inc, err := in.Str("include_file_content")
		if err != nil {
			return "", err
		}
		incPath := filepath.Join(c.TempDir(), "include.conf")
		if err := os.WriteFile(incPath, []byte(inc), 0o644); err != nil {
			return "", err
		}
		content = strings.ReplaceAll(content, "<include>", incPath)
	}
	content = strings.ReplaceAll(content, "<tmp>", c.TempDir())
	p := filepath.Join(c.TempDir(), "agent.conf")
	return p, os.WriteFile(p, []byte(content), 0o644)
}

func confParser(c *harness.Ctx, in harness.Input) (any, error) {
	path, err := writeConf(c, in)
	if err != nil {
		return nil, err
	}
	args := map[string]any{}
	if err := in.Decode("initial_args", &args); err != nil {
		return nil, err
	}
	if err := agentconf.ParseConfOnto(path, args); err != nil {
		return nil, err
	}
	return args, nil
}

// jsonValue converts a config value to what Python's json would write for it: a float field holds
// a Python float once from_file has set it (float(eval(...))), but keeps its default's type when
// nothing set it, and per_process_gpu_memory_fraction's default is the int 0.
func jsonValue(f *fieldspec.Field, v any, set bool) any {
	x, ok := v.(float64)
	if !ok {
		return v
	}
	if !set && isIntLiteral(f.Default) {
		return int64(x)
	}
	return harness.Float(x)
}

func isIntLiteral(s string) bool {
	_, err := strconv.ParseInt(s, 10, 64)
	return err == nil
}

// configJSON is the reference's config as a dict; set holds the keys the conf file gave.
func configJSON(cfg *agentconf.AgentConfig, set map[string]bool) (map[string]any, error) {
	out := map[string]any{}
	for i := range utilsspec.AgentConfigFields {
		f := &utilsspec.AgentConfigFields[i]
		v, ok := cfg.AgentConfig.Get(f.Name)
		if !ok {
			return nil, fmt.Errorf("field %s has no getter", f.Name)
		}
		given := set[f.Name]
		for _, a := range f.Aliases {
			given = given || set[a]
		}
		out[f.Name] = jsonValue(f, v, given)
	}
	return out, nil
}

func fromFile(c *harness.Ctx, in harness.Input) (any, error) {
	path, err := writeConf(c, in)
	if err != nil {
		return nil, err
	}
	cfg, err := agentconf.FromFile(path, agentconf.Options{})
	if err != nil {
		return nil, err
	}
	conf, err := agentconf.ParseConf(path)
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for k := range conf.Entries {
		set[k] = true
	}
	config, err := configJSON(cfg, set)
	if err != nil {
		return nil, err
	}
	val := func(v any) any { return harness.Value(v) }
	num := func(n int, err error) any { return harness.ValueOrError(n, err) }
	str := func(s string, err error) any { return harness.ValueOrError(s, err) }
	opt := func(s *string) any {
		if s == nil {
			return harness.Value(nil)
		}
		return harness.Value(*s)
	}
	props := map[string]any{
		"cluster":           opt(cfg.Cluster()),
		"container_cluster": val(cfg.ContainerCluster()),
		"container_id":      val(cfg.ContainerID()),
		"idc":               opt(cfg.IDC()),
		"layout_path":       str(cfg.LayoutPath()),
		"location":          opt(cfg.Location()),
		"num_shard":         val(*cfg.NumShard),
		"num_tce_shard":     num(cfg.NumTCEShard()),
		"path_prefix":       str(cfg.PathPrefix()),
		"replica_id":        val(*cfg.ReplicaID),
		"shard_id":          num(cfg.ShardID()),
	}
	return map[string]any{"config": config, "properties": props}, nil
}

// newFromKwargs builds AgentConfig(**kwargs); platform_config_file defaults to a temp file, as the
// goldens were recorded with.
func newFromKwargs(c *harness.Ctx, in harness.Input) (*agentconf.AgentConfig, error) {
	raw, err := in.Raw("kwargs")
	if err != nil {
		return nil, err
	}
	return AgentConfigFromKwargs(c, raw)
}

// AgentConfigFromKwargs builds AgentConfig(**kwargs) from the kwargs object of a case.
func AgentConfigFromKwargs(c *harness.Ctx, raw json.RawMessage) (*agentconf.AgentConfig, error) {
	var kwargs map[string]json.RawMessage
	if err := json.Unmarshal(raw, &kwargs); err != nil {
		return nil, fmt.Errorf("kwargs: %w", err)
	}
	fields := utilsspec.DefaultAgentConfig()
	for name, raw := range kwargs {
		var f *fieldspec.Field
		for i := range utilsspec.AgentConfigFields {
			if utilsspec.AgentConfigFields[i].Name == name {
				f = &utilsspec.AgentConfigFields[i]
			}
		}
		if f == nil {
			return nil, fmt.Errorf("kwargs: unknown AgentConfig field %q", name)
		}
		v, err := decodeField(f, raw)
		if err != nil {
			return nil, fmt.Errorf("kwargs[%s]: %w", name, err)
		}
		if err := fields.Set(name, v); err != nil {
			return nil, err
		}
	}
	if _, ok := kwargs["platform_config_file"]; !ok {
		p := filepath.Join(c.TempDir(), "platform_config_file.cfg")
		fields.PlatformConfigFile = &p
	}
	return agentconf.New(fields, agentconf.Options{})
}

func decodeField(f *fieldspec.Field, raw json.RawMessage) (any, error) {
	if string(raw) == "null" {
		return nil, nil
	}
	var err error
	switch f.Type {
	case fieldspec.Bool:
		var b bool
		err = json.Unmarshal(raw, &b)
		return b, err
	case fieldspec.Int:
		var i int
		err = json.Unmarshal(raw, &i)
		return i, err
	case fieldspec.Float:
		var x float64
		err = json.Unmarshal(raw, &x)
		return x, err
	case fieldspec.String:
		var s string
		err = json.Unmarshal(raw, &s)
		return s, err
	default:
		var l []string
		err = json.Unmarshal(raw, &l)
		return l, err
	}
}

func cmdAndPort(c *harness.Ctx, in harness.Input) (any, error) {
	cfg, err := newFromKwargs(c, in)
	if err != nil {
		return nil, err
	}
	binary, err := in.Str("binary")
	if err != nil {
		return nil, err
	}
	st, err := in.OptStr("server_type")
	if err != nil {
		return nil, err
	}
	cf, err := in.OptStr("config_file")
	if err != nil {
		return nil, err
	}
	deref := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	cmd, port, err := cfg.CmdAndPort(binary, deref(st), deref(cf))
	if err != nil {
		return nil, err
	}
	return map[string]any{"cmd": cmd, "port": port}, nil
}

func platformConfig(c *harness.Ctx, in harness.Input) (any, error) {
	cfg, err := newFromKwargs(c, in)
	if err != nil {
		return nil, err
	}
	// Through the file, as the reference produces it.
	if err := cfg.WritePlatformConfig(); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(*cfg.PlatformConfigFile)
	return string(b), err
}

func updateZKServers(_ *harness.Ctx, in harness.Input) (any, error) {
	var calls [][]any
	if err := in.Decode("calls", &calls); err != nil {
		return nil, err
	}
	var out []any
	for _, call := range calls {
		zk, _ := call[0].(string)
		v6, _ := call[1].(bool)
		out = append(out, harness.ValueOrError(agentconf.UpdateZKServers(zk, v6)))
	}
	return out, nil
}

func deployType(_ *harness.Ctx, in harness.Input) (any, error) {
	s, err := in.Str("dtype")
	if err != nil {
		return nil, err
	}
	d, err := agentconf.ParseDeployType(s)
	return string(d), err
}

func compatServerType(_ *harness.Ctx, in harness.Input) (any, error) {
	var pairs [][2]*string
	if err := in.Decode("pairs", &pairs); err != nil {
		return nil, err
	}
	var out []any
	for _, p := range pairs {
		d, err := agentconf.ParseDeployType(*p[0])
		if err != nil {
			out = append(out, harness.ErrorValue(err))
			continue
		}
		st := ""
		if p[1] != nil {
			st = *p[1]
		}
		out = append(out, harness.ValueOrError(d.CompatServerType(st)))
	}
	return out, nil
}

func zkPathJSON(z agentconf.ZKPath) map[string]any {
	opt := func(s *string) any {
		if s == nil {
			return nil
		}
		return *s
	}
	return map[string]any{
		"base_name": opt(z.BaseName), "bzid": opt(z.Bzid), "cluster": opt(z.Cluster), "idc": opt(z.IDC),
		"index": opt(z.Index), "location": opt(z.Location()), "replica_id": opt(z.Replica),
		"server_type": opt(z.ServerType), "task": opt(z.Task()),
	}
}

func zkPathShipIn(_ *harness.Ctx, in harness.Input) (any, error) {
	path, err := in.Str("path")
	if err != nil {
		return nil, err
	}
	var args [][2]*string
	if err := in.Decode("ship_in_args", &args); err != nil {
		return nil, err
	}
	z := agentconf.ParseZKPath(path)
	out := zkPathJSON(z)
	var ship []any
	for _, a := range args {
		ship = append(ship, map[string]any{"idc": a[0], "cluster": a[1], "result": z.ShipIn(a[0], a[1])})
	}
	out["ship_in"] = ship
	return out, nil
}

func zkPath(_ *harness.Ctx, in harness.Input) (any, error) {
	p, err := in.OptStr("path")
	if err != nil {
		return nil, err
	}
	path := ""
	if p != nil {
		path = *p
	}
	return zkPathJSON(agentconf.ParseZKPath(path)), nil
}

func zkPathGetattr(_ *harness.Ctx, in harness.Input) (any, error) {
	path, err := in.Str("path")
	if err != nil {
		return nil, err
	}
	var names []string
	if err := in.Decode("names", &names); err != nil {
		return nil, err
	}
	z := agentconf.ParseZKPath(path)
	out := make([]any, len(names))
	for i, n := range names {
		v, err := z.Attr(n)
		if err != nil {
			out[i] = harness.ErrorValue(err)
			continue
		}
		if v == nil {
			out[i] = harness.Value(nil)
		} else {
			out[i] = harness.Value(*v)
		}
	}
	return out, nil
}

func normalizeRegex(_ *harness.Ctx, in harness.Input) (any, error) {
	s, err := in.Str("pattern")
	if err != nil {
		return nil, err
	}
	return agentconf.NormalizeRegex(s), nil
}

func expandPattern(_ *harness.Ctx, in harness.Input) (any, error) {
	s, err := in.Str("pattern")
	if err != nil {
		return nil, err
	}
	return agentconf.ExpandPattern(s)
}

func parseSubModelName(_ *harness.Ctx, in harness.Input) (any, error) {
	s, err := in.Str("sub_model_name")
	if err != nil {
		return nil, err
	}
	name, idx, err := agentconf.ParseSubModelName(s)
	if err != nil {
		return nil, err
	}
	return []any{name, idx}, nil
}

func isAbs(_ *harness.Ctx, in harness.Input) (any, error) {
	var paths []string
	if err := in.Decode("paths", &paths); err != nil {
		return nil, err
	}
	out := make([]bool, len(paths))
	for i, p := range paths {
		out[i] = agentconf.IsAbs(p)
	}
	return out, nil
}
