package gen

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/monolith-go/monolith/tools/specgen/spec"
	"gopkg.in/yaml.v3"
)

// renderFormats emits format.go: per record a struct (with Pos, where its mapping starts, and At,
// where each key's value is), per enum field a string type with constants, Decode<Root> per
// format, and the strict decoders behind them (formatRuntime).
func renderFormats(s *spec.Spec, pkg string) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(header)
	fmt.Fprintf(&b, "\npackage %s\n\n", pkg)
	b.WriteString("import (\n\t\"bytes\"\n\t\"errors\"\n\t\"fmt\"\n\t\"io\"\n\t\"strconv\"\n\t\"strings\"\n\t\"unicode/utf8\"\n\n\t\"gopkg.in/yaml.v3\"\n)\n")
	for i := range s.Formats {
		f := &s.Formats[i]
		if err := renderFormat(&b, s, f); err != nil {
			return nil, fmt.Errorf("format %s: %w", f.Name, err)
		}
	}
	b.WriteString(formatRuntime)
	return gofmt("format.go", b.Bytes())
}

func renderFormat(b *bytes.Buffer, s *spec.Spec, f *spec.Format) error {
	root, _ := f.LookupRecord(f.Root)
	fmt.Fprintf(b, "\n// Decode%s decodes a %s file", root.Name, f.Name)
	if f.Doc != "" {
		fmt.Fprintf(b, " (%s)", strings.TrimSuffix(strings.TrimSpace(f.Doc), "."))
	}
	fmt.Fprintf(b, `, named file in
// errors, strictly: an unknown key (with the nearest known one), a duplicate key, a value of the
// wrong type, an enum value not listed, a missing required key or a value out of its range is an
// *Error "file:line:col: path: message". Absent keys take their defaults (format.md).
func Decode%[1]s(data []byte, file string) (*%[1]s, error) {
	d := &formatDecoder{file: file}
	n, err := d.document(data, %[2]q)
	if err != nil {
		return nil, err
	}
	out := new(%[1]s)
	if err := d.decode%[1]s(n, "", out); err != nil {
		return nil, err
	}
	return out, nil
}
`, root.Name, f.Name)
	for i := range f.Records {
		r := &f.Records[i]
		for j := range r.Fields {
			if fd := &r.Fields[j]; fd.Type == spec.FmtEnum {
				renderFormatEnum(b, r, fd)
			}
		}
		if err := renderRecord(b, f, r); err != nil {
			return fmt.Errorf("record %s: %w", r.Name, err)
		}
	}
	return nil
}

func renderFormatEnum(b *bytes.Buffer, r *spec.Record, fd *spec.FormatField) {
	t := fd.EnumType(r)
	fmt.Fprintf(b, "\n// %s is the %s of a %s: one of %s.\ntype %s string\n\n// The values of %s.\nconst (\n", t, fd.Name, r.Name, strings.Join(fd.OneOf, ", "), t, t)
	for _, v := range fd.OneOf {
		fmt.Fprintf(b, "\t%s%s %s = %q\n", t, spec.Camel(v), t, v)
	}
	fmt.Fprintf(b, ")\n\n// %sValues lists the values of %s in declaration order.\nvar %sValues = []%s{", t, t, t, t)
	for i, v := range fd.OneOf {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(t + spec.Camel(v))
	}
	b.WriteString("}\n")
}

// goFieldType is the Go type of a field of record r.
func goFieldType(r *spec.Record, fd *spec.FormatField) string {
	var t string
	switch fd.Type {
	case spec.FmtString:
		t = "string"
	case spec.FmtInt:
		t = "int"
	case spec.FmtFloat:
		t = "float64"
	case spec.FmtBool:
		t = "bool"
	case spec.FmtEnum:
		t = fd.EnumType(r)
	case spec.FmtRecord:
		t = fd.Record
	case spec.FmtScalars:
		return "[]string"
	case spec.FmtRecordList:
		return "[]" + fd.Record
	}
	if fd.Optional {
		return "*" + t
	}
	return t
}

