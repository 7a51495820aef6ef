package agentconf

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"

	"github.com/monolith-go/monolith/gen/spec/agent_service/utils"
	"github.com/monolith-go/monolith/gen/spec/fieldspec"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pathutil"
	"github.com/monolith-go/monolith/pkg/pyfmt"
	"github.com/monolith-go/monolith/pkg/pyint"
)

// TFSHome is where TF Serving is installed on serving hosts.
const TFSHome = "/opt/tiger/monolith_serving"

// DefaultPlatformConfigFile is used when platform_config_file is not configured.
const DefaultPlatformConfigFile = TFSHome + "/conf/platform_config_file.cfg"

// Options are the agent config's inputs besides the file.
type Options struct {
	// Env reads environment variables; nil means the process environment.
	Env LookupEnv
	// FreePort allocates ports not fixed by PORT* variables; nil means FindFreePort.
	FreePort func() (int, error)
	// Logger receives warnings (unknown keys); nil means slog.Default().
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Env == nil {
		o.Env = os.LookupEnv
	}
	if o.FreePort == nil {
		o.FreePort = FindFreePort
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// AgentConfig is the agent's configuration after the reference's __post_init__: deploy type
// resolved, ports and replica id assigned, platform_config_file defaulted.
type AgentConfig struct {
	utilsspec.AgentConfig
	// Deploy is the resolved deploy type (mixed for stand-alone serving).
	Deploy DeployType
	env    LookupEnv
}

// fieldError ties a post-init failure to the config key it is about, so FromFile can name the line.
type fieldError struct {
	field string
	err   error
}

func (e *fieldError) Error() string { return e.field + ": " + e.err.Error() }
func (e *fieldError) Unwrap() error { return e.err }

func fieldErr(field string, k errkind.Kind, format string, args ...any) error {
	return &fieldError{field: field, err: errkind.New(k, format, args...)}
}

// New completes fields as the reference's __post_init__ does. Unlike the reference it writes no file:
// call WritePlatformConfig for that.
func New(fields utilsspec.AgentConfig, opts Options) (*AgentConfig, error) {
	o := opts.withDefaults()
	c := &AgentConfig{AgentConfig: fields, env: o.Env}
	// Names that become ZooKeeper paths are checked before anything connects or starts: a bad one
	// would otherwise fail later, far from the line that set it.
	if c.Bzid != nil {
		if err := ValidateZKNodeName(*c.Bzid); err != nil {
			return nil, &fieldError{field: "bzid", err: err}
		}
	}
	if c.ZKServers != nil && *c.ZKServers != "" {
		if err := ValidateZKServers(*c.ZKServers); err != nil {
			return nil, &fieldError{field: "zk_servers", err: err}
		}
		zk, err := UpdateZKServers(*c.ZKServers, IsIPv6Only(o.Env))
		if err != nil {
			return nil, &fieldError{field: "zk_servers", err: err}
		}
		c.ZKServers = &zk
	}
	if err := checkOneOf(&c.AgentConfig); err != nil {
		return nil, err
	}
	if err := c.AgentConfig.Validate(); err != nil {
		var fe *fieldspec.FieldError
		errors.As(err, &fe) // the generated Validate names the field
		field := ""
		if fe != nil {
			field, err = fe.Field, fe.Err // fieldError names the field itself
		}
		// checkOneOf took the one_of rules (the reference's assertions); what is left is min/max.
		return nil, &fieldError{field: field, err: errkind.Wrap(errkind.Value, err)}
	}
	if c.StandAloneServing {
		c.Deploy = DeployMixed
	} else {
		if c.DeployType == nil {
			return nil, fieldErr("deploy_type", errkind.Precondition, "not set (needed unless stand_alone_serving is true)")
		}
		d, err := ParseDeployType(*c.DeployType)
		if err != nil {
			return nil, &fieldError{field: "deploy_type", err: err}
		}
		c.Deploy = d
	}
	dt := string(c.Deploy)
	c.DeployType = &dt

	tce, err := c.NumTCEShard()
	if err != nil {
		return nil, err
	}
	if c.NumShard == nil {
		c.NumShard = &tce
	} else if *c.NumShard != tce {
		return nil, fieldErr("num_shard", errkind.Precondition, "%d does not match %s=%d", *c.NumShard, HostShardEnv, tce)
	}
	if err := c.assignPorts(o); err != nil {
		return nil, err
	}
	if c.AgentVersion == 1 {
		id := ReplicaIDFromPodName(o.Env)
		c.ReplicaID = &id
	} else {
		id, err := ReplicaIDFromEnv(o.Env)
		if err != nil {
			return nil, err
		}
		c.ReplicaID = &id
	}
	if c.PlatformConfigFile == nil || *c.PlatformConfigFile == "" {
		p := DefaultPlatformConfigFile
		c.PlatformConfigFile = &p
	}
	return c, nil
}

// checkOneOf is the generated Validate's one_of rule (the reference asserts it: kind Precondition)
// with the value clipped in the message.
func checkOneOf(c *utilsspec.AgentConfig) error {
	for i := range utilsspec.AgentConfigFields {
		f := &utilsspec.AgentConfigFields[i]
		if len(f.OneOf) == 0 {
			continue
		}
		v, _ := c.Get(f.Name)
		s, ok := v.(string)
		if !ok {
			continue // unset
		}
		found := false
		for _, w := range f.OneOf {
			found = found || strings.EqualFold(s, w)
		}
		if !found {
			return fieldErr(f.Name, errkind.Precondition, "%s is not one of %s", quote(s), strings.Join(f.OneOf, ", "))
		}
	}
	return nil
}

// ReplicaIDFromEnv is the reference's replica id for agent versions above 1 (and zk_mirror's
// tce_replica_id): int(REPLICA_ID), and where that is unset or -1, ReplicaIDFromPodName.
func ReplicaIDFromEnv(env LookupEnv) (int, error) {
	id, err := envInt(env, "REPLICA_ID", -1)
	if err != nil || id != -1 {
		return id, err
	}
	return ReplicaIDFromPodName(env), nil
}

func envInt(env LookupEnv, key string, def int) (int, error) {
	v, ok := env(key)
	if !ok {
		return def, nil
	}
	n, err := pyint.Atoi(v)
	if err != nil {
		return 0, errkind.New(errkind.Value, "environment variable %s=%s is not an integer", key, quote(v))
	}
	return n, nil
}

// maxPort is the largest TCP port.
const maxPort = 65535

// portFrom returns the port in env var key (when key is not empty and set), else a free port.
func portFrom(o Options, key string) (*int, error) {
	if key != "" {
		if _, ok := o.Env(key); ok {
			p, err := envInt(o.Env, key, 0)
			if err != nil {
				return nil, err
			}
			if p < 0 || p > maxPort {
				return nil, errkind.New(errkind.Value, "environment variable %s=%d is not a port (0..%d)", key, p, maxPort)
			}
			return &p, nil
		}
	}
	p, err := o.FreePort()
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// assignPorts fills the TF Serving ports per deploy type: PORT, PORT3, PORT4 belong to the role this
// host serves (PORT5..PORT10 to PS and dense under mixed), PORT2 to the agent; every other port is a
// free one. Only dense service index 0 takes dense ports from the environment.
func (c *AgentConfig) assignPorts(o Options) error {
	type slot struct {
		dst **int
		env string
	}
	var slots []slot
	denseIdx, err := envInt(o.Env, "DENSE_SERVICE_IDX", 0)
	if err != nil {
		return err
	}
	denseEnv := func(a, b, c string) (string, string, string) {
		if denseIdx == 0 {
			return a, b, c
		}
		return "", "", ""
	}
	free := func(dsts ...**int) {
		for _, d := range dsts {
			slots = append(slots, slot{d, ""})
		}
	}
	switch c.Deploy {
	case DeployMixed:
		free(&c.ProxyPort)
		slots = append(slots, slot{&c.TFSEntryArchonPort, "PORT"}, slot{&c.TFSEntryPort, "PORT3"}, slot{&c.TFSEntryHTTPPort, "PORT4"},
			slot{&c.TFSPSPort, "PORT5"}, slot{&c.TFSPSHTTPPort, "PORT6"}, slot{&c.TFSPSArchonPort, "PORT7"})
		if c.DenseAlone {
			p, h, a := denseEnv("PORT8", "PORT9", "PORT10")
			slots = append(slots, slot{&c.TFSDensePort, p}, slot{&c.TFSDenseHTTPPort, h}, slot{&c.TFSDenseArchonPort, a})
		}
	case ServerEntry:
		free(&c.ProxyPort, &c.TFSPSArchonPort, &c.TFSPSPort, &c.TFSPSHTTPPort)
		if c.DenseAlone {
			free(&c.TFSDensePort, &c.TFSDenseHTTPPort, &c.TFSDenseArchonPort)
		}
		slots = append(slots, slot{&c.TFSEntryArchonPort, "PORT"}, slot{&c.TFSEntryPort, "PORT3"}, slot{&c.TFSEntryHTTPPort, "PORT4"})
	case ServerPS:
		free(&c.ProxyPort, &c.TFSEntryArchonPort, &c.TFSEntryPort, &c.TFSEntryHTTPPort)
		if c.DenseAlone {
			free(&c.TFSDensePort, &c.TFSDenseHTTPPort, &c.TFSDenseArchonPort)
		}
		slots = append(slots, slot{&c.TFSPSArchonPort, "PORT"}, slot{&c.TFSPSPort, "PORT3"}, slot{&c.TFSPSHTTPPort, "PORT4"})
	case ServerDense:
		if !c.DenseAlone {
			return fieldErr("dense_alone", errkind.Precondition, "must be true for deploy_type dense")
		}
		free(&c.ProxyPort, &c.TFSEntryArchonPort, &c.TFSEntryPort, &c.TFSEntryHTTPPort, &c.TFSPSArchonPort, &c.TFSPSPort, &c.TFSPSHTTPPort)
		a, p, h := denseEnv("PORT", "PORT3", "PORT4")
		slots = append(slots, slot{&c.TFSDenseArchonPort, a}, slot{&c.TFSDensePort, p}, slot{&c.TFSDenseHTTPPort, h})
	case ServerUnified:
		slots = append(slots, slot{&c.TFSPortArchon, "PORT"}, slot{&c.TFSPortGRPC, "PORT3"}, slot{&c.TFSPortHTTP, "PORT4"})
	}
	if c.AgentPort == nil {
		slots = append(slots, slot{&c.AgentPort, "PORT2"})
	}
	for _, s := range slots {
		p, err := portFrom(o, s.env)
		if err != nil {
			return err
		}
		*s.dst = p
	}
	return nil
}

// NumTCEShard is MONOLITH_HOST_SHARD_N, default 1.
func (c *AgentConfig) NumTCEShard() (int, error) { return envInt(c.env, HostShardEnv, 1) }

// ShardID is SHARD_ID, default -1.
func (c *AgentConfig) ShardID() (int, error) { return envInt(c.env, "SHARD_ID", -1) }

func lowerEnv(env LookupEnv, keys ...string) *string {
	for _, k := range keys {
		// The reference uses `or`: an empty value falls through to the next variable.
		if v, ok := env(k); ok && (v != "" || k == keys[len(keys)-1]) {
			l := strings.ToLower(v)
			return &l
		}
	}
	return nil
}

// IDC is TCE_INTERNAL_IDC in lower case, or nil.
func (c *AgentConfig) IDC() *string {
	v, ok := c.env("TCE_INTERNAL_IDC")
	if !ok {
		return nil
	}
	l := strings.ToLower(v)
	return &l
}

// Cluster is TCE_LOGICAL_CLUSTER, TCE_CLUSTER or TCE_PHYSICAL_CLUSTER in lower case, or nil.
func (c *AgentConfig) Cluster() *string {
	return lowerEnv(c.env, "TCE_LOGICAL_CLUSTER", "TCE_CLUSTER", "TCE_PHYSICAL_CLUSTER")
}

// Location is "{idc}:{cluster}", or nil when either is unknown.
func (c *AgentConfig) Location() *string {
	idc, cl := c.IDC(), c.Cluster()
	if idc == nil || cl == nil {
		return nil
	}
	s := *idc + ":" + *cl
	return &s
}

// PathPrefix is /{bzid}/service/{base_name}, plus /{idc}:{cluster} when dc_aware.
func (c *AgentConfig) PathPrefix() (string, error) {
	if c.Bzid == nil {
		return "", errkind.New(errkind.Type, "path_prefix: bzid is not set")
	}
	if c.BaseName == nil {
		return "", errkind.New(errkind.Type, "path_prefix: base_name is not set")
	}
	if c.DCAware {
		loc := c.Location()
		if loc == nil {
			return "", errkind.New(errkind.Type, "path_prefix: dc_aware needs TCE_INTERNAL_IDC and a TCE_*CLUSTER variable")
		}
		return pathutil.Join("/", *c.Bzid, "service", *c.BaseName, *loc), nil
	}
	return pathutil.Join("/", *c.Bzid, "service", *c.BaseName), nil
}

// LayoutPath is layout_pattern when absolute, else /{bzid}/layouts/{layout_pattern}.
func (c *AgentConfig) LayoutPath() (string, error) {
	if c.LayoutPattern == nil {
		return "", errkind.New(errkind.Attribute, "layout_path: layout_pattern is not set")
	}
	if strings.HasPrefix(*c.LayoutPattern, "/") {
		return *c.LayoutPattern, nil
	}
	if c.Bzid == nil {
		return "", errkind.New(errkind.Attribute, "layout_path: bzid is not set")
	}
	return "/" + *c.Bzid + "/layouts/" + *c.LayoutPattern, nil
}

// ContainerCluster is "{TCE_PSM};{idc};{cluster}" ("unknown" and "None" for the unset parts).
func (c *AgentConfig) ContainerCluster() string {
	psm, ok := c.env("TCE_PSM")
	if !ok {
		psm = "unknown"
	}
	return psm + ";" + pyfmt.OptStr(c.IDC()) + ";" + pyfmt.OptStr(c.Cluster())
}

// ContainerID is MY_POD_NAME, else the local IP.
func (c *AgentConfig) ContainerID() string {
	if v, ok := c.env("MY_POD_NAME"); ok {
		return v
	}
	return LocalIP(c.env)
}

// FromFile reads an agent.conf and completes it (New). Errors name the file, line, key and value.
func FromFile(path string, opts Options) (*AgentConfig, error) {
	o := opts.withDefaults()
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errkind.New(errkind.NotFound, "agent conf %s: no such file", path)
		}
		return nil, fmt.Errorf("agent conf: %w", err)
	}
	conf, err := ParseConf(path)
	if err != nil {
		if errkind.Of(err) == errkind.Unknown {
			err = errkind.Wrap(errkind.Value, err)
		}
		return nil, err
	}
	if len(conf.Ignored) > 0 {
		ig := conf.Ignored[0]
		return nil, errkind.New(errkind.Value, "%s:%d: %s: %s", ig.File, ig.Line, quote(ig.Text), ig.Reason)
	}
	fields, err := LoadFields(conf, o)
	if err != nil {
		return nil, err
	}
	c, err := New(fields, o)
	if err != nil {
		var fe *fieldError
		if errors.As(err, &fe) {
			if e, ok := lookupEntry(conf, fe.field); ok {
				return nil, fmt.Errorf("%s:%d: %s %s: %w", e.Files[0], e.Lines[0], e.Key, quote(strings.Join(e.Values, ", ")), fe.err)
			}
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

func lookupEntry(conf *Conf, field string) (*Entry, bool) {
	for i := range utilsspec.AgentConfigFields {
		f := &utilsspec.AgentConfigFields[i]
		if f.Name != field {
			continue
		}
		for _, k := range append([]string{f.Name}, f.Aliases...) {
			if e, ok := conf.Entries[k]; ok {
				return e, true
			}
		}
	}
	return nil, false
}

// LoadFields converts a parsed conf into AgentConfig fields (defaults for absent keys) without
// completing them. An unknown key is an error naming its file, line and value, with the known key
// it is closest to (the reference ignores it, so a misspelt key silently kept its default there).
func LoadFields(conf *Conf, opts Options) (utilsspec.AgentConfig, error) {
	o := opts.withDefaults()
	fields := utilsspec.DefaultAgentConfig()
	if err := checkKeys(conf, o.Logger); err != nil {
		return fields, err
	}
	raw := make(map[string]fieldspec.RawValue, len(conf.Entries))
	for k, e := range conf.Entries {
		raw[k] = fieldspec.RawValue{Key: k, Values: e.Values, File: e.Files[0], Line: e.Lines[0]}
	}
	_, err := fields.Load(raw, pyConverter{conf: conf, log: o.Logger})
	return fields, err
}

// checkKeys rejects keys AgentConfig does not read (legacy keys are accepted with a warning). The
// error names the first unknown key in file order and counts the others.
func checkKeys(conf *Conf, log *slog.Logger) error {
	known := knownKeys()
	isKnown := make(map[string]bool, len(known))
	for _, k := range known {
		isKnown[k] = true
	}
	var unknown []*Entry
	for _, k := range conf.Keys {
		e := conf.Entries[k]
		switch why, legacy := legacyKeys[k]; {
		case isKnown[k]:
		case legacy:
			log.Warn("agent conf: legacy key ignored", "file", e.Files[0], "line", e.Lines[0], "key", k, "why", why)
		default:
			unknown = append(unknown, e)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	e := unknown[0]
	msg := fmt.Sprintf("%s:%d: unknown key %s %s", e.Files[0], e.Lines[0], clip(e.Key), quote(e.Values[0]))
	if s := suggestKey(e.Key, known); s != "" {
		msg += fmt.Sprintf(" (did you mean %s?)", s)
	}
	if n := len(unknown) - 1; n > 0 {
		var more []string
		for _, u := range unknown[1:min(len(unknown), 4)] {
			more = append(more, fmt.Sprintf("%s at line %d", clip(u.Key), u.Lines[0]))
		}
		if n > len(more) {
			more = append(more, "...")
		}
		msg += fmt.Sprintf("; %d more unknown (%s)", n, strings.Join(more, ", "))
	}
	return errkind.New(errkind.Value, "%s", msg)
}

// pyConverter gives conf values the meaning the reference's from_file gives them, but turns what the
// reference logs and drops into errors naming file, line, key and value.
type pyConverter struct {
	conf *Conf
	log  *slog.Logger
}

// maxListValues is how many values of a repeated key the reference's conf_parser keeps: the first
// occurrence sets a string, the second turns it into a list of two, later ones are dropped.
const maxListValues = 2

var (
	trueWords  = map[string]bool{"true": true, "y": true, "t": true, "yes": true, "1": true}
	falseWords = map[string]bool{"false": true, "n": true, "f": true, "no": true, "0": true}
)

func (p pyConverter) Convert(f *fieldspec.Field, raw fieldspec.RawValue) (any, error) {
	e := p.conf.Entries[raw.Key]
	where := func(i int) string { return fmt.Sprintf("%s:%d", e.Files[i], e.Lines[i]) }
	bad := func(format string, args ...any) error {
		return errkind.New(errkind.Value, "%s: %s %s: %s", where(0), raw.Key, quote(raw.Values[0]), clipReason(fmt.Sprintf(format, args...)))
	}
	if f.Type == fieldspec.StringList {
		n := min(len(raw.Values), maxListValues)
		if len(raw.Values) > n {
			// Matching the reference matters more than taking every line: a fleet of Python and Go
			// agents must load the same sub-graphs from the same file.
			var ignored []string
			for i := n; i < len(raw.Values); i++ {
				ignored = append(ignored, where(i))
			}
			p.log.Warn("agent conf: key repeated more than twice; only its first two values are used, as by the reference",
				"key", raw.Key, "used", []string{clip(raw.Values[0]), clip(raw.Values[1])}, "kept_at", []string{where(0), where(1)}, "ignored_at", ignored)
		}
		return append([]string(nil), raw.Values[:n]...), nil
	}
	if len(raw.Values) > 1 {
		var at []string
		for i := range min(len(raw.Values), 3) {
			at = append(at, fmt.Sprintf("%s at %s", quote(raw.Values[i]), where(i)))
		}
		if len(raw.Values) > 3 {
			at = append(at, "...")
		}
		return nil, errkind.New(errkind.Value, "%s: %s is set %d times (%s); it takes one value",
			where(0), raw.Key, len(raw.Values), strings.Join(at, ", "))
	}
	v := raw.Values[0]
	switch f.Type {
	case fieldspec.Bool:
		l := strings.ToLower(v)
		if trueWords[l] {
			return true, nil
		}
		if falseWords[l] {
			return false, nil
		}
		return nil, bad("not a bool (want true/false, yes/no, y/n, t/f or 1/0)")
	case fieldspec.Int, fieldspec.Float:
		n, err := EvalArithmetic(v)
		if err != nil {
			return nil, bad("not a number: %v", err)
		}
		if f.Type == fieldspec.Float {
			return n.ToFloat(), nil
		}
		i, err := n.ToInt()
		if err != nil {
			return nil, bad("%v", err)
		}
		return i, nil
	case fieldspec.String:
		if strings.ToLower(v) == "none" && f.Optional {
			return nil, nil
		}
		return v, nil
	}
	return nil, bad("unsupported field type %s", f.Type)
}

// LookupEnv reads the environment the config was built from (the process environment unless
// Options.Env was given).
func (c *AgentConfig) LookupEnv(key string) (string, bool) { return c.env(key) }
