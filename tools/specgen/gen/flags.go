package gen

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/monolith-go/monolith/tools/specgen/spec"
)

func renderFlags(s *spec.Spec, pkg string) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(header)
	uses := map[string]bool{}
	for _, fs := range s.Flags {
		for _, f := range fs.Flags {
			uses[f.Type] = true
		}
	}
	fmt.Fprintf(&b, "\npackage %s\n\n", pkg)
	var imports []string
	if uses[spec.FlagDuration] {
		imports = append(imports, `"time"`)
	}
	if uses[spec.FlagIgnored] || uses[spec.FlagVersionOrValue] {
		imports = append([]string{`"fmt"`}, imports...)
	}
	if uses[spec.FlagVersion] || uses[spec.FlagIgnored] || uses[spec.FlagVersionOrValue] {
		imports = append(imports, "", `"github.com/alecthomas/kong"`)
	}
	if len(imports) > 0 {
		fmt.Fprintf(&b, "import (\n\t%s\n)\n\n", strings.Join(imports, "\n\t"))
	}
	if uses[spec.FlagIgnored] {
		b.WriteString(ignoredSource)
	}
	if uses[spec.FlagVersionOrValue] {
		b.WriteString(versionOrValueSource)
	}
	for i := range s.Flags {
		fs := &s.Flags[i]
		if fs.Doc != "" {
			comment(&b, "", fs.GoName+": "+fs.Doc)
		} else {
			fmt.Fprintf(&b, "// %s are the flags of the %s command (github.com/alecthomas/kong tags).\n", fs.GoName, fs.Command)
		}
		fmt.Fprintf(&b, "type %s struct {\n", fs.GoName)
		for j := range fs.Flags {
			f := &fs.Flags[j]
			goType := map[string]string{spec.FlagString: "string", spec.FlagPath: "string", spec.FlagEnum: "string",
				spec.FlagInt: "int", spec.FlagUint: "uint64", spec.FlagFloat: "float64", spec.FlagBool: "bool", spec.FlagDuration: "time.Duration",
				spec.FlagVersion: "kong.VersionFlag", spec.FlagIgnored: "Ignored", spec.FlagVersionOrValue: "VersionOrValue"}[f.Type]
			if f.Optional {
				goType = "*" + goType
			}
			help := f.Help
			if f.Default != nil && f.Default.Tag != "!!null" && f.Default.Value != "" {
				// kong interpolates ${default} so --help shows it.
				help += " (default: ${default})"
			}
			tags := []string{fmt.Sprintf("name:%q", f.Name), fmt.Sprintf("help:%q", help)}
			if f.Default != nil && f.Default.Tag != "!!null" {
				tags = append(tags, fmt.Sprintf("default:%q", f.Default.Value))
			}
			if f.Env != "" {
				tags = append(tags, fmt.Sprintf("env:%q", f.Env))
			}
			if f.Type == spec.FlagEnum {
				tags = append(tags, fmt.Sprintf("enum:%q", strings.Join(f.Enum, ",")))
			}
			if f.Type == spec.FlagPath {
				tags = append(tags, `placeholder:"PATH"`)
			}
			if g := fs.HelpGroup(f); g != "" {
				tags = append(tags, fmt.Sprintf("group:%q", g))
			}
			if f.Short != "" {
				tags = append(tags, fmt.Sprintf("short:%q", f.Short))
			}
			if len(f.Aliases) > 0 {
				tags = append(tags, fmt.Sprintf("aliases:%q", strings.Join(f.Aliases, ",")))
			}
			fmt.Fprintf(&b, "\t%s %s `%s`\n", f.GoIdent(), goType, strings.Join(tags, " "))
		}
		b.WriteString("}\n\n")
	}
	return gofmt("flags.go", b.Bytes())
}

// ignoredSource is the type of flags of type ignored.
const ignoredSource = `// Ignored is a flag accepted for compatibility and ignored: --name and --name=anything.
type Ignored string

// Decode takes the value when one is attached (--name=v), else nothing.
func (i *Ignored) Decode(ctx *kong.DecodeContext) error {
	if ctx.Scan.Peek().Type == kong.FlagValueToken {
		*i = Ignored(fmt.Sprint(ctx.Scan.Pop().Value))
	}
	return nil
}

// IsBool lets the flag stand alone.
func (Ignored) IsBool() bool { return true }

`

// versionOrValueSource is the type of flags of type version_or_value.
const versionOrValueSource = `// VersionOrValue is a --version that alone asks for the build (PrintVersion) and with a value
// (another program's --version=v1.2) is accepted and ignored.
type VersionOrValue string

// PrintVersion is the value of the flag given without a value.
const PrintVersion VersionOrValue = "\x00print"

// Decode takes the value when one is attached (--version=v), else PrintVersion.
func (v *VersionOrValue) Decode(ctx *kong.DecodeContext) error {
	if ctx.Scan.Peek().Type == kong.FlagValueToken {
		*v = VersionOrValue(fmt.Sprint(ctx.Scan.Pop().Value))
		return nil
	}
	*v = PrintVersion
	return nil
}

// IsBool lets the flag stand alone.
func (VersionOrValue) IsBool() bool { return true }

`
