package cli

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// SecondSignal says what a SIGINT or SIGTERM does once a first one has cancelled the command.
type SecondSignal bool

const (
	// IgnoreSecondSignal: further signals are ignored while the command winds down.
	IgnoreSecondSignal SecondSignal = false
	// KillOnSecondSignal: a further signal kills the process at once (the signal's default
	// action), for a command whose orderly stop may take long (a server's grace period).
	KillOnSecondSignal SecondSignal = true
)

// Main is a command's main: it runs run with the process's arguments (those after the program's
// name) and standard streams, under a context that SIGINT or SIGTERM cancels, and exits the
// process with the status run returns.
func Main(second SecondSignal, run func(ctx context.Context, args []string, stdout, stderr io.Writer) int) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	if second == KillOnSecondSignal {
		go func() {
			<-ctx.Done()
			stop()
		}()
	}
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// LoggedFlags is a command's flag struct (a pointer to it) that embeds Common or LogFlags.
type LoggedFlags interface {
	DefaultLogger(w io.Writer, level string) (*slog.Logger, error)
}

// Run is a command's run: it parses args into flags as Parse does (exit status 2 for a bad command
// line), makes the log of --log_format on stderr, at the level *level names (nil: info), slog's
// default, runs body with it and reports body's error as Exit does. It returns the exit status.
func Run(name, description string, flags LoggedFlags, level *string, args []string, stdout, stderr io.Writer, body func(log *slog.Logger) error) int {
	if code, done := Parse(name, description, flags, args, stdout, stderr, 2); done {
		return code
	}
	lvl := "info"
	if level != nil {
		lvl = *level
	}
	log, err := flags.DefaultLogger(stderr, lvl)
	if err != nil {
		return Exit(name, err, stderr)
	}
	return Exit(name, body(log), stderr)
}
