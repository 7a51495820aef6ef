// Package spec defines the schema of specs/**.yaml (one file per Python module of the reference) and
// loads it strictly: an unknown key, a value of the wrong type or a duplicate key or field is an error
// naming file:line.
package spec

import (
	"fmt"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// Spec kinds.
const (
	// KindPython (the default) describes a Python module of the reference.
	KindPython = "python"
	// KindGo describes something of this project alone (the flags every command shares, a Go-only
	// command): it lives under specs/go/, has no module and no parity section, and is not in the
	// parity report.
	KindGo = "go"
)

// Spec is one specs/**.yaml file.
type Spec struct {
	// Kind is KindPython (default when absent) or KindGo.
	Kind string `yaml:"kind"`
	// Module is the Python module path, e.g. monolith/agent_service/utils.py (python specs only).
	Module string `yaml:"module"`
	// GoPackage is the hand-written package implementing it, relative to the repo root (pkg/agentconf).
	GoPackage string   `yaml:"go_package" required:"true"`
	Doc       string   `yaml:"doc"`
	Configs   []Config `yaml:"configs"`
	Flags     []Flags  `yaml:"flags"`
	Goldens   []Golden `yaml:"goldens"`
	Parity    []Symbol `yaml:"parity"`
	// Dataclasses and Enums are Python dataclasses and enums generated with their JSON codecs (dataclass.go).
	Dataclasses []Dataclass `yaml:"dataclasses"`
	Enums       []Enum      `yaml:"enums"`
	// Formats are YAML file formats users write, generated with strict decoders (format.go).
	Formats []Format `yaml:"formats"`

	// Path is the spec file's path relative to the specs root, e.g. agent_service/utils.yaml.
	Path string `yaml:"-"`
	Line int    `yaml:"-"`
}

// Config is a typed configuration struct (a Python dataclass).
type Config struct {
	Name string `yaml:"name" required:"true"`
	Doc  string `yaml:"doc"`
	// Embeds names the configs whose fields come first (Python base classes): a config of the same
	// spec by name, or one of another spec as <spec path>#<name> (native_training/cpu_training.yaml#C).
	Embeds []string `yaml:"embeds"`
	Fields []Field  `yaml:"fields" required:"true"`
	Line   int      `yaml:"-"`
}

// Field types.
const (
	TypeBool       = "bool"
	TypeInt        = "int"
	TypeFloat      = "float"
	TypeString     = "string"
	TypeStringList = "string_list"
	// TypeStringMap is a str -> str dict; it is always optional (nil is None) and has no default.
	TypeStringMap = "string_map"
)

// Env precedences.
const (
	// PrecedenceEnv: the environment variable wins over the file.
	PrecedenceEnv = "env"
	// PrecedenceFile: the file wins; the environment is the fallback when the file does not set it.
	PrecedenceFile = "file"
	// PrecedenceDerived: hand-written code derives the value from the environment (documented here).
	PrecedenceDerived = "derived"
)

// Field is one config field.
type Field struct {
	Name   string `yaml:"name" required:"true"`
	GoName string `yaml:"go_name"`
	Type   string `yaml:"type" required:"true"`
	// Optional fields may be unset (Python None); they are pointers (nil slices for lists) in Go.
	Optional bool `yaml:"optional"`
	// Default is a YAML scalar (null = None); absent means the type's zero value.
	Default *yaml.Node `yaml:"default"`
	// Aliases are legacy key names read when Name is absent (first match wins).
	Aliases []string `yaml:"aliases"`
	// Env lists environment variables that feed this field, in precedence order.
	Env        []string `yaml:"env"`
	Precedence string   `yaml:"precedence"`
	// Expr "arithmetic" means numeric values are arithmetic expressions (+ - * / // % ** and parentheses).
	Expr  string `yaml:"expr"`
	Check *Check `yaml:"check"`
	Doc   string `yaml:"doc"`
	Line  int    `yaml:"-"`
}

// Check is a validation rule for a field.
type Check struct {
	// OneOf lists the accepted values (compared case-insensitively for strings).
	OneOf []string `yaml:"one_of"`
	Min   *float64 `yaml:"min"`
	Max   *float64 `yaml:"max"`
	// Rule names a rule enforced by hand-written code, documented here (e.g. equals_env).
	Rule string `yaml:"rule"`
	Doc  string `yaml:"doc"`
}

// Flags is one command's flag set (a kong struct).
type Flags struct {
	Command string `yaml:"command" required:"true"`
	GoName  string `yaml:"go_name" required:"true"`
	Doc     string `yaml:"doc"`
	// Group is the --help heading of the set's flags that name none; a flag's group "-" puts
	// it under no heading (with the command's first flags).
	Group string `yaml:"group"`
	Flags []Flag `yaml:"flags" required:"true"`
	Line  int    `yaml:"-"`
}

// HelpGroup is the --help heading of flag f of the set ("": none).
func (fs *Flags) HelpGroup(f *Flag) string {
	switch f.Group {
	case "-":
		return ""
	case "":
		return fs.Group
	}
	return f.Group
}

// Flag types.
const (
	FlagString   = "string"
	FlagPath     = "path"
	FlagInt      = "int"
	FlagFloat    = "float"
	FlagBool     = "bool"
	FlagDuration = "duration"
	FlagEnum     = "enum"
	// FlagUint is a non-negative integer (uint64), e.g. a random seed.
	FlagUint = "uint"
	// FlagVersion prints the command's build and exits (kong.VersionFlag).
	FlagVersion = "version"
	// FlagIgnored is accepted for compatibility and ignored, given alone or with a value
	// (--name, --name=anything): a generated Ignored type.
	FlagIgnored = "ignored"
	// FlagVersionOrValue alone prints the build and exits; with a value (another program's
	// --version=v1.2) it is accepted and ignored: a generated VersionOrValue type.
	FlagVersionOrValue = "version_or_value"
)

// Flag is one command-line flag.
type Flag struct {
	Name    string     `yaml:"name" required:"true"`
	GoName  string     `yaml:"go_name"`
	Type    string     `yaml:"type" required:"true"`
	Default *yaml.Node `yaml:"default"`
	Help    string     `yaml:"help" required:"true"`
	Env     string     `yaml:"env"`
	Enum    []string   `yaml:"enum"`
	Short   string     `yaml:"short"`
	// Group is the heading --help lists the flag under.
	Group string `yaml:"group"`
	// Aliases are other names the flag is also given by (--max_to_keep for
	// --checkpoints_max_to_keep).
	Aliases []string `yaml:"aliases"`
	// Optional flags default to unset (Python None): a pointer in Go, nil unless given.
	Optional bool `yaml:"optional"`
	Line     int  `yaml:"-"`
}

// Golden is a family of Go golden cases: each <name>.input file under Dir is passed to Func (a
// func([]byte) ([]byte, error) exported by the spec's go_package) and the output compared with
// <name>.golden in the same directory.
type Golden struct {
	Name string `yaml:"name" required:"true"`
	Func string `yaml:"func" required:"true"`
	Dir  string `yaml:"dir" required:"true"`
	Doc  string `yaml:"doc"`
	Line int    `yaml:"-"`
}

// Parity statuses.
const (
	StatusPorted        = "ported"
	StatusDifferent     = "different"
	StatusNotApplicable = "not_applicable"
	StatusPending       = "pending"
)

// Symbol is the parity status of one public Python symbol.
type Symbol struct {
	Symbol string `yaml:"symbol" required:"true"`
	Status string `yaml:"status" required:"true"`
	Why    string `yaml:"why"`
	// Go names the Go implementation (package.Identifier).
	Go string `yaml:"go"`
	// Calls are the `call` values of parity cases that exercise this symbol.
	Calls []string `yaml:"calls"`
	// Messages "exact" makes the parity checker compare error messages, not only error kinds.
	Messages string `yaml:"messages"`
	// Declared lists parity cases whose outcome differs from the reference on purpose.
	Declared []Declared `yaml:"declared"`
	// Rules declare classes of intentional differences, recorded cases or not (rules.go).
	Rules []Rule `yaml:"rules"`
	Line  int    `yaml:"-"`
}

// Declared is an intentional difference on one parity case.
type Declared struct {
	Case string `yaml:"case" required:"true"`
	Why  string `yaml:"why" required:"true"`
	// ExpectError is the errkind name the Go side must return for the case (empty: any outcome).
	ExpectError string `yaml:"expect_error"`
	Line        int    `yaml:"-"`
}

// Error is a spec error at file:line.
type Error struct {
	File string
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// Parse decodes and validates one spec file's content. file is used in error messages and as Path.
func Parse(file string, data []byte) (*Spec, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, &Error{File: file, Line: yamlErrLine(err), Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, &Error{File: file, Msg: "empty spec"}
	}
	s := &Spec{Path: file}
	d := decoder{file: file}
	if err := d.decode(doc.Content[0], s, "spec"); err != nil {
		return nil, err
	}
	if err := validate(file, s); err != nil {
		return nil, err
	}
	return s, nil
}

// GoName returns the field's Go name: GoName if set, else the CamelCase of Name.
func (f *Field) GoIdent() string {
	if f.GoName != "" {
		return f.GoName
	}
	return Camel(f.Name)
}

// GoIdent returns the flag's Go field name.
func (f *Flag) GoIdent() string {
	if f.GoName != "" {
		return f.GoName
	}
	return Camel(f.Name)
}

// Camel turns snake_case into CamelCase, keeping common initialisms upper case.
func Camel(s string) string {
	initialisms := map[string]string{"id": "ID", "ip": "IP", "ipv6": "IPv6", "zk": "ZK", "tfs": "TFS",
		"http": "HTTP", "grpc": "GRPC", "gpu": "GPU", "cpu": "CPU", "ssl": "SSL", "xla": "XLA", "ps": "PS",
		"dc": "DC", "url": "URL", "rpc": "RPC", "api": "API", "p2p": "P2P"}
	var b strings.Builder
	for _, part := range strings.Split(s, "_") {
		if part == "" {
			continue
		}
		if up, ok := initialisms[strings.ToLower(part)]; ok {
			b.WriteString(up)
			continue
		}
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

func yamlErrLine(err error) int {
	var line int
	msg := err.Error()
	if i := strings.Index(msg, "line "); i >= 0 {
		fmt.Sscanf(msg[i:], "line %d", &line)
	}
	return line
}

func validate(file string, s *Spec) error {
	errAt := func(line int, format string, args ...any) error {
		return &Error{File: file, Line: line, Msg: fmt.Sprintf(format, args...)}
	}
	switch s.Kind {
	case "", KindPython:
		s.Kind = KindPython
		if s.Module == "" {
			return errAt(s.Line, "missing required key \"module\" (the Python module; only kind: go specs have none)")
		}
		if !strings.HasPrefix(s.Module, "monolith/") || !strings.HasSuffix(s.Module, ".py") {
			return errAt(s.Line, "module %q: want monolith/....py", s.Module)
		}
	case KindGo:
		if !strings.HasPrefix(file, "specs/go/") {
			return errAt(s.Line, "kind go: the spec must live under specs/go/, not %s", file)
		}
		if s.Module != "" {
			return errAt(s.Line, "kind go: no module (%q): a Go-only spec describes no Python module", s.Module)
		}
		if len(s.Parity) > 0 {
			return errAt(s.Line, "kind go: no parity section: there is no Python reference to compare with")
		}
	default:
		return errAt(s.Line, "kind %q: want python or go", s.Kind)
	}
	configs := map[string]*Config{}
	for i := range s.Configs {
		c := &s.Configs[i]
		if configs[c.Name] != nil {
			return errAt(c.Line, "config %q: duplicate config (first at line %d)", c.Name, configs[c.Name].Line)
		}
		configs[c.Name] = c
	}
	for i := range s.Configs {
		c := &s.Configs[i]
		seen := map[string]int{}
		for _, e := range c.Embeds {
			if IsForeignEmbed(e) {
				if _, _, err := SplitForeignEmbed(e); err != nil {
					return errAt(c.Line, "config %q: %v", c.Name, err)
				}
				continue // resolved across files by ResolveEmbeds
			}
			ec := configs[e]
			if ec == nil {
				return errAt(c.Line, "config %q: embeds unknown config %q", c.Name, e)
			}
			for _, f := range ec.Fields {
				seen[f.Name] = f.Line
			}
		}
		for j := range c.Fields {
			f := &c.Fields[j]
			if prev, ok := seen[f.Name]; ok {
				return errAt(f.Line, "config %q: duplicate field %q (first at line %d)", c.Name, f.Name, prev)
			}
			seen[f.Name] = f.Line
			if err := validateField(f); err != nil {
				return errAt(f.Line, "config %q field %q: %v", c.Name, f.Name, err)
			}
		}
		for j := range c.Fields {
			for _, a := range c.Fields[j].Aliases {
				if _, ok := seen[a]; ok {
					return errAt(c.Fields[j].Line, "config %q field %q: alias %q is also a field", c.Name, c.Fields[j].Name, a)
				}
			}
		}
	}
	cmds := map[string]int{}
	for i := range s.Flags {
		fs := &s.Flags[i]
		if prev, ok := cmds[fs.Command]; ok {
			return errAt(fs.Line, "flags %q: duplicate command (first at line %d)", fs.Command, prev)
		}
		cmds[fs.Command] = fs.Line
		names := map[string]int{}
		for j := range fs.Flags {
			f := &fs.Flags[j]
			for _, n := range append([]string{f.Name}, f.Aliases...) {
				if prev, ok := names[n]; ok {
					return errAt(f.Line, "flags %q: duplicate flag %q (first at line %d)", fs.Command, n, prev)
				}
				names[n] = f.Line
			}
			switch f.Type {
			case FlagVersion, FlagIgnored, FlagVersionOrValue:
				if f.Default != nil || f.Optional || f.Env != "" || len(f.Enum) > 0 {
					return errAt(f.Line, "flag %q: type %s takes no default, optional, env or enum", f.Name, f.Type)
				}
			case FlagString, FlagPath, FlagInt, FlagUint, FlagFloat, FlagBool, FlagDuration:
				if len(f.Enum) > 0 {
					return errAt(f.Line, "flag %q: enum values given for type %s", f.Name, f.Type)
				}
			case FlagEnum:
				if len(f.Enum) == 0 {
					return errAt(f.Line, "flag %q: type enum needs enum values", f.Name)
				}
			default:
				return errAt(f.Line, "flag %q: unknown type %q (want string, path, int, uint, float, bool, duration, enum, version, ignored or version_or_value)", f.Name, f.Type)
			}
			if f.Default != nil && f.Default.Kind != yaml.ScalarNode {
				return errAt(f.Line, "flag %q: default must be a scalar", f.Name)
			}
			if f.Optional && f.Default != nil && f.Default.Tag != "!!null" {
				return errAt(f.Line, "flag %q: an optional flag has no default (it is unset unless given)", f.Name)
			}
		}
	}
	goldens := map[string]int{}
	for _, g := range s.Goldens {
		if prev, ok := goldens[g.Name]; ok {
			return errAt(g.Line, "golden %q: duplicate (first at line %d)", g.Name, prev)
		}
		goldens[g.Name] = g.Line
		if strings.HasPrefix(g.Dir, "/") || strings.Contains(g.Dir, "..") {
			return errAt(g.Line, "golden %q: dir %q must be relative to the repository root", g.Name, g.Dir)
		}
	}
	if err := validateDataclasses(s, errAt); err != nil {
		return err
	}
	if err := validateFormats(s, errAt); err != nil {
		return err
	}
	symbols := map[string]int{}
	cases := map[string]int{}
	rules := map[string]int{}
	for _, p := range s.Parity {
		if prev, ok := symbols[p.Symbol]; ok {
			return errAt(p.Line, "parity %q: duplicate symbol (first at line %d)", p.Symbol, prev)
		}
		symbols[p.Symbol] = p.Line
		switch p.Status {
		case StatusPorted, StatusPending:
		case StatusDifferent, StatusNotApplicable:
			if strings.TrimSpace(p.Why) == "" {
				return errAt(p.Line, "parity %q: status %s needs a why", p.Symbol, p.Status)
			}
		default:
			return errAt(p.Line, "parity %q: unknown status %q (want ported, different, not_applicable or pending)", p.Symbol, p.Status)
		}
		switch p.Messages {
		case "", "exact", "kind":
		default:
			return errAt(p.Line, "parity %q: messages %q: want exact or kind", p.Symbol, p.Messages)
		}
		for _, d := range p.Declared {
			if prev, ok := cases[d.Case]; ok {
				return errAt(d.Line, "parity %q: case %q declared twice (first at line %d)", p.Symbol, d.Case, prev)
			}
			cases[d.Case] = d.Line
		}
		if err := validateRules(&p, rules, errAt); err != nil {
			return err
		}
	}
	return nil
}

func validateField(f *Field) error {
	switch f.Type {
	case TypeBool, TypeInt, TypeFloat, TypeString, TypeStringList:
	case TypeStringMap:
		if !f.Optional {
			return fmt.Errorf("a string_map is optional (None when unset): set optional: true")
		}
	default:
		return fmt.Errorf("unknown type %q (want bool, int, float, string, string_list or string_map)", f.Type)
	}
	if f.Expr != "" && f.Expr != "arithmetic" {
		return fmt.Errorf("expr %q: only arithmetic is supported", f.Expr)
	}
	if f.Expr != "" && f.Type != TypeInt && f.Type != TypeFloat {
		return fmt.Errorf("expr applies to int and float fields, not %s", f.Type)
	}
	switch f.Precedence {
	case "":
		if len(f.Env) > 0 {
			return fmt.Errorf("env given without precedence (env, file or derived)")
		}
	case PrecedenceEnv, PrecedenceFile, PrecedenceDerived:
		if len(f.Env) == 0 {
			return fmt.Errorf("precedence %s without env", f.Precedence)
		}
	default:
		return fmt.Errorf("precedence %q: want env, file or derived", f.Precedence)
	}
	if f.Default != nil {
		if _, err := DefaultLiteral(f); err != nil {
			return err
		}
	}
	return nil
}

// DefaultLiteral returns the field's default as a Go literal of its Go type.
func DefaultLiteral(f *Field) (string, error) {
	n := f.Default
	isNull := n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null")
	if isNull {
		if f.Optional {
			return "nil", nil
		}
		if n != nil {
			return "", fmt.Errorf("default null needs optional: true")
		}
		switch f.Type {
		case TypeBool:
			return "false", nil
		case TypeInt:
			return "0", nil
		case TypeFloat:
			return "0", nil
		case TypeString:
			return `""`, nil
		default:
			return "nil", nil
		}
	}
	if f.Type == TypeStringMap {
		return "", fmt.Errorf("a string_map's default is null")
	}
	if f.Type == TypeStringList {
		if n.Kind != yaml.SequenceNode {
			return "", fmt.Errorf("default of a string_list must be a list")
		}
		var items []string
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode {
				return "", fmt.Errorf("default list items must be scalars")
			}
			items = append(items, fmt.Sprintf("%q", c.Value))
		}
		return "[]string{" + strings.Join(items, ", ") + "}", nil
	}
	if n.Kind != yaml.ScalarNode {
		return "", fmt.Errorf("default must be a scalar")
	}
	var lit string
	switch f.Type {
	case TypeBool:
		if n.Tag != "!!bool" {
			return "", fmt.Errorf("default %q is not a bool", n.Value)
		}
		var b bool
		if err := n.Decode(&b); err != nil {
			return "", err
		}
		lit = fmt.Sprint(b)
	case TypeInt:
		var v int64
		if n.Tag != "!!int" || n.Decode(&v) != nil {
			return "", fmt.Errorf("default %q is not an int", n.Value)
		}
		lit = fmt.Sprint(v)
	case TypeFloat:
		var v float64
		if (n.Tag != "!!float" && n.Tag != "!!int") || n.Decode(&v) != nil {
			return "", fmt.Errorf("default %q is not a number", n.Value)
		}
		lit = fmt.Sprint(v)
	case TypeString:
		lit = fmt.Sprintf("%q", n.Value)
	}
	if f.Optional {
		return "ptr[" + GoScalarType(f.Type) + "](" + lit + ")", nil
	}
	return lit, nil
}

// GoScalarType is the Go type of a field type's values.
func GoScalarType(t string) string {
	switch t {
	case TypeBool:
		return "bool"
	case TypeInt:
		return "int"
	case TypeFloat:
		return "float64"
	case TypeString:
		return "string"
	case TypeStringMap:
		return "map[string]string"
	default:
		return "[]string"
	}
}

// IsForeignEmbed reports whether an embeds entry names a config of another spec (<path>#<name>).
func IsForeignEmbed(e string) bool { return strings.Contains(e, "#") }

// SplitForeignEmbed splits <spec path>#<config name>.
func SplitForeignEmbed(e string) (specPath, config string, err error) {
	specPath, config, _ = strings.Cut(e, "#")
	if !strings.HasSuffix(specPath, ".yaml") || config == "" || strings.HasPrefix(specPath, "/") || strings.Contains(specPath, "..") {
		return "", "", fmt.Errorf("embeds %q: want <spec path relative to specs/>.yaml#<config>", e)
	}
	return specPath, config, nil
}

// Lookup finds the config an embeds entry of spec s names, in s or (for <path>#<name>) in the spec
// of that path among specs.
func Lookup(specs []*Spec, s *Spec, embed string) (*Spec, *Config, error) {
	owner, name := s, embed
	if IsForeignEmbed(embed) {
		p, c, err := SplitForeignEmbed(embed)
		if err != nil {
			return nil, nil, err
		}
		owner, name = nil, c
		for _, o := range specs {
			if o.Path == p {
				owner = o
			}
		}
		if owner == nil {
			return nil, nil, fmt.Errorf("embeds %q: no spec specs/%s", embed, p)
		}
	}
	for i := range owner.Configs {
		if owner.Configs[i].Name == name {
			return owner, &owner.Configs[i], nil
		}
	}
	return nil, nil, fmt.Errorf("embeds %q: specs/%s has no config %q", embed, owner.Path, name)
}

// ResolveEmbeds checks the embeds of every config across specs: each names an existing config, no
// config embeds itself (directly or not), and no field name appears twice in a config's fields with
// those of its embedded configs.
func ResolveEmbeds(specs []*Spec) error {
	for _, s := range specs {
		for i := range s.Configs {
			c := &s.Configs[i]
			seen := map[string]string{}
			if err := collectFields(specs, s, c, seen, map[*Config]bool{}); err != nil {
				return &Error{File: "specs/" + s.Path, Line: c.Line, Msg: fmt.Sprintf("config %q: %v", c.Name, err)}
			}
		}
	}
	return nil
}

func collectFields(specs []*Spec, s *Spec, c *Config, seen map[string]string, path map[*Config]bool) error {
	if path[c] {
		return fmt.Errorf("embeds itself through %q", c.Name)
	}
	path[c] = true
	defer delete(path, c)
	for _, e := range c.Embeds {
		es, ec, err := Lookup(specs, s, e)
		if err != nil {
			return err
		}
		if err := collectFields(specs, es, ec, seen, path); err != nil {
			return err
		}
	}
	for _, f := range c.Fields {
		if prev, ok := seen[f.Name]; ok {
			return fmt.Errorf("field %q of %s is also in %s", f.Name, c.Name, prev)
		}
		seen[f.Name] = c.Name
	}
	return nil
}

// Sorted returns the specs ordered by Path.
func Sorted(specs []*Spec) []*Spec {
	out := append([]*Spec(nil), specs...)
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}
