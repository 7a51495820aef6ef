package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"

	clispec "github.com/monolith-go/monolith/gen/spec/go/cli"
)

type flags struct {
	Common
	Count int `name:"count" help:"how many" default:"1"`
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		badExit  int
		code     int
		done     bool
		stderr   string
		wantHelp bool
	}{
		{"ok", []string{"--count=3"}, 2, 0, false, "", false},
		{"bad flag", []string{"--nope"}, 2, 2, true, "cmd: unknown flag --nope\n", false},
		{"bad flag, absl status", []string{"--nope"}, 1, 1, true, "cmd: unknown flag --nope\n", false},
		{"help", []string{"--help"}, 2, 0, true, "", true},
		{"bad log format", []string{"--log_format=xml"}, 2, 2, true, "cmd: --log_format must be one of \"text\",\"json\" but got \"xml\"\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f flags
			var out, errb bytes.Buffer
			code, done := Parse("cmd", "a command", &f, tc.args, &out, &errb, tc.badExit)
			if code != tc.code || done != tc.done || errb.String() != tc.stderr {
				t.Fatalf("got %d %v %q, want %d %v %q", code, done, errb.String(), tc.code, tc.done, tc.stderr)
			}
			if tc.wantHelp != bytes.Contains(out.Bytes(), []byte("--count")) {
				t.Fatalf("help output %q", out.String())
			}
		})
	}
}

func TestExit(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	inUse := listenErr(busy.Addr().String())
	for _, tc := range []struct {
		err    error
		code   int
		stderr string
	}{
		{nil, 0, ""},
		{errors.New("boom"), 1, "cmd: boom\n"},
		{errors.New("cmd: already named"), 1, "cmd: already named\n"},
		{errors.New("agent v3: agent v3: zookeeper: agent v3: x"), 1, "cmd: agent v3: zookeeper: agent v3: x\n"},
		{errors.New("cmd: a: a: a: b"), 1, "cmd: a: b\n"},
		{fmt.Errorf("read: %w", Usage(errors.New("bad file"))), 2, "cmd: read: bad file\n"},
		{fmt.Errorf("status endpoint: %w", listenErr(":99999")), 2, "cmd: status endpoint: listen tcp: address 99999: invalid port\n"},
		{fmt.Errorf("controller: %w", listenErr("127.0.0.1:notaport")), 2, "cmd: controller: listen tcp: lookup tcp/notaport: unknown port\n"},
		{fmt.Errorf("x: %w", listenErr("127.0.0.1")), 2, "cmd: x: listen tcp: address 127.0.0.1: missing port in address\n"},
		{inUse, 1, "cmd: " + inUse.Error() + "\n"},
		{fmt.Errorf("dial: %w", &net.OpError{Op: "dial", Net: "tcp", Err: &net.AddrError{Err: "invalid port", Addr: "1"}}), 1, "cmd: dial: dial tcp: address 1: invalid port\n"},
	} {
		var errb bytes.Buffer
		if code := Exit("cmd", tc.err, &errb); code != tc.code || errb.String() != tc.stderr {
			t.Errorf("Exit(%v) = %d %q, want %d %q", tc.err, code, errb.String(), tc.code, tc.stderr)
		}
	}
}

// TestVersion: --version prints the command's name and build on stdout and stops with status 0,
// whatever else the command line holds.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"--count=2", "--version"}} {
		var f flags
		var out, errb bytes.Buffer
		code, done := Parse("cmd", "a command", &f, args, &out, &errb, 2)
		if code != 0 || !done || errb.Len() != 0 {
			t.Fatalf("%v: got %d %v %q", args, code, done, errb.String())
		}
		if want := VersionLine("cmd") + "\n"; out.String() != want {
			t.Errorf("%v: stdout %q, want %q", args, out.String(), want)
		}
		if !strings.HasPrefix(out.String(), "cmd ") || !strings.Contains(out.String(), "go1.") {
			t.Errorf("%v: version line %q lacks the name or the Go version", args, out.String())
		}
	}
}

// TestLogger: --log_format picks the handler; records keep their attributes either way.
func TestLogger(t *testing.T) {
	for _, tc := range []struct{ format, want string }{
		{"text", "level=WARN msg=hello k=v\n"},
		{"json", `"level":"WARN","msg":"hello","k":"v"}` + "\n"},
	} {
		var b bytes.Buffer
		LogFlags{clispec.LogFlags{LogFormat: tc.format}}.Logger(&b, slog.LevelInfo).Warn("hello", "k", "v")
		LogFlags{clispec.LogFlags{LogFormat: tc.format}}.Logger(&b, slog.LevelInfo).Debug("dropped")
		if !strings.HasSuffix(b.String(), tc.want) || strings.Count(b.String(), "\n") != 1 {
			t.Errorf("%s: %q, want one record ending %q", tc.format, b.String(), tc.want)
		}
	}
}

