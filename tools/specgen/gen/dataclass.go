package gen

import (
	"bytes"
	"embed"
	"fmt"
	"strconv"
	"strings"

	"github.com/monolith-go/monolith/tools/specgen/spec"
)

// The runtime of the generated dataclass codecs (json.loads / json.dumps as Python has them, the
// readers, Held) is emitted as gen/spec/pydataclass from these sources, with its tests.
//
//go:embed pydataclass/*.go.txt
var pydataclassSources embed.FS

// pydataclassDir is the runtime package's directory.
const pydataclassDir = OutDir + "/pydataclass"

// emitPydataclass adds the runtime package to out and returns its directory.
func emitPydataclass(out Files) (string, error) {
	entries, err := pydataclassSources.ReadDir("pydataclass")
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		src, err := pydataclassSources.ReadFile("pydataclass/" + e.Name())
		if err != nil {
			return "", err
		}
		name := strings.TrimSuffix(e.Name(), ".txt")
		formatted, err := gofmt(name, append([]byte(header+"\n"), src...))
		if err != nil {
			return "", err
		}
		out[pydataclassDir+"/"+name] = formatted
	}
	return pydataclassDir, nil
}

// renderDataclasses renders the enums and dataclasses of s: types, defaults, the field dict as the
// reference holds it (PyDict), Serialize and Deserialize<Name>.
func renderDataclasses(s *spec.Spec, pkg string) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(header)
	fmt.Fprintf(&b, "\npackage %s\n\nimport (\n", pkg)
	if len(s.Enums) > 0 {
		b.WriteString("\t\"strconv\"\n")
	}
	if hasCodec(s) {
		fmt.Fprintf(&b, "\n\t%q\n", ModulePath+"/"+pydataclassDir)
	}
	b.WriteString(")\n\n")
	for i := range s.Enums {
		if err := renderEnum(&b, &s.Enums[i]); err != nil {
			return nil, fmt.Errorf("enum %s: %w", s.Enums[i].Name, err)
		}
	}
	for i := range s.Dataclasses {
		if err := renderDataclass(&b, s, &s.Dataclasses[i]); err != nil {
			return nil, fmt.Errorf("dataclass %s: %w", s.Dataclasses[i].Name, err)
		}
	}
	return gofmt("dataclasses.go", b.Bytes())
}

func hasCodec(s *spec.Spec) bool {
	for i := range s.Dataclasses {
		if s.Dataclasses[i].HasCodec() {
			return true
		}
	}
	return false
}

func docOr(text, fallback string) string {
	if strings.TrimSpace(text) == "" {
		return fallback
	}
	return text
}

func renderEnum(b *bytes.Buffer, e *spec.Enum) error {
	comment(b, "", docOr(e.Doc, e.Name+" is the reference's enum "+e.Name+"."))
	fmt.Fprintf(b, "type %s int\n\n", e.Name)
	fmt.Fprintf(b, "// Members of %s (a member sharing an earlier member's value is its alias).\nconst (\n", e.Name)
	var values []int
	first := map[int]string{}
	for i := range e.Members {
		m := &e.Members[i]
		n, err := m.Int()
		if err != nil {
			return err
		}
		comment(b, "\t", docOr(m.Doc, fmt.Sprintf("%s is %s.%s.", m.GoName, e.Name, m.Name)))
		fmt.Fprintf(b, "\t%s %s = %d\n", m.GoName, e.Name, n)
		if _, dup := first[n]; !dup {
			first[n] = m.Name
			values = append(values, n)
		}
	}
	b.WriteString(")\n\n")
	var lits []string
	for _, v := range values {
		lits = append(lits, strconv.Itoa(v))
	}
	fmt.Fprintf(b, "// %sValues are the members' values, as %s(value) accepts them.\nvar %sValues = []int{%s}\n\n",
		e.Name, e.Name, e.Name, strings.Join(lits, ", "))
	fmt.Fprintf(b, "// String is the member's name (an alias's first member), or the number.\nfunc (e %s) String() string {\n\tswitch e {\n", e.Name)
	for _, v := range values {
		fmt.Fprintf(b, "\tcase %d:\n\t\treturn %q\n", v, first[v])
	}
	b.WriteString("\t}\n\treturn strconv.Itoa(int(e))\n}\n\n")
	return nil
}

// dcField is a field with what its generated code needs.
type dcField struct {
	*spec.DataclassField
	goName string
	goType string // the struct field's type
	ptr    bool   // nil is None
	held   bool   // None (or an int in a float field) is kept in Held
}

