package spec

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// Format is a YAML file format that users write (a feature schema): records of typed fields, from
// which specgen generates the Go structs, a strict decoder and a Markdown reference.
type Format struct {
	// Name is the format's name in snake_case (feature_schema); docs and errors use it.
	Name string `yaml:"name" required:"true"`
	Doc  string `yaml:"doc"`
	// Example is a whole file of the format, shown in its reference (format.md).
	Example string `yaml:"example"`
	// Root is the record a whole file is; Decode<Root> is generated for it.
	Root    string   `yaml:"root" required:"true"`
	Records []Record `yaml:"records" required:"true"`
	Line    int      `yaml:"-"`
}

// Record is one mapping of a format: a Go struct.
type Record struct {
	// Name is the Go type (CamelCase).
	Name   string        `yaml:"name" required:"true"`
	Doc    string        `yaml:"doc"`
	Fields []FormatField `yaml:"fields" required:"true"`
	Line   int           `yaml:"-"`
}

// Format field types.
const (
	FmtString = "string"
	FmtInt    = "int"
	FmtFloat  = "float"
	FmtBool   = "bool"
	// FmtEnum is a string that must be one of OneOf; Go gets a named string type with constants.
	FmtEnum = "enum"
	// FmtScalars is a YAML scalar or a list of scalars, kept as their text ([]string): values whose
	// meaning depends on another field (a default of the feature's kind).
	FmtScalars = "scalars"
	// FmtRecord is a nested record (Record names it).
	FmtRecord = "record"
	// FmtRecordList is a list of records (Record names them).
	FmtRecordList = "record_list"
)

var formatTypes = []string{FmtString, FmtInt, FmtFloat, FmtBool, FmtEnum, FmtScalars, FmtRecord, FmtRecordList}

// FormatField is one key of a record.
type FormatField struct {
	// Name is the YAML key.
	Name   string `yaml:"name" required:"true"`
	GoName string `yaml:"go_name"`
	Type   string `yaml:"type" required:"true"`
	// OneOf lists an enum's values (case-sensitive).
	OneOf []string `yaml:"one_of"`
	// Record names the record of a record or record_list field.
	Record string `yaml:"record"`
	// Optional fields are pointers (nil slices for lists) in Go: nil when the key is absent.
	Optional bool `yaml:"optional"`
	// Required fields must be given.
	Required bool `yaml:"required"`
	// Default is the value of an absent key (neither optional nor required); absent means the
	// type's zero value, or for a record an empty mapping (its own defaults).
	Default *yaml.Node   `yaml:"default"`
	Check   *FormatCheck `yaml:"check"`
	Doc     string       `yaml:"doc"`
	Line    int          `yaml:"-"`
}

// FormatCheck bounds a number, or the item count of a list (record_list, scalars).
type FormatCheck struct {
	Min  *float64 `yaml:"min"`
	Max  *float64 `yaml:"max"`
	Line int      `yaml:"-"`
}

// GoIdent is the field's Go name: GoName, or the CamelCase of Name.
func (f *FormatField) GoIdent() string {
	if f.GoName != "" {
		return f.GoName
	}
	return Camel(f.Name)
}

// EnumType is the Go type of an enum field: <record><field> (FeatureKind).
func (f *FormatField) EnumType(r *Record) string { return r.Name + f.GoIdent() }

// IsList reports whether the field holds a list (its check bounds the item count).
func (f *FormatField) IsList() bool { return f.Type == FmtScalars || f.Type == FmtRecordList }

// LookupRecord finds a record of the format by name.
func (f *Format) LookupRecord(name string) (*Record, bool) {
	for i := range f.Records {
		if f.Records[i].Name == name {
			return &f.Records[i], true
		}
	}
	return nil, false
}

// Names reserved in a generated format file: its runtime types, and the fields every record gets.
var (
	reservedTypes  = map[string]bool{"Pos": true, "Error": true}
	reservedFields = map[string]bool{"Pos": true, "At": true}
	goIdentRE      = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
	enumValueRE    = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	formatNameRE   = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
)

