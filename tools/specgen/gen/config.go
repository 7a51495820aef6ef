package gen

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"github.com/monolith-go/monolith/tools/specgen/spec"
)

func fieldType(f *spec.Field) string {
	t := spec.GoScalarType(f.Type)
	if f.Optional && !isCollection(f) {
		return "*" + t
	}
	return t
}

// isCollection reports whether f's Go type is nil-able itself (a slice or a map), so that optional
// needs no pointer.
func isCollection(f *spec.Field) bool {
	return f.Type == spec.TypeStringList || f.Type == spec.TypeStringMap
}

func typeConst(t string) string {
	return map[string]string{spec.TypeBool: "fieldspec.Bool", spec.TypeInt: "fieldspec.Int",
		spec.TypeFloat: "fieldspec.Float", spec.TypeString: "fieldspec.String",
		spec.TypeStringList: "fieldspec.StringList", spec.TypeStringMap: "fieldspec.StringMap"}[t]
}

// pyDefault renders the default as Python prints it, for documentation and reports.
func pyDefault(f *spec.Field) string {
	n := f.Default
	if n == nil {
		if f.Optional {
			return "None"
		}
		return map[string]string{spec.TypeBool: "False", spec.TypeInt: "0", spec.TypeFloat: "0.0",
			spec.TypeString: "''", spec.TypeStringList: "[]", spec.TypeStringMap: "{}"}[f.Type]
	}
	if n.Tag == "!!null" {
		return "None"
	}
	switch f.Type {
	case spec.TypeBool:
		if n.Value == "true" {
			return "True"
		}
		return "False"
	case spec.TypeString:
		return "'" + n.Value + "'"
	case spec.TypeStringList:
		var items []string
		for _, c := range n.Content {
			items = append(items, "'"+c.Value+"'")
		}
		return "[" + strings.Join(items, ", ") + "]"
	}
	return n.Value
}

func comment(b *bytes.Buffer, indent, text string) {
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		fmt.Fprintf(b, "%s// %s\n", indent, strings.TrimRight(line, " "))
	}
}

// allFields returns c's fields with embedded configs' fields first, as Python dataclass inheritance
// orders them; embedded configs of other specs are looked up in all.
func allFields(all []*spec.Spec, s *spec.Spec, c *spec.Config) ([]*spec.Field, error) {
	var out []*spec.Field
	for _, e := range c.Embeds {
		es, ec, err := spec.Lookup(all, s, e)
		if err != nil {
			return nil, err
		}
		fs, err := allFields(all, es, ec)
		if err != nil {
			return nil, err
		}
		out = append(out, fs...)
	}
	for i := range c.Fields {
		out = append(out, &c.Fields[i])
	}
	return out, nil
}

// embedded is how generated code refers to an embedded config: its Go type, and its field name in
// the embedding struct.
type embedded struct {
	typ, field string
	foreign    bool
}

func embeddedConfigs(all []*spec.Spec, s *spec.Spec, c *spec.Config) ([]embedded, map[string]string, error) {
	var out []embedded
	imports := map[string]string{}
	for _, e := range c.Embeds {
		if !spec.IsForeignEmbed(e) {
			out = append(out, embedded{typ: e, field: e})
			continue
		}
		es, ec, err := spec.Lookup(all, s, e)
		if err != nil {
			return nil, nil, err
		}
		pkg := PackageName(es)
		imports[pkg] = ModulePath + "/" + PackageDir(es)
		out = append(out, embedded{typ: pkg + "." + ec.Name, field: ec.Name, foreign: true})
	}
	return out, imports, nil
}

