package spec

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// Dataclass is a Python dataclass whose Go struct is generated, with the reference's JSON codec
// (to_json / from_json of dataclasses_json) unless JSON is false.
type Dataclass struct {
	// Name is the Python class and the Go type.
	Name string `yaml:"name" required:"true"`
	Doc  string `yaml:"doc"`
	// JSON false: a plain @dataclass (no dataclass_json): the struct only.
	JSON   *bool            `yaml:"json"`
	Fields []DataclassField `yaml:"fields" required:"true"`
	Line   int              `yaml:"-"`
}

// HasCodec reports whether the class is a dataclass_json class (the default).
func (c *Dataclass) HasCodec() bool { return c.JSON == nil || *c.JSON }

// Dataclass field types, named after the Python annotations.
const (
	DCStr     = "str"
	DCInt     = "int"
	DCFloat   = "float"
	DCBool    = "bool"
	DCIntList = "int_list" // List[int]
	DCBytes   = "bytes"
	DCStrDict = "str_dict" // Dict[str, str], in its order
	DCEnum    = "enum"     // an enum.Enum of the spec (field enum)
)

// DataclassField is one field, in declaration order (the order JSON is written in).
type DataclassField struct {
	Name   string `yaml:"name" required:"true"`
	GoName string `yaml:"go_name"`
	Type   string `yaml:"type" required:"true"`
	// Enum names the spec's enum of an enum field.
	Enum string `yaml:"enum"`
	// GoType is the spec's enum an int field's Go type is (a Python int holding a proto enum), or
	// "string" for a str field of a class without codec whose None Go writes as "".
	GoType string `yaml:"go_type"`
	// Default is the Python default: null (None), a scalar, [] for int_list, "" for bytes, a member
	// name for an enum.
	Default *yaml.Node `yaml:"default"`
	// Item names the Go struct holding one item of a str_dict and its two fields.
	Item *DictItem `yaml:"item"`
	Doc  string    `yaml:"doc"`
	Line int       `yaml:"-"`
}

// DictItem is the Go struct of a str_dict's items: {GoName: {Key string, Value string}}.
type DictItem struct {
	GoName string `yaml:"go_name" required:"true"`
	Key    string `yaml:"key" required:"true"`
	Value  string `yaml:"value" required:"true"`
}

// GoIdent is the field's Go name: GoName, or the CamelCase of Name.
func (f *DataclassField) GoIdent() string {
	if f.GoName != "" {
		return f.GoName
	}
	return Camel(f.Name)
}

// IsNone reports whether the field's default is None.
func (f *DataclassField) IsNone() bool {
	return f.Default == nil || (f.Default.Kind == yaml.ScalarNode && f.Default.Tag == "!!null")
}

// Enum is a Python enum.Enum (or a proto enum held in int fields); members sharing a value are
// aliases of the first (EventType.UNKNOWN = 1 is PORTAL).
type Enum struct {
	Name    string      `yaml:"name" required:"true"`
	Doc     string      `yaml:"doc"`
	Members []EnumValue `yaml:"members" required:"true"`
	Line    int         `yaml:"-"`
}

// EnumValue is one member.
type EnumValue struct {
	Name   string     `yaml:"name" required:"true"`
	Value  *yaml.Node `yaml:"value" required:"true"`
	GoName string     `yaml:"go_name" required:"true"`
	Doc    string     `yaml:"doc"`
	Line   int        `yaml:"-"`
}

// Int is the member's value.
func (v *EnumValue) Int() (int, error) {
	var n int
	if v.Value.Kind != yaml.ScalarNode || v.Value.Tag != "!!int" || v.Value.Decode(&n) != nil {
		return 0, fmt.Errorf("member %s: value %q is not an int", v.Name, v.Value.Value)
	}
	return n, nil
}

// Member finds an enum's member by name.
func (e *Enum) Member(name string) (*EnumValue, bool) {
	for i := range e.Members {
		if e.Members[i].Name == name {
			return &e.Members[i], true
		}
	}
	return nil, false
}

// LookupEnum finds an enum of s by name.
func (s *Spec) LookupEnum(name string) (*Enum, bool) {
	for i := range s.Enums {
		if s.Enums[i].Name == name {
			return &s.Enums[i], true
		}
	}
	return nil, false
}

