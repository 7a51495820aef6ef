package harness

import (
	"fmt"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// pyKinds is the one table mapping the reference's exception classes to the errkind a Go error must
// carry for the case to pass. Subclasses are listed explicitly (Python's hierarchy is not modelled).
var pyKinds = map[string]errkind.Kind{
	"AssertionError": errkind.Precondition,
	"ValueError":     errkind.Value,
	// json.JSONDecodeError subclasses ValueError: malformed serialized input is a bad value.
	"JSONDecodeError": errkind.Value,
	"TypeError":       errkind.Type,
	"RuntimeError":    errkind.Runtime,
	// RecursionError subclasses RuntimeError (an include cycle in conf_parser recurses until it).
	"RecursionError": errkind.Runtime,
	"AttributeError": errkind.Attribute,
	"KeyError":       errkind.NotFound,
	// IndexError: a sequence has no such position, the list analogue of KeyError.
	"IndexError":        errkind.NotFound,
	"FileNotFoundError": errkind.NotFound,
	// kazoo's NoNodeError: the ZooKeeper node does not exist.
	"NoNodeError": errkind.NotFound,
	// kazoo's NodeExistsError: the create conflicts with the current tree, i.e. the operation cannot
	// be carried out in the current state (errkind has no "exists" kind, and the value is not wrong).
	"NodeExistsError": errkind.Runtime,
	"Exception":       errkind.Generic,
	// ZeroDivisionError: arithmetic on a bad input value (a zero divisor, e.g. an MPI local size of 0).
	"ZeroDivisionError": errkind.Value,
	// The C++ references' std::invalid_argument (the hash table optimizers' factory): a bad value.
	"std::invalid_argument": errkind.Value,
}

// KindOfPython returns the errkind that stands for the Python exception class pyType.
func KindOfPython(pyType string) (errkind.Kind, error) {
	k, ok := pyKinds[pyType]
	if !ok {
		return errkind.Unknown, fmt.Errorf("no errkind for Python exception %s (add it to pyKinds in parity/harness/errors.go)", pyType)
	}
	return k, nil
}
