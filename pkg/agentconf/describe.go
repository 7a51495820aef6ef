package agentconf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/monolith-go/monolith/gen/spec/agent_service/utils"
	"github.com/monolith-go/monolith/pkg/pyfmt"
)

// Setting is one effective config value, printed as Python would print it.
type Setting struct {
	Name, Value string
}

// Settings lists every field in declaration order with its effective value.
func (c *AgentConfig) Settings() []Setting {
	var out []Setting
	for i := range utilsspec.AgentConfigFields {
		f := &utilsspec.AgentConfigFields[i]
		v, _ := c.AgentConfig.Get(f.Name)
		out = append(out, Setting{Name: f.Name, Value: pyfmt.Repr(v)})
	}
	return out
}

// ServerTypes lists the TF Serving server types this host runs: entry and ps (and dense when it
// runs alone) under mixed, else one "" meaning the deploy type's own.
func (c *AgentConfig) ServerTypes() []string {
	if c.Deploy != DeployMixed {
		return []string{""}
	}
	types := []string{ServerEntry, ServerPS}
	if c.DenseAlone {
		types = append(types, ServerDense)
	}
	return types
}

// Properties lists the derived values (the reference's properties) with errors spelled out.
func (c *AgentConfig) Properties() []Setting {
	str := func(s string, err error) string {
		if err != nil {
			return "error: " + err.Error()
		}
		return s
	}
	num := func(n int, err error) string {
		if err != nil {
			return "error: " + err.Error()
		}
		return strconv.Itoa(n)
	}
	return []Setting{
		{"num_tce_shard", num(c.NumTCEShard())},
		{"shard_id", num(c.ShardID())},
		{"idc", pyfmt.OptStr(c.IDC())},
		{"cluster", pyfmt.OptStr(c.Cluster())},
		{"location", pyfmt.OptStr(c.Location())},
		{"path_prefix", str(c.PathPrefix())},
		{"layout_path", str(c.LayoutPath())},
		{"container_cluster", c.ContainerCluster()},
		{"container_id", c.ContainerID()},
	}
}

// GoldenConfParser parses conf text and prints the reference's conf_parser dict as sorted JSON.
func GoldenConfParser(in []byte) ([]byte, error) {
	dir, err := os.MkdirTemp("", "confparser")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	p := filepath.Join(dir, "agent.conf")
	if err := os.WriteFile(p, in, 0o644); err != nil {
		return nil, err
	}
	c, err := ParseConf(p)
	if err != nil {
		return nil, err
	}
	out, err := json.MarshalIndent(c.PyMap(), "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// GoldenAgentConfig loads conf text whose "# env: K=V" comment lines give the whole environment,
// with free ports drawn from 30000 upwards, and prints the effective config, the properties and the
// TF Serving command line of each server type the deploy type runs.
func GoldenAgentConfig(in []byte) ([]byte, error) {
	env := map[string]string{}
	for _, line := range strings.Split(string(in), "\n") {
		if kv, ok := strings.CutPrefix(strings.TrimSpace(line), "# env:"); ok {
			k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
			env[k] = v
		}
	}
	dir, err := os.MkdirTemp("", "agentconf")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	p := filepath.Join(dir, "agent.conf")
	if err := os.WriteFile(p, in, 0o644); err != nil {
		return nil, err
	}
	next := 30000
	c, err := FromFile(p, Options{Env: MapEnv(env), FreePort: func() (int, error) { next++; return next, nil }})
	if err != nil {
		return nil, fmt.Errorf("%s", strings.ReplaceAll(err.Error(), p, "agent.conf"))
	}
	var b bytes.Buffer
	b.WriteString("[config]\n")
	for _, s := range c.Settings() {
		fmt.Fprintf(&b, "%s = %s\n", s.Name, s.Value)
	}
	b.WriteString("\n[properties]\n")
	for _, s := range c.Properties() {
		fmt.Fprintf(&b, "%s = %s\n", s.Name, s.Value)
	}
	b.WriteString("\n[commands]\n")
	types := c.ServerTypes()
	sort.Strings(types)
	for _, st := range types {
		cmd, port, err := c.CmdAndPort("tensorflow_model_server", st, "/tmp/model.cfg")
		name := st
		if name == "" {
			name = string(c.Deploy)
		}
		if err != nil {
			fmt.Fprintf(&b, "%s: error: %v\n", name, err)
			continue
		}
		fmt.Fprintf(&b, "%s (port %d): %s\n", name, port, cmd)
	}
	text, err := c.PlatformConfigText()
	if err != nil {
		return nil, err
	}
	b.WriteString("\n[platform_config]\n" + text)
	return b.Bytes(), nil
}