func renderRecord(b *bytes.Buffer, f *spec.Format, r *spec.Record) error {
	b.WriteString("\n")
	if r.Doc != "" {
		comment(b, "", r.Name+": "+r.Doc)
	} else {
		fmt.Fprintf(b, "// %s is a record of the %s format.\n", r.Name, f.Name)
	}
	fmt.Fprintf(b, "type %s struct {\n", r.Name)
	for i := range r.Fields {
		fd := &r.Fields[i]
		if fd.Doc != "" {
			comment(b, "\t", fd.GoIdent()+": "+fd.Doc)
		}
		tag := fd.Name
		if fd.Optional {
			tag += ",omitempty"
		}
		fmt.Fprintf(b, "\t%s %s `yaml:%q`\n", fd.GoIdent(), goFieldType(r, fd), tag)
	}
	fmt.Fprintf(b, "\n\t// Pos is where the record's mapping is in its file.\n\tPos Pos `yaml:\"-\"`\n")
	fmt.Fprintf(b, "\t// At holds where each key's value is in the file.\n\tAt %sAt `yaml:\"-\"`\n}\n\n", r.Name)
	fmt.Fprintf(b, "// %sAt holds where the value of each key of a %s is in its file; a zero Pos: the key was absent.\ntype %sAt struct {\n", r.Name, r.Name, r.Name)
	for i := range r.Fields {
		fmt.Fprintf(b, "\t%s Pos\n", r.Fields[i].GoIdent())
	}
	b.WriteString("}\n\n")

	keys := make([]string, len(r.Fields))
	for i := range r.Fields {
		keys[i] = strconv.Quote(r.Fields[i].Name)
	}
	fmt.Fprintf(b, "var formatKeys%s = []string{%s}\n\n", r.Name, strings.Join(keys, ", "))
	for i := range r.Fields {
		fd := &r.Fields[i]
		if fd.Type == spec.FmtEnum {
			vals := make([]string, len(fd.OneOf))
			for j, v := range fd.OneOf {
				vals[j] = strconv.Quote(v)
			}
			fmt.Fprintf(b, "var formatValues%s = []string{%s}\n\n", fd.EnumType(r), strings.Join(vals, ", "))
		}
	}

	fmt.Fprintf(b, "func (d *formatDecoder) decode%s(n *yaml.Node, path string, out *%s) error {\n", r.Name, r.Name)
	fmt.Fprintf(b, "\tif err := d.mapping(n, path, %q); err != nil {\n\t\treturn err\n\t}\n\tout.Pos = formatPos(n)\n", "record "+r.Name)
	for i := range r.Fields {
		fd := &r.Fields[i]
		if fd.Default == nil {
			continue
		}
		lit, err := formatDefaultLiteral(r, fd)
		if err != nil {
			return fmt.Errorf("field %s: %w", fd.Name, err)
		}
		fmt.Fprintf(b, "\tout.%s = %s\n", fd.GoIdent(), lit)
	}
	b.WriteString("\tseen := map[string]*yaml.Node{}\n\tfor i := 0; i+1 < len(n.Content); i += 2 {\n\t\tk, v := n.Content[i], n.Content[i+1]\n")
	b.WriteString("\t\tif err := d.key(k, path, seen); err != nil {\n\t\t\treturn err\n\t\t}\n\t\tp := formatJoin(path, k.Value)\n\t\tswitch k.Value {\n")
	for i := range r.Fields {
		fd := &r.Fields[i]
		fmt.Fprintf(b, "\t\tcase %q:\n\t\t\tout.At.%s = formatPos(v)\n", fd.Name, fd.GoIdent())
		renderFieldDecode(b, r, fd)
	}
	fmt.Fprintf(b, "\t\tdefault:\n\t\t\treturn d.unknownKey(k, path, formatKeys%s)\n\t\t}\n\t}\n", r.Name)
	for i := range r.Fields {
		fd := &r.Fields[i]
		if fd.Required {
			fmt.Fprintf(b, "\tif seen[%q] == nil {\n\t\treturn d.missing(n, path, %q)\n\t}\n", fd.Name, fd.Name)
		} else if fd.Type == spec.FmtRecord && !fd.Optional {
			// An absent record is an empty mapping: its own defaults and required keys apply.
			fmt.Fprintf(b, "\tif seen[%q] == nil {\n\t\tif err := d.decode%s(&yaml.Node{Kind: yaml.MappingNode, Line: n.Line, Column: n.Column}, formatJoin(path, %q), &out.%s); err != nil {\n\t\t\treturn err\n\t\t}\n\t\tout.%s.Pos = Pos{}\n\t}\n",
				fd.Name, fd.Record, fd.Name, fd.GoIdent(), fd.GoIdent())
		}
	}
	b.WriteString("\treturn nil\n}\n")
	return nil
}