func renderConfigs(all []*spec.Spec, s *spec.Spec, pkg string) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(header)
	imports := map[string]string{}
	for i := range s.Configs {
		_, im, err := embeddedConfigs(all, s, &s.Configs[i])
		if err != nil {
			return nil, fmt.Errorf("config %s: %w", s.Configs[i].Name, err)
		}
		for k, v := range im {
			imports[k] = v
		}
	}
	stringsImport := ""
	if usesOneOf(s) {
		stringsImport = "\t\"strings\"\n"
	}
	var local []string
	for name, path := range imports {
		local = append(local, fmt.Sprintf("\t%s %q\n", name, path))
	}
	sort.Strings(local)
	fmt.Fprintf(&b, "\npackage %s\n\nimport (\n\t\"fmt\"\n%s\n\t\"%s/gen/spec/fieldspec\"\n%s)\n\n", pkg, stringsImport, ModulePath, strings.Join(local, ""))
	b.WriteString("func ptr[T any](v T) *T { return &v }\n\n")
	for i := range s.Configs {
		c := &s.Configs[i]
		if err := renderConfig(&b, all, s, c); err != nil {
			return nil, fmt.Errorf("config %s: %w", c.Name, err)
		}
	}
	return gofmt("config.go", b.Bytes())
}

func renderConfig(b *bytes.Buffer, all []*spec.Spec, s *spec.Spec, c *spec.Config) error {
	embeds, _, err := embeddedConfigs(all, s, c)
	if err != nil {
		return err
	}
	if c.Doc != "" {
		comment(b, "", c.Name+": "+c.Doc)
	} else {
		fmt.Fprintf(b, "// %s is declared in specs/%s.\n", c.Name, s.Path)
	}
	fmt.Fprintf(b, "type %s struct {\n", c.Name)
	for _, e := range embeds {
		fmt.Fprintf(b, "\t%s\n", e.typ)
	}
	for i := range c.Fields {
		f := &c.Fields[i]
		doc := f.Name
		if f.Doc != "" {
			doc += ": " + f.Doc
		}
		doc += " (default " + pyDefault(f) + ")"
		comment(b, "\t", doc)
		fmt.Fprintf(b, "\t%s %s\n", f.GoIdent(), fieldType(f))
	}
	b.WriteString("}\n\n")

	// Defaults.
	fmt.Fprintf(b, "// Default%s returns %s with the spec's defaults.\nfunc Default%s() %s {\n\treturn %s{\n", c.Name, c.Name, c.Name, c.Name, c.Name)
	for _, e := range embeds {
		fmt.Fprintf(b, "\t\t%s: %s(),\n", e.field, strings.Replace(e.typ, e.field, "Default"+e.field, 1))
	}
	for i := range c.Fields {
		f := &c.Fields[i]
		lit, err := spec.DefaultLiteral(f)
		if err != nil {
			return fmt.Errorf("field %s: %w", f.Name, err)
		}
		if lit != "nil" && lit != "0" && lit != "false" && lit != `""` {
			fmt.Fprintf(b, "\t\t%s: %s,\n", f.GoIdent(), lit)
		}
	}
	b.WriteString("\t}\n}\n\n")

	// Field table.
	fields, err := allFields(all, s, c)
	if err != nil {
		return err
	}
	fmt.Fprintf(b, "// %sFields describes %s's fields in declaration order (embedded configs first).\nvar %sFields = []fieldspec.Field{\n", c.Name, c.Name, c.Name)
	for _, f := range fields {
		fmt.Fprintf(b, "\t{Name: %q, GoName: %q, Type: %s, Optional: %v, Default: %q", f.Name, f.GoIdent(), typeConst(f.Type), f.Optional, pyDefault(f))
		if len(f.Aliases) > 0 {
			fmt.Fprintf(b, ", Aliases: %#v", f.Aliases)
		}
		if len(f.Env) > 0 {
			fmt.Fprintf(b, ", Env: %#v, Precedence: %q", f.Env, f.Precedence)
		}
		if f.Expr != "" {
			fmt.Fprintf(b, ", Expr: %q", f.Expr)
		}
		if f.Check != nil && len(f.Check.OneOf) > 0 {
			fmt.Fprintf(b, ", OneOf: %#v", f.Check.OneOf)
		}
		if f.Doc != "" {
			fmt.Fprintf(b, ", Doc: %q", strings.TrimSpace(f.Doc))
		}
		b.WriteString("},\n")
	}
	b.WriteString("}\n\n")

	// Set.
	fmt.Fprintf(b, "// Set assigns the field named name (its config key). v must have the field's Go value type;\n// nil unsets an optional field.\nfunc (c *%s) Set(name string, v any) error {\n\tif ok, err := c.setField(name, v); ok {\n\t\treturn err\n\t}\n\treturn fmt.Errorf(\"%s: no field %%q\", name)\n}\n\n", c.Name, c.Name)
	fmt.Fprintf(b, "func (c *%s) setField(name string, v any) (bool, error) {\n\tswitch name {\n", c.Name)
	for i := range c.Fields {
		f := &c.Fields[i]
		t := spec.GoScalarType(f.Type)
		fmt.Fprintf(b, "\tcase %q:\n", f.Name)
		switch {
		case isCollection(f):
			fmt.Fprintf(b, "\t\tif v == nil {\n\t\t\tc.%s = nil\n\t\t\treturn true, nil\n\t\t}\n", f.GoIdent())
			fmt.Fprintf(b, "\t\tx, ok := v.(%s)\n\t\tif !ok {\n\t\t\treturn true, fmt.Errorf(\"%s.%s: want %s, got %%T\", v)\n\t\t}\n\t\tc.%s = x\n", t, c.Name, f.Name, t, f.GoIdent())
		case f.Optional:
			fmt.Fprintf(b, "\t\tif v == nil {\n\t\t\tc.%s = nil\n\t\t\treturn true, nil\n\t\t}\n", f.GoIdent())
			fmt.Fprintf(b, "\t\tx, ok := v.(%s)\n\t\tif !ok {\n\t\t\treturn true, fmt.Errorf(\"%s.%s: want %s, got %%T\", v)\n\t\t}\n\t\tc.%s = &x\n", t, c.Name, f.Name, t, f.GoIdent())
		default:
			fmt.Fprintf(b, "\t\tx, ok := v.(%s)\n\t\tif !ok {\n\t\t\treturn true, fmt.Errorf(\"%s.%s: want %s, got %%T\", v)\n\t\t}\n\t\tc.%s = x\n", t, c.Name, f.Name, t, f.GoIdent())
		}
		b.WriteString("\t\treturn true, nil\n")
	}
	b.WriteString("\t}\n")
	for _, e := range embeds {
		if e.foreign {
			// Another package's config: only its exported Get and Set are reachable.
			fmt.Fprintf(b, "\tif _, ok := c.%s.Get(name); ok {\n\t\treturn true, c.%s.Set(name, v)\n\t}\n", e.field, e.field)
			continue
		}
		fmt.Fprintf(b, "\tif ok, err := c.%s.setField(name, v); ok {\n\t\treturn true, err\n\t}\n", e.field)
	}
	b.WriteString("\treturn false, nil\n}\n\n")

	// Get.
	fmt.Fprintf(b, "// Get returns the field named name; an unset optional field gives nil.\nfunc (c *%s) Get(name string) (any, bool) {\n\tswitch name {\n", c.Name)
	for i := range c.Fields {
		f := &c.Fields[i]
		fmt.Fprintf(b, "\tcase %q:\n", f.Name)
		if f.Optional && !isCollection(f) {
			fmt.Fprintf(b, "\t\tif c.%s == nil {\n\t\t\treturn nil, true\n\t\t}\n\t\treturn *c.%s, true\n", f.GoIdent(), f.GoIdent())
		} else if isCollection(f) {
			fmt.Fprintf(b, "\t\tif c.%s == nil {\n\t\t\treturn nil, true\n\t\t}\n\t\treturn c.%s, true\n", f.GoIdent(), f.GoIdent())
		} else {
			fmt.Fprintf(b, "\t\treturn c.%s, true\n", f.GoIdent())
		}
	}
	b.WriteString("\t}\n")
	for _, e := range embeds {
		fmt.Fprintf(b, "\tif v, ok := c.%s.Get(name); ok {\n\t\treturn v, true\n\t}\n", e.field)
	}
	b.WriteString("\treturn nil, false\n}\n\n")

	// Load.
	fmt.Fprintf(b, `// Load sets every field that raw holds a value for (under its name, else its first alias
// present), converting with conv. It returns the keys it used, so callers can report the rest as unknown.
func (c *%[1]s) Load(raw map[string]fieldspec.RawValue, conv fieldspec.Converter) (map[string]bool, error) {
	used := map[string]bool{}
	for i := range %[1]sFields {
		f := &%[1]sFields[i]
		rv, ok := raw[f.Name]
		if !ok {
			for _, a := range f.Aliases {
				if rv, ok = raw[a]; ok {
					break
				}
			}
		}
		if !ok {
			continue
		}
		used[rv.Key] = true
		v, err := conv.Convert(f, rv)
		if err != nil {
			return used, err
		}
		if err := c.Set(f.Name, v); err != nil {
			return used, err
		}
	}
	return used, nil
}

`, c.Name)

	// Validate.
	fmt.Fprintf(b, "// Validate checks the rules the spec declares (one_of, min, max); a violation is a\n// *fieldspec.FieldError naming the field.\nfunc (c *%s) Validate() error {\n", c.Name)
	for _, e := range embeds {
		fmt.Fprintf(b, "\tif err := c.%s.Validate(); err != nil {\n\t\treturn err\n\t}\n", e.field)
	}
	for i := range c.Fields {
		f := &c.Fields[i]
		if f.Check == nil {
			continue
		}
		deref := "c." + f.GoIdent()
		guard := ""
		if f.Optional && !isCollection(f) {
			guard = "c." + f.GoIdent() + " != nil && "
			deref = "*c." + f.GoIdent()
		}
		if len(f.Check.OneOf) > 0 {
			if f.Type != spec.TypeString {
				return fmt.Errorf("field %s: one_of applies to strings", f.Name)
			}
			var conds []string
			for _, v := range f.Check.OneOf {
				conds = append(conds, fmt.Sprintf("!strings.EqualFold(%s, %q)", deref, v))
			}
			fmt.Fprintf(b, "\tif %s%s {\n\t\treturn &fieldspec.FieldError{Field: %q, Err: fmt.Errorf(\"%%q is not one of %s\", %s)}\n\t}\n",
				guard, strings.Join(conds, " && "), f.Name, strings.Join(f.Check.OneOf, ", "), deref)
		}
		if f.Check.Min != nil {
			if f.Type != spec.TypeInt && f.Type != spec.TypeFloat {
				return fmt.Errorf("field %s: min applies to numbers", f.Name)
			}
			fmt.Fprintf(b, "\tif %sfloat64(%s) < %v {\n\t\treturn &fieldspec.FieldError{Field: %q, Err: fmt.Errorf(\"%%v is below the minimum %v\", %s)}\n\t}\n", guard, deref, *f.Check.Min, f.Name, *f.Check.Min, deref)
		}
		if f.Check.Max != nil {
			if f.Type != spec.TypeInt && f.Type != spec.TypeFloat {
				return fmt.Errorf("field %s: max applies to numbers", f.Name)
			}
			fmt.Fprintf(b, "\tif %sfloat64(%s) > %v {\n\t\treturn &fieldspec.FieldError{Field: %q, Err: fmt.Errorf(\"%%v is above the maximum %v\", %s)}\n\t}\n", guard, deref, *f.Check.Max, f.Name, *f.Check.Max, deref)
		}
	}
	b.WriteString("\treturn nil\n}\n\n")
	return nil
}

// usesOneOf reports whether the generated Validate compares strings (and so imports strings).
func usesOneOf(s *spec.Spec) bool {
	for _, c := range s.Configs {
		for _, f := range c.Fields {
			if f.Check != nil && len(f.Check.OneOf) > 0 {
				return true
			}
		}
	}
	return false
}
