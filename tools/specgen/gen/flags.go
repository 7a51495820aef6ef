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
	needTime := false
	for _, fs := range s.Flags {
		for _, f := range fs.Flags {
			if f.Type == spec.FlagDuration {
				needTime = true
			}
		}
	}
	fmt.Fprintf(&b, "\npackage %s\n\n", pkg)
	if needTime {
		b.WriteString("import \"time\"\n\n")
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
				spec.FlagInt: "int", spec.FlagFloat: "float64", spec.FlagBool: "bool", spec.FlagDuration: "time.Duration"}[f.Type]
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