// validateFormats checks the formats of s: names, types, defaults, checks, and that records
// neither hold themselves by value nor go unused.
func validateFormats(s *Spec, errAt func(int, string, ...any) error) error {
	formats := map[string]int{}
	types := map[string]int{}
	declare := func(name string, line int) error {
		if reservedTypes[name] {
			return errAt(line, "type %q is reserved in generated format code", name)
		}
		if prev, ok := types[name]; ok {
			return errAt(line, "type %q declared twice (first at line %d)", name, prev)
		}
		types[name] = line
		return nil
	}
	// The package's other generated types.
	for _, c := range s.Configs {
		types[c.Name] = c.Line
	}
	for _, c := range s.Dataclasses {
		types[c.Name] = c.Line
	}
	for _, e := range s.Enums {
		types[e.Name] = e.Line
	}
	for _, fs := range s.Flags {
		types[fs.GoName] = fs.Line
	}
	for i := range s.Formats {
		f := &s.Formats[i]
		if !formatNameRE.MatchString(f.Name) {
			return errAt(f.Line, "format %q: want a snake_case name", f.Name)
		}
		if prev, ok := formats[f.Name]; ok {
			return errAt(f.Line, "format %q: duplicate (first at line %d)", f.Name, prev)
		}
		formats[f.Name] = f.Line
		for j := range f.Records {
			r := &f.Records[j]
			if !goIdentRE.MatchString(r.Name) {
				return errAt(r.Line, "format %q record %q: want an exported Go type name", f.Name, r.Name)
			}
			for _, name := range []string{r.Name, r.Name + "At"} {
				if err := declare(name, r.Line); err != nil {
					return err
				}
			}
		}
		if _, ok := f.LookupRecord(f.Root); !ok {
			return errAt(f.Line, "format %q: root %q is no record of the format", f.Name, f.Root)
		}
		for j := range f.Records {
			r := &f.Records[j]
			keys := map[string]int{}
			goNames := map[string]int{}
			for k := range r.Fields {
				fd := &r.Fields[k]
				if prev, ok := keys[fd.Name]; ok {
					return errAt(fd.Line, "record %q: duplicate key %q (first at line %d)", r.Name, fd.Name, prev)
				}
				keys[fd.Name] = fd.Line
				g := fd.GoIdent()
				if !goIdentRE.MatchString(g) || reservedFields[g] {
					return errAt(fd.Line, "record %q field %q: Go name %q is not an exported identifier, or is reserved (Pos, At)", r.Name, fd.Name, g)
				}
				if prev, ok := goNames[g]; ok {
					return errAt(fd.Line, "record %q field %q: Go name %q also used at line %d", r.Name, fd.Name, g, prev)
				}
				goNames[g] = fd.Line
				if err := validateFormatField(f, fd); err != nil {
					return errAt(fd.Line, "record %q field %q: %v", r.Name, fd.Name, err)
				}
				if fd.Type == FmtEnum {
					if err := declare(fd.EnumType(r), fd.Line); err != nil {
						return err
					}
					for _, v := range fd.OneOf {
						if err := declare(fd.EnumType(r)+Camel(v), fd.Line); err != nil {
							return err
						}
					}
					if err := declare(fd.EnumType(r)+"Values", fd.Line); err != nil {
						return err
					}
				}
			}
		}
		if err := checkRecordGraph(f, errAt); err != nil {
			return err
		}
	}
	return nil
}

func validateFormatField(f *Format, fd *FormatField) error {
	known := false
	for _, t := range formatTypes {
		known = known || t == fd.Type
	}
	if !known {
		return fmt.Errorf("unknown type %q (want %s)", fd.Type, strings.Join(formatTypes, ", "))
	}
	if (len(fd.OneOf) > 0) != (fd.Type == FmtEnum) {
		return fmt.Errorf("one_of is given exactly for type enum")
	}
	seen := map[string]bool{}
	for _, v := range fd.OneOf {
		if !enumValueRE.MatchString(v) {
			return fmt.Errorf("enum value %q: want snake_case", v)
		}
		if seen[v] {
			return fmt.Errorf("enum value %q listed twice", v)
		}
		seen[v] = true
	}
	isRecord := fd.Type == FmtRecord || fd.Type == FmtRecordList
	if (fd.Record != "") != isRecord {
		return fmt.Errorf("record is given exactly for types record and record_list")
	}
	if isRecord {
		if _, ok := f.LookupRecord(fd.Record); !ok {
			return fmt.Errorf("record %q is no record of format %s", fd.Record, f.Name)
		}
	}
	if fd.Optional && fd.Required {
		return fmt.Errorf("optional and required are exclusive")
	}
	if fd.Default != nil {
		switch {
		case fd.Required:
			return fmt.Errorf("a required field has no default")
		case fd.Optional:
			return fmt.Errorf("an optional field has no default (it is nil when absent)")
		case isRecord:
			return fmt.Errorf("a %s has no default (an absent record is decoded as an empty mapping)", fd.Type)
		}
		if err := checkFormatDefault(fd); err != nil {
			return err
		}
	}
	if c := fd.Check; c != nil {
		switch fd.Type {
		case FmtInt, FmtFloat, FmtScalars, FmtRecordList:
		default:
			return fmt.Errorf("check applies to int, float, scalars and record_list fields, not %s", fd.Type)
		}
		if c.Min == nil && c.Max == nil {
			return fmt.Errorf("check without min or max")
		}
		integral := fd.Type != FmtFloat
		for _, b := range []*float64{c.Min, c.Max} {
			if b != nil && (math.IsNaN(*b) || math.IsInf(*b, 0) || (integral && *b != math.Trunc(*b))) {
				return fmt.Errorf("check bound %v: want a finite %s", *b, map[bool]string{true: "integer", false: "number"}[integral])
			}
		}
		if c.Min != nil && c.Max != nil && *c.Min > *c.Max {
			return fmt.Errorf("check min %v is above max %v", *c.Min, *c.Max)
		}
		if fd.IsList() && c.Min != nil && *c.Min < 0 {
			return fmt.Errorf("check min %v: a list has at least 0 items", *c.Min)
		}
	}
	return nil
}

