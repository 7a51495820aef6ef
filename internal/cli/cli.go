// Package cli is what the project's commands share around kong: parsing the generated flag
// structs with the project's exit statuses, and reporting errors as one "name: message" line.
//
// Exit statuses: 0 success, 1 a failure at run time, 2 a bad command line or bad input
// (UsageError).
package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/alecthomas/kong"
)

// Parse parses args into flags (a kong struct) for the command name. done is true when the
// command must stop now with code: after --help (kong's code), for a bad command line (badExit,
// the error printed to stderr as "name: error"), or when the flag struct itself is broken (1).
func Parse(name, description string, flags any, args []string, stdout, stderr io.Writer, badExit int) (code int, done bool) {
	exit := -1
	parser, err := kong.New(flags,
		kong.Name(name),
		kong.Description(description),
		kong.Writers(stdout, stderr),
		kong.Exit(func(code int) { exit = code }),
	)
	if err != nil {
		fmt.Fprintln(stderr, name+": internal error:", err)
		return 1, true
	}
	if _, err := parser.Parse(args); err != nil {
		fmt.Fprintln(stderr, name+":", err)
		return badExit, true
	}
	if exit >= 0 { // --help
		return exit, true
	}
	return 0, false
}

// UsageError marks an error of the command line or of its input: exit status 2.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Usage wraps err as a UsageError.
func Usage(err error) error { return UsageError{err} }

// Exit reports err on stderr as one "name: message" line (without repeating a "name: " the
// message already starts with) and returns the exit status: 0 for nil, 2 for a UsageError, 1
// otherwise.
func Exit(name string, err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, name+": "+strings.TrimPrefix(err.Error(), name+": "))
	if errors.As(err, new(UsageError)) {
		return 2
	}
	return 1
}