// TestDefaultLogger: a level name gives a log at that level, made slog's default; a bad one is a
// usage error (exit status 2).
func TestDefaultLogger(t *testing.T) {
	prev := slog.Default()
	defer slog.SetDefault(prev)
	var b bytes.Buffer
	log, err := LogFlags{clispec.LogFlags{LogFormat: "json"}}.DefaultLogger(&b, "warn")
	if err != nil {
		t.Fatal(err)
	}
	if slog.Default() != log {
		t.Error("the log is not slog's default")
	}
	slog.Info("dropped")
	slog.Warn("kept")
	if got := b.String(); strings.Contains(got, "dropped") || !strings.Contains(got, `"msg":"kept"`) {
		t.Errorf("log: %q", got)
	}
	_, err = LogFlags{}.DefaultLogger(&b, "loud")
	if err == nil || Exit("x", err, io.Discard) != 2 {
		t.Errorf("bad level: %v, want a usage error", err)
	}
}

// FlagGiven finds a flag in both of kong's spellings, and not after "--".
func TestFlagGiven(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"--discovery_type=zk"}, true},
		{[]string{"--discovery_type", "zk"}, true},
		{[]string{"--discovery_type_x=1"}, false},
		{[]string{"--", "--discovery_type=zk"}, false},
		{[]string{"--model_dir=/x", "--discovery_type=consul"}, true},
	} {
		if got := FlagGiven(c.args, "discovery_type"); got != c.want {
			t.Errorf("FlagGiven(%q) = %v, want %v", c.args, got, c.want)
		}
	}
}

// OneLine joins an error's lines with "; " and keeps it what it wraps (a usage error stays one).
func TestOneLine(t *testing.T) {
	same := errors.New("one line")
	for _, tc := range []struct {
		name  string
		err   error
		want  string
		code  int
		ident bool // OneLine returns err itself
	}{
		{name: "nil", err: nil, code: 0, ident: true},
		{name: "one line", err: same, want: "one line", code: 1, ident: true},
		{name: "joined", err: errors.Join(errors.New("a"), errors.New("b")), want: "a; b", code: 1},
		{name: "usage", err: fmt.Errorf("read: %w", Usage(errors.Join(errors.New("x"), errors.New("y")))), want: "read: x; y", code: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := OneLine(tc.err)
			if tc.ident && got != tc.err {
				t.Fatalf("OneLine(%v) = %v, want the error itself", tc.err, got)
			}
			if got == nil {
				return
			}
			if got.Error() != tc.want || !errors.Is(got, tc.err) {
				t.Errorf("OneLine = %q (wrapping it: %v), want %q", got.Error(), errors.Is(got, tc.err), tc.want)
			}
			var errb bytes.Buffer
			if code := Exit("cmd", got, &errb); code != tc.code || errb.String() != "cmd: "+tc.want+"\n" {
				t.Errorf("Exit = %d %q, want %d and one line", code, errb.String(), tc.code)
			}
		})
	}
}

type leveledFlags struct {
	Common
	Level string `name:"log_level" default:"info"` // no enum: a bad level reaches DefaultLogger
}

// Run parses (exit 2 for a bad command line), logs at the level the flags give (info without
// one), and reports the body's error with its exit status.
func TestRun(t *testing.T) {
	prev := slog.Default()
	defer slog.SetDefault(prev)
	for _, tc := range []struct {
		name     string
		args     []string
		noLevel  bool // the flags have no --log_level: Run gets nil
		body     error
		code     int
		ran      bool
		stderr   string // what stderr ends with
		debugLog bool   // the body's debug record is in the log
	}{
		{name: "ok", args: nil, code: 0, ran: true},
		{name: "debug", args: []string{"--log_level=debug"}, code: 0, ran: true, debugLog: true},
		{name: "no level flag: info", noLevel: true, code: 0, ran: true},
		{name: "failure", body: errors.New("boom"), code: 1, ran: true, stderr: "cmd: boom\n"},
		{name: "usage error", body: Usage(errors.New("bad input")), code: 2, ran: true, stderr: "cmd: bad input\n"},
		{name: "bad flag", args: []string{"--nope"}, code: 2, stderr: "cmd: unknown flag --nope\n"},
		{name: "bad level", args: []string{"--log_level=loud"}, code: 2},
		{name: "help", args: []string{"--help"}, code: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			ran := false
			body := func(log *slog.Logger) error {
				ran = true
				if slog.Default() != log {
					t.Error("the log is not slog's default")
				}
				log.Debug("debug record")
				log.Info("info record")
				return tc.body
			}
			var code int
			if tc.noLevel {
				var f flags
				code = Run("cmd", "a command", &f, nil, tc.args, &out, &errb, body)
			} else {
				var f leveledFlags
				code = Run("cmd", "a command", &f, &f.Level, tc.args, &out, &errb, body)
			}
			if code != tc.code || ran != tc.ran {
				t.Fatalf("code %d ran %v, want %d %v (stderr %q)", code, ran, tc.code, tc.ran, errb.String())
			}
			if !strings.HasSuffix(errb.String(), tc.stderr) {
				t.Errorf("stderr %q, want it to end %q", errb.String(), tc.stderr)
			}
			if ran && (strings.Contains(errb.String(), "debug record") != tc.debugLog || !strings.Contains(errb.String(), "info record")) {
				t.Errorf("log %q: debug record expected %v", errb.String(), tc.debugLog)
			}
		})
	}
}

// listenErr is the error of listening on addr.
func listenErr(addr string) error {
	lis, err := net.Listen("tcp", addr)
	if err == nil {
		lis.Close()
		return errors.New("listened on " + addr)
	}
	return err
}