// checkFormatDefault checks that a default is a value of the field's type (and within its check).
func checkFormatDefault(fd *FormatField) error {
	d := fd.Default
	if fd.Type == FmtScalars {
		items := []*yaml.Node{d}
		if d.Kind == yaml.SequenceNode {
			items = d.Content
		}
		for _, it := range items {
			if it.Kind != yaml.ScalarNode || it.Tag == "!!null" {
				return fmt.Errorf("default of scalars: want a scalar or a list of scalars")
			}
		}
		return checkBounds(fd, float64(len(items)))
	}
	if d.Kind != yaml.ScalarNode || d.Tag == "!!null" {
		return fmt.Errorf("default must be a scalar, not null")
	}
	switch fd.Type {
	case FmtInt:
		var n int64
		if d.Tag != "!!int" || d.Decode(&n) != nil {
			return fmt.Errorf("default %q is not an int", d.Value)
		}
		return checkBounds(fd, float64(n))
	case FmtFloat:
		var x float64
		if (d.Tag != "!!int" && d.Tag != "!!float") || d.Decode(&x) != nil {
			return fmt.Errorf("default %q is not a number", d.Value)
		}
		return checkBounds(fd, x)
	case FmtBool:
		if d.Tag != "!!bool" {
			return fmt.Errorf("default %q is not a bool", d.Value)
		}
	case FmtEnum:
		for _, v := range fd.OneOf {
			if v == d.Value {
				return nil
			}
		}
		return fmt.Errorf("default %q is not one of %s", d.Value, strings.Join(fd.OneOf, ", "))
	}
	return nil
}

func checkBounds(fd *FormatField, v float64) error {
	if c := fd.Check; c != nil {
		if (c.Min != nil && v < *c.Min) || (c.Max != nil && v > *c.Max) {
			return fmt.Errorf("default %v is outside the check's bounds", v)
		}
	}
	return nil
}

// checkRecordGraph rejects records that hold themselves by value (an infinite struct: a cycle of
// record fields that are not optional) and records that the root does not reach.
func checkRecordGraph(f *Format, errAt func(int, string, ...any) error) error {
	const (
		visiting = 1
		done     = 2
	)
	state := map[string]int{}
	var visit func(r *Record, path []string) error
	visit = func(r *Record, path []string) error {
		switch state[r.Name] {
		case visiting:
			return errAt(r.Line, "format %q: record %q holds itself by value (%s); make a field on the way optional or a record_list", f.Name, r.Name, strings.Join(append(path, r.Name), " -> "))
		case done:
			return nil
		}
		state[r.Name] = visiting
		for i := range r.Fields {
			fd := &r.Fields[i]
			if fd.Type != FmtRecord || fd.Optional {
				continue
			}
			next, _ := f.LookupRecord(fd.Record)
			if err := visit(next, append(path, r.Name)); err != nil {
				return err
			}
		}
		state[r.Name] = done
		return nil
	}
	for i := range f.Records {
		if err := visit(&f.Records[i], nil); err != nil {
			return err
		}
	}
	reached := map[string]bool{}
	var reach func(name string)
	reach = func(name string) {
		if reached[name] {
			return
		}
		reached[name] = true
		r, _ := f.LookupRecord(name)
		for _, fd := range r.Fields {
			if fd.Record != "" {
				reach(fd.Record)
			}
		}
	}
	reach(f.Root)
	var unused []string
	for _, r := range f.Records {
		if !reached[r.Name] {
			unused = append(unused, r.Name)
		}
	}
	sort.Strings(unused)
	if len(unused) > 0 {
		r, _ := f.LookupRecord(unused[0])
		return errAt(r.Line, "format %q: record %q is not reachable from the root %q", f.Name, r.Name, f.Root)
	}
	return nil
}