func dcFields(s *spec.Spec, c *spec.Dataclass) ([]dcField, error) {
	var out []dcField
	for i := range c.Fields {
		f := &c.Fields[i]
		d := dcField{DataclassField: f, goName: f.GoIdent()}
		none := f.IsNone()
		switch f.Type {
		case spec.DCStr:
			d.goType = "string"
			d.ptr = none && f.GoType != "string"
		case spec.DCInt:
			d.goType = "int"
			if f.GoType != "" {
				d.goType = f.GoType
			}
			d.ptr = none
		case spec.DCFloat:
			d.goType = "float64"
		case spec.DCBool:
			d.goType = "bool"
		case spec.DCIntList:
			d.goType = "[]int"
		case spec.DCBytes:
			d.goType = "[]byte"
		case spec.DCStrDict:
			d.goType = "[]" + f.Item.GoName
		case spec.DCEnum:
			d.goType = f.Enum
		}
		if d.ptr {
			d.goType = "*" + d.goType
		}
		d.held = c.HasCodec() && !d.ptr && f.Type != spec.DCStrDict
		out = append(out, d)
	}
	return out, nil
}

// goDefault is the Go literal of a field's default ("" when it is the Go zero value).
func goDefault(s *spec.Spec, f dcField) (string, error) {
	if f.IsNone() {
		return "", nil
	}
	v := f.Default.Value
	switch f.Type {
	case spec.DCStr:
		if v == "" {
			return "", nil
		}
		return strconv.Quote(v), nil
	case spec.DCInt, spec.DCFloat:
		if n, err := strconv.ParseFloat(v, 64); err == nil && n == 0 {
			return "", nil
		}
		return v, nil
	case spec.DCBool:
		if v == "false" {
			return "", nil
		}
		return "true", nil
	case spec.DCIntList:
		return "[]int{}", nil
	case spec.DCBytes:
		return "[]byte{}", nil
	case spec.DCEnum:
		e, _ := s.LookupEnum(f.Enum)
		m, _ := e.Member(v)
		return m.GoName, nil
	}
	return "", fmt.Errorf("field %s: no Go default for %s", f.Name, f.Type)
}

// pyDefaultOf is the default as Python writes it, for comments.
func pyDefaultOf(f *spec.DataclassField) string {
	if f.IsNone() {
		return "None"
	}
	switch f.Type {
	case spec.DCStr:
		return "'" + f.Default.Value + "'"
	case spec.DCBool:
		return map[string]string{"true": "True", "false": "False"}[f.Default.Value]
	case spec.DCIntList:
		return "field(default_factory=list)"
	case spec.DCBytes:
		return "b''"
	case spec.DCEnum:
		return f.Enum + "." + f.Default.Value
	}
	return f.Default.Value
}

func pyAnnotation(f *spec.DataclassField) string {
	switch f.Type {
	case spec.DCIntList:
		return "List[int]"
	case spec.DCStrDict:
		return "Dict[str, str]"
	case spec.DCEnum:
		return f.Enum
	}
	return f.Type
}

func receiver(name string) string { return strings.ToLower(name[:1]) }

func renderDataclass(b *bytes.Buffer, s *spec.Spec, c *spec.Dataclass) error {
	fields, err := dcFields(s, c)
	if err != nil {
		return err
	}
	needsHeld := false
	for _, f := range fields {
		needsHeld = needsHeld || f.held
	}
	for _, f := range fields {
		if f.Type == spec.DCStrDict {
			fmt.Fprintf(b, "// %s is one item of %s.%s, in the dict's order.\ntype %s struct {\n\t%s, %s string\n}\n\n",
				f.Item.GoName, c.Name, f.Name, f.Item.GoName, f.Item.Key, f.Item.Value)
		}
	}
	what := "dataclass_json dataclass"
	if !c.HasCodec() {
		what = "dataclass"
	}
	comment(b, "", docOr(c.Doc, c.Name+" is the reference's "+what+" "+c.Name+"."))
	fmt.Fprintf(b, "type %s struct {\n", c.Name)
	for _, f := range fields {
		note := fmt.Sprintf("%s is %s: %s = %s.", f.goName, f.Name, pyAnnotation(f.DataclassField), pyDefaultOf(f.DataclassField))
		if f.ptr {
			note += " Nil is None."
		} else if f.GoType == "string" {
			note += ` "" stands for None.`
		}
		if f.Doc != "" {
			note += " " + f.Doc
		}
		comment(b, "\t", note)
		fmt.Fprintf(b, "\t%s %s\n", f.goName, f.goType)
	}
	if needsHeld {
		b.WriteString("\t// held keeps the values a decoded record's fields held in Python that the Go fields keep in\n\t// another form (None where the default is not None, an int in a float field).\n\theld *pydataclass.Held\n")
	}
	b.WriteString("}\n\n")
	var defs []string
	for _, f := range fields {
		lit, err := goDefault(s, f)
		if err != nil {
			return err
		}
		if lit != "" {
			defs = append(defs, f.goName+": "+lit)
		}
	}
	if !c.HasCodec() && len(defs) == 0 {
		return nil
	}
	fmt.Fprintf(b, "// New%s returns a %s with the dataclass's defaults.\nfunc New%s() %s { return %s{%s} }\n\n",
		c.Name, c.Name, c.Name, c.Name, c.Name, strings.Join(defs, ", "))
	if !c.HasCodec() {
		return nil
	}
	return renderCodec(b, c, fields, needsHeld)
}

