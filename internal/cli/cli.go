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
	"log/slog"
	"net"
	"strings"

	"github.com/alecthomas/kong"

	clispec "github.com/monolith-go/monolith/gen/spec/go/cli"
	"github.com/monolith-go/monolith/internal/buildinfo"
)

// Common are the flags every command of the project has besides its own (the specs'): the build
// it is (--version) and the format of its log (--log_format), as specs/go/cli.yaml declares them.
// Embed it in the flag struct.
type Common struct {
	clispec.VersionFlags
	LogFlags
}

// LogFlags is --log_format alone, for a command whose --version means something else (fake_tfs
// takes TF Serving's command line).
type LogFlags struct{ clispec.LogFlags }

// Logger is the command's log on w at level, in the --log_format the command line chose.
func (c LogFlags) Logger(w io.Writer, level slog.Leveler) *slog.Logger {
	return NewLogger(w, c.LogFormat, level)
}

// DefaultLogger is the command's log on w at level (a slog level name: debug, info, warn, error)
// in the --log_format the command line chose, made slog's default so that packages logging through
// the default log in the same format. A level that does not parse is a usage error.
func (c LogFlags) DefaultLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, Usage(err)
	}
	log := c.Logger(w, l)
	slog.SetDefault(log)
	return log, nil
}

// NewLogger is a log on w in format ("json", else text) at level (nil: info).
func NewLogger(w io.Writer, format string, level slog.Leveler) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// VersionLine is what --version prints: "name version (rev ..., time, go version)".
func VersionLine(name string) string { return name + " " + buildinfo.Version() }

// Options are the kong options every command of the project parses with: its name, description,
// writers, exit hook and the version --version prints.
func Options(name, description string, stdout, stderr io.Writer, exit func(int)) []kong.Option {
	return []kong.Option{
		kong.Name(name),
		kong.Description(description),
		kong.Writers(stdout, stderr),
		kong.Exit(exit),
		kong.Vars{"version": VersionLine(name)},
	}
}

// Parse parses args into flags (a kong struct) for the command name. done is true when the
// command must stop now with code: after --help or --version (0), for a bad command line (badExit,
// the error printed to stderr as "name: error"), or when the flag struct itself is broken (1).
func Parse(name, description string, flags any, args []string, stdout, stderr io.Writer, badExit int) (code int, done bool) {
	exit := -1
	parser, err := kong.New(flags, Options(name, description, stdout, stderr, func(code int) { exit = code })...)
	if err != nil {
		fmt.Fprintln(stderr, name+": internal error:", err)
		return 1, true
	}
	if _, err := parser.Parse(args); err != nil {
		fmt.Fprintln(stderr, name+":", err)
		return badExit, true
	}
	if exit >= 0 { // --help, --version
		return exit, true
	}
	return 0, false
}

// dedupe drops a "segment: " that repeats the one just before it ("agent v3: agent v3: x" ->
// "agent v3: x"): layers that each name themselves while wrapping the same error would otherwise
// print the name twice.
func dedupe(msg string) string {
	parts := strings.Split(msg, ": ")
	out := parts[:1]
	for _, p := range parts[1:] {
		if p == out[len(out)-1] && p != "" {
			continue
		}
		out = append(out, p)
	}
	return strings.Join(out, ": ")
}

// UsageError marks an error of the command line or of its input: exit status 2.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Usage wraps err as a UsageError.
func Usage(err error) error { return UsageError{err} }

// Exit reports err on stderr as one "name: message" line (without repeating a "name: " the
// message already starts with) and returns the exit status: 0 for nil, 2 for a UsageError or a
// malformed listen address, 1 otherwise.
func Exit(name string, err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, name+": "+dedupe(strings.TrimPrefix(err.Error(), name+": ")))
	if errors.As(err, new(UsageError)) || badListenAddr(err) {
		return 2
	}
	return 1
}

// badListenAddr reports whether err is a listen that failed on its address itself (a port out of
// range or not a number, no port): the address came from a flag or a config, so it is bad input,
// wherever in the program the listen happened. A listen that fails on a good address (in use,
// not permitted) is a runtime failure.
func badListenAddr(err error) bool {
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "listen" {
		return false
	}
	var addr *net.AddrError
	var dns *net.DNSError
	return errors.As(op.Err, &addr) || (errors.As(op.Err, &dns) && dns.Err == "unknown port")
}

// FlagGiven reports whether args name --flag (as --flag=value or --flag value) before a "--":
// whether the command line gave it, where its value alone cannot tell (it equals the default).
func FlagGiven(args []string, flag string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "--"+flag || strings.HasPrefix(a, "--"+flag+"=") {
			return true
		}
	}
	return false
}

// lineError is an error printed on one line.
type lineError struct{ error }

func (e lineError) Error() string { return strings.ReplaceAll(e.error.Error(), "\n", "; ") }
func (e lineError) Unwrap() error { return e.error }

// OneLine is err printed on one line, its newlines (errors.Join's, some causes') made "; ", so that
// Exit's report stays one line; errors.Is and As see through it. nil and errors without a newline
// are returned as they are.
func OneLine(err error) error {
	if err == nil || !strings.Contains(err.Error(), "\n") {
		return err
	}
	return lineError{err}
}
