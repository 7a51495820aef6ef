package gen

// fieldspecSource is emitted as gen/spec/fieldspec: the types the generated config code shares.
const fieldspecSource = header + `
// Package fieldspec describes config fields declared in specs/**.yaml, for the generated config code
// and the hand-written loaders that give the values their meaning.
package fieldspec

// Type is the value type of a field.
type Type int

const (
	Bool Type = iota
	Int
	Float
	String
	StringList
	// StringMap is a str -> str dict (map[string]string, nil for None).
	StringMap
)

func (t Type) String() string {
	switch t {
	case Bool:
		return "bool"
	case Int:
		return "int"
	case Float:
		return "float"
	case String:
		return "string"
	case StringList:
		return "string_list"
	case StringMap:
		return "string_map"
	}
	return "unknown"
}

// Field describes one config field.
type Field struct {
	// Name is the key in config files (the Python attribute name).
	Name string
	// GoName is the Go struct field.
	GoName string
	Type   Type
	// Optional fields may be unset (Python None).
	Optional bool
	// Default is the default as Python would print it (None, True, 0, 'latest').
	Default string
	// Aliases are legacy keys read when Name is absent.
	Aliases []string
	// Env lists environment variables feeding the field, in precedence order.
	Env []string
	// Precedence says how Env combines with the file: env, file or derived (by hand-written code).
	Precedence string
	// Expr is "arithmetic" when numbers are arithmetic expressions.
	Expr string
	// OneOf lists accepted values (case-insensitive), if restricted.
	OneOf []string
	Doc   string
}

// RawValue is what a config file gave for a key.
type RawValue struct {
	// Key is the key as written (Name or an alias).
	Key string
	// Values holds one value, or several when the key was repeated.
	Values []string
	File   string
	Line   int
}

// FieldError is a field whose value breaks a rule of its spec.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// Converter turns a raw value into the Go value of a field (nil for None on optional fields).
type Converter interface {
	Convert(f *Field, raw RawValue) (any, error)
}
`
