// Package errkind classifies errors by what went wrong, so callers (and the parity harness, which maps
// each Python exception class of the reference to one kind) can tell failures apart without parsing
// messages.
package errkind

import (
	"errors"
	"fmt"
)

// Kind says what class of failure an error is.
type Kind int

const (
	// Unknown is the kind of an error that carries no kind.
	Unknown Kind = iota
	// Precondition: an invariant the caller must hold was violated (the reference asserts).
	Precondition
	// Value: an argument or configured value has the right type but an unacceptable value.
	Value
	// Type: a value has the wrong type or is missing where one is required.
	Type
	// Runtime: the operation cannot be carried out in the current state or combination of inputs.
	Runtime
	// Attribute: a required attribute is unset (the reference fails on a None attribute).
	Attribute
	// NotFound: a named thing (file, node, key) does not exist.
	NotFound
	// Generic: a failure the reference raises as a bare Exception.
	Generic
)

var names = map[Kind]string{
	Unknown:      "Unknown",
	Precondition: "Precondition",
	Value:        "Value",
	Type:         "Type",
	Runtime:      "Runtime",
	Attribute:    "Attribute",
	NotFound:     "NotFound",
	Generic:      "Generic",
}

func (k Kind) String() string {
	if n, ok := names[k]; ok {
		return n
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Parse returns the kind named s (as printed by String).
func Parse(s string) (Kind, error) {
	for k, n := range names {
		if n == s {
			return k, nil
		}
	}
	return Unknown, fmt.Errorf("errkind: unknown kind %q", s)
}

type kindError struct {
	kind Kind
	err  error
}

func (e *kindError) Error() string { return e.err.Error() }
func (e *kindError) Unwrap() error { return e.err }

// New returns an error of kind k with a formatted message (%w is honoured).
func New(k Kind, format string, args ...any) error {
	return &kindError{kind: k, err: fmt.Errorf(format, args...)}
}

// Wrap marks err with kind k; it returns nil for a nil err.
func Wrap(k Kind, err error) error {
	if err == nil {
		return nil
	}
	return &kindError{kind: k, err: err}
}

// Of returns the kind of the outermost classified error in err's chain, or Unknown.
func Of(err error) Kind {
	var ke *kindError
	if errors.As(err, &ke) {
		return ke.kind
	}
	return Unknown
}