func renderCodec(b *bytes.Buffer, c *spec.Dataclass, fields []dcField, needsHeld bool) error {
	r := receiver(c.Name)
	fmt.Fprintf(b, "// PyDict is the record as the reference's dataclass holds it (to_dict), fields in declaration order.\nfunc (%s %s) PyDict() pydataclass.Value {\n", r, c.Name)
	if needsHeld {
		fmt.Fprintf(b, "\th := %s.held\n", r)
	}
	for _, f := range fields {
		if f.Type == spec.DCStrDict {
			fmt.Fprintf(b, "\tvar %s []pydataclass.StrItem\n\tif %s.%s != nil {\n\t\t%s = make([]pydataclass.StrItem, len(%s.%s))\n\t\tfor i, it := range %s.%s {\n\t\t\t%s[i] = pydataclass.StrItem{Key: it.%s, Val: it.%s}\n\t\t}\n\t}\n",
				lowerCamel(f.goName), r, f.goName, lowerCamel(f.goName), r, f.goName, r, f.goName, lowerCamel(f.goName), f.Item.Key, f.Item.Value)
		}
	}
	b.WriteString("\treturn pydataclass.DictOf(\n")
	for _, f := range fields {
		fmt.Fprintf(b, "\t\tpydataclass.Member{Key: %q, Val: %s},\n", f.Name, pyValueExpr(r, f))
	}
	b.WriteString("\t)\n}\n\n")
	fmt.Fprintf(b, "// Serialize is the reference's serialize(): to_json() as UTF-8, json.dumps with its defaults.\nfunc (%s %s) Serialize() []byte { return %s.PyDict().JSON() }\n\n", r, c.Name, r)

	fmt.Fprintf(b, "// Deserialize%s is the reference's %s.deserialize (from_json): absent keys keep their defaults,\n", c.Name, c.Name)
	b.WriteString("// unknown keys are ignored; a value outside the field's Python type is a *pydataclass.Error naming\n// the field, JSON that is not an object the AttributeError dataclasses-json raises.\n")
	fmt.Fprintf(b, "func Deserialize%s(data []byte) (%s, error) {\n", c.Name, c.Name)
	ctor := c.Name + "{}"
	if hasDefaults(fields) {
		ctor = "New" + c.Name + "()"
	}
	fmt.Fprintf(b, "\tx := %s\n\to, err := pydataclass.Decode(%q, data)\n\tif err != nil {\n\t\treturn x, err\n\t}\n", ctor, c.Name)
	var conv []string
	for _, f := range fields {
		if f.Type == spec.DCEnum || (f.Type == spec.DCInt && f.GoType != "") {
			fmt.Fprintf(b, "\t%s := int(x.%s)\n", lowerCamel(f.goName), f.goName)
			conv = append(conv, fmt.Sprintf("\tx.%s = %s(%s)\n", f.goName, strings.TrimPrefix(f.goType, "*"), lowerCamel(f.goName)))
		}
	}
	b.WriteString("\terr = pydataclass.First(\n")
	for _, f := range fields {
		fmt.Fprintf(b, "\t\t%s,\n", readExpr(f))
	}
	b.WriteString("\t)\n")
	for _, cv := range conv {
		b.WriteString(cv)
	}
	if needsHeld {
		b.WriteString("\tx.held = o.Held()\n")
	}
	b.WriteString("\treturn x, err\n}\n\n")
	return nil
}