// renderFieldDecode emits the body of one key's case: decode v at path p into out.
func renderFieldDecode(b *bytes.Buffer, r *spec.Record, fd *spec.FormatField) {
	g := fd.GoIdent()
	ret := "\t\t\tif err != nil {\n\t\t\t\treturn err\n\t\t\t}\n"
	assign := func(expr string) {
		if fd.Optional {
			fmt.Fprintf(b, "\t\t\tx := %s\n\t\t\tout.%s = &x\n", expr, g)
		} else {
			fmt.Fprintf(b, "\t\t\tout.%s = %s\n", g, expr)
		}
	}
	bounds := func(verb string) {
		c := fd.Check
		if c == nil {
			return
		}
		if c.Min != nil {
			fmt.Fprintf(b, "\t\t\tif x < %s {\n\t\t\t\treturn d.errorf(v, p, \"%s is below the minimum %s\", x)\n\t\t\t}\n", num(*c.Min), verb, num(*c.Min))
		}
		if c.Max != nil {
			fmt.Fprintf(b, "\t\t\tif x > %s {\n\t\t\t\treturn d.errorf(v, p, \"%s is above the maximum %s\", x)\n\t\t\t}\n", num(*c.Max), verb, num(*c.Max))
		}
	}
	items := func(count string) {
		c := fd.Check
		if c == nil {
			return
		}
		least, most := "-1", "-1"
		if c.Min != nil {
			least = num(*c.Min)
		}
		if c.Max != nil {
			most = num(*c.Max)
		}
		fmt.Fprintf(b, "\t\t\tif err := d.items(v, p, %s, %s, %s); err != nil {\n\t\t\t\treturn err\n\t\t\t}\n", count, least, most)
	}
	switch fd.Type {
	case spec.FmtString, spec.FmtInt, spec.FmtFloat, spec.FmtBool:
		method := map[string]string{spec.FmtString: "str", spec.FmtInt: "integer", spec.FmtFloat: "number", spec.FmtBool: "boolean"}[fd.Type]
		fmt.Fprintf(b, "\t\t\tx, err := d.%s(v, p)\n%s", method, ret)
		bounds(map[string]string{spec.FmtInt: "%d", spec.FmtFloat: "%v"}[fd.Type])
		if fd.Optional {
			fmt.Fprintf(b, "\t\t\tout.%s = &x\n", g)
		} else {
			fmt.Fprintf(b, "\t\t\tout.%s = x\n", g)
		}
	case spec.FmtEnum:
		fmt.Fprintf(b, "\t\t\ts, err := d.enum(v, p, formatValues%s)\n%s", fd.EnumType(r), ret)
		assign(fd.EnumType(r) + "(s)")
	case spec.FmtScalars:
		fmt.Fprintf(b, "\t\t\tx, err := d.scalars(v, p)\n%s", ret)
		items("len(x)")
		fmt.Fprintf(b, "\t\t\tout.%s = x\n", g)
	case spec.FmtRecord:
		if fd.Optional {
			fmt.Fprintf(b, "\t\t\tout.%s = new(%s)\n\t\t\tif err := d.decode%s(v, p, out.%s); err != nil {\n\t\t\t\treturn err\n\t\t\t}\n", g, fd.Record, fd.Record, g)
		} else {
			fmt.Fprintf(b, "\t\t\tif err := d.decode%s(v, p, &out.%s); err != nil {\n\t\t\t\treturn err\n\t\t\t}\n", fd.Record, g)
		}
	case spec.FmtRecordList:
		fmt.Fprintf(b, "\t\t\tnodes, err := d.list(v, p)\n%s", ret)
		items("len(nodes)")
		fmt.Fprintf(b, "\t\t\tout.%s = make([]%s, len(nodes))\n\t\t\tfor j, it := range nodes {\n\t\t\t\tif err := d.decode%s(it, formatItem(p, j), &out.%s[j]); err != nil {\n\t\t\t\t\treturn err\n\t\t\t\t}\n\t\t\t}\n",
			g, fd.Record, fd.Record, g)
	}
}

// num writes a check bound as a Go constant (integral bounds without a fraction).
func num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// formatDefaultLiteral is a default as a Go expression of the field's type.
func formatDefaultLiteral(r *spec.Record, fd *spec.FormatField) (string, error) {
	d := fd.Default
	switch fd.Type {
	case spec.FmtString:
		return strconv.Quote(d.Value), nil
	case spec.FmtInt:
		var v int64
		if err := d.Decode(&v); err != nil {
			return "", err
		}
		return strconv.FormatInt(v, 10), nil
	case spec.FmtFloat:
		var v float64
		if err := d.Decode(&v); err != nil {
			return "", err
		}
		return num(v), nil
	case spec.FmtBool:
		var v bool
		if err := d.Decode(&v); err != nil {
			return "", err
		}
		return strconv.FormatBool(v), nil
	case spec.FmtEnum:
		return fd.EnumType(r) + spec.Camel(d.Value), nil
	case spec.FmtScalars:
		items := []*yaml.Node{d}
		if d.Kind == yaml.SequenceNode {
			items = d.Content
		}
		q := make([]string, len(items))
		for i, it := range items {
			q[i] = strconv.Quote(it.Value)
		}
		return "[]string{" + strings.Join(q, ", ") + "}", nil
	}
	return "", fmt.Errorf("type %s has no default", fd.Type)
}