// validateDataclasses checks the enums and dataclasses of s.
func validateDataclasses(s *Spec, errAt func(int, string, ...any) error) error {
	types := map[string]int{}
	declare := func(name string, line int) error {
		if prev, ok := types[name]; ok {
			return errAt(line, "type %q declared twice (first at line %d)", name, prev)
		}
		types[name] = line
		return nil
	}
	for i := range s.Enums {
		e := &s.Enums[i]
		if err := declare(e.Name, e.Line); err != nil {
			return err
		}
		names := map[string]bool{}
		for j := range e.Members {
			m := &e.Members[j]
			if names[m.Name] {
				return errAt(m.Line, "enum %q: member %q declared twice", e.Name, m.Name)
			}
			names[m.Name] = true
			if _, err := m.Int(); err != nil {
				return errAt(m.Line, "enum %q: %v", e.Name, err)
			}
			if err := declare(m.GoName, m.Line); err != nil {
				return err
			}
		}
	}
	for i := range s.Dataclasses {
		c := &s.Dataclasses[i]
		if err := declare(c.Name, c.Line); err != nil {
			return err
		}
		seen := map[string]int{}
		for j := range c.Fields {
			f := &c.Fields[j]
			if prev, ok := seen[f.Name]; ok {
				return errAt(f.Line, "dataclass %q: field %q declared twice (first at line %d)", c.Name, f.Name, prev)
			}
			seen[f.Name] = f.Line
			if err := validateDCField(s, c, f); err != nil {
				return errAt(f.Line, "dataclass %q field %q: %v", c.Name, f.Name, err)
			}
			if f.Item != nil {
				if err := declare(f.Item.GoName, f.Line); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

var dcTypes = []string{DCStr, DCInt, DCFloat, DCBool, DCIntList, DCBytes, DCStrDict, DCEnum}

func validateDCField(s *Spec, c *Dataclass, f *DataclassField) error {
	known := false
	for _, t := range dcTypes {
		known = known || t == f.Type
	}
	if !known {
		return fmt.Errorf("unknown type %q (want %s)", f.Type, strings.Join(dcTypes, ", "))
	}
	d := f.Default
	scalar := d == nil || d.Kind == yaml.ScalarNode
	if !scalar && !(f.Type == DCIntList && d.Kind == yaml.SequenceNode) {
		return fmt.Errorf("default must be a scalar")
	}
	if (f.Enum != "") != (f.Type == DCEnum) {
		return fmt.Errorf("enum is given exactly for type enum")
	}
	if (f.Item != nil) != (f.Type == DCStrDict) {
		return fmt.Errorf("item is given exactly for type str_dict")
	}
	switch f.GoType {
	case "":
	case "string":
		if f.Type != DCStr || c.HasCodec() {
			return fmt.Errorf("go_type string is for str fields of a class without codec (json: false)")
		}
	default:
		if f.Type != DCInt {
			return fmt.Errorf("go_type names an enum for int fields only")
		}
		if _, ok := s.LookupEnum(f.GoType); !ok {
			return fmt.Errorf("go_type %q is no enum of this spec", f.GoType)
		}
		if f.IsNone() {
			return fmt.Errorf("an int field of go_type %s has a default that is not None", f.GoType)
		}
	}
	if f.IsNone() {
		switch f.Type {
		case DCStr, DCInt, DCStrDict:
			return nil
		}
		return fmt.Errorf("a None default is supported for str, int and str_dict fields, not %s", f.Type)
	}
	switch f.Type {
	case DCStr:
		if d.Tag != "!!str" {
			return fmt.Errorf("default %q is not a str", d.Value)
		}
	case DCInt:
		var n int
		if d.Tag != "!!int" || d.Decode(&n) != nil {
			return fmt.Errorf("default %q is not an int", d.Value)
		}
	case DCFloat:
		var x float64
		if (d.Tag != "!!int" && d.Tag != "!!float") || d.Decode(&x) != nil {
			return fmt.Errorf("default %q is not a number", d.Value)
		}
	case DCBool:
		if d.Tag != "!!bool" {
			return fmt.Errorf("default %q is not a bool", d.Value)
		}
	case DCIntList:
		if d.Kind != yaml.SequenceNode || len(d.Content) != 0 {
			return fmt.Errorf("the default of an int_list is [] (default_factory=list)")
		}
	case DCBytes:
		if d.Tag != "!!str" || d.Value != "" {
			return fmt.Errorf("the default of bytes is \"\" (b'')")
		}
	case DCStrDict:
		return fmt.Errorf("the default of a str_dict is null")
	case DCEnum:
		e, ok := s.LookupEnum(f.Enum)
		if !ok {
			return fmt.Errorf("enum %q is no enum of this spec", f.Enum)
		}
		if _, ok := e.Member(d.Value); !ok {
			return fmt.Errorf("default %q is no member of %s", d.Value, f.Enum)
		}
	}
	return nil
}