func hasDefaults(fields []dcField) bool {
	for _, f := range fields {
		if !f.IsNone() {
			return true
		}
	}
	return false
}

func lowerCamel(s string) string {
	i := 0
	for i < len(s) && s[i] >= 'A' && s[i] <= 'Z' {
		i++
	}
	switch {
	case i == 0:
		return s
	case i == 1 || i == len(s):
		return strings.ToLower(s[:i]) + s[i:]
	}
	return strings.ToLower(s[:i-1]) + s[i-1:] // IPv6Address -> ipv6Address, PType -> pType
}

// pyValueExpr is the Go expression of the field's value as Python holds it.
func pyValueExpr(r string, f dcField) string {
	x := r + "." + f.goName
	switch f.Type {
	case spec.DCStr:
		if f.ptr {
			return "pydataclass.OptStrV(" + x + ")"
		}
		return fmt.Sprintf("h.Value(%q, %s, pydataclass.StrV(%s))", f.Name, x, x)
	case spec.DCInt:
		if f.ptr {
			return "pydataclass.OptIntV(" + x + ")"
		}
		if f.GoType != "" {
			return fmt.Sprintf("h.Value(%q, int(%s), pydataclass.IntV(int(%s)))", f.Name, x, x)
		}
		return fmt.Sprintf("h.Value(%q, %s, pydataclass.IntV(%s))", f.Name, x, x)
	case spec.DCFloat:
		return fmt.Sprintf("h.Value(%q, %s, pydataclass.FloatV(%s))", f.Name, x, x)
	case spec.DCBool:
		return fmt.Sprintf("h.Value(%q, %s, pydataclass.BoolV(%s))", f.Name, x, x)
	case spec.DCIntList:
		return fmt.Sprintf("h.Value(%q, %s == nil, pydataclass.IntsV(%s))", f.Name, x, x)
	case spec.DCBytes:
		return fmt.Sprintf("h.Value(%q, %s == nil, pydataclass.BytesV(%s))", f.Name, x, x)
	case spec.DCStrDict:
		return "pydataclass.StrDictV(" + lowerCamel(f.goName) + ")"
	}
	return fmt.Sprintf("h.Value(%q, int(%s), pydataclass.IntV(int(%s)))", f.Name, x, x) // enum
}

// readExpr is the reader call filling the field from the decoded object.
func readExpr(f dcField) string {
	x := "&x." + f.goName
	switch f.Type {
	case spec.DCStr:
		if f.ptr {
			return fmt.Sprintf("o.OptStr(%q, %s)", f.Name, x)
		}
		return fmt.Sprintf("o.Str(%q, %s)", f.Name, x)
	case spec.DCInt:
		if f.GoType != "" { // never a pointer (validated)
			return fmt.Sprintf("o.Int(%q, &%s)", f.Name, lowerCamel(f.goName))
		}
		if f.ptr {
			return fmt.Sprintf("o.OptInt(%q, %s)", f.Name, x)
		}
		return fmt.Sprintf("o.Int(%q, %s)", f.Name, x)
	case spec.DCFloat:
		return fmt.Sprintf("o.Float(%q, %s)", f.Name, x)
	case spec.DCBool:
		return fmt.Sprintf("o.Bool(%q, %s)", f.Name, x)
	case spec.DCIntList:
		return fmt.Sprintf("o.Ints(%q, %s)", f.Name, x)
	case spec.DCBytes:
		return fmt.Sprintf("o.Bytes(%q, %s)", f.Name, x)
	case spec.DCStrDict:
		return fmt.Sprintf("o.StrDict(%q, func(items []pydataclass.StrItem) {\n\t\t\tif items == nil {\n\t\t\t\tx.%s = nil\n\t\t\t\treturn\n\t\t\t}\n\t\t\tx.%s = make([]%s, len(items))\n\t\t\tfor i, it := range items {\n\t\t\t\tx.%s[i] = %s{%s: it.Key, %s: it.Val}\n\t\t\t}\n\t\t})",
			f.Name, f.goName, f.goName, f.Item.GoName, f.goName, f.Item.GoName, f.Item.Key, f.Item.Value)
	}
	return fmt.Sprintf("o.Enum(%q, %q, &%s, %sValues)", f.Name, f.Enum, lowerCamel(f.goName), f.Enum)
}
