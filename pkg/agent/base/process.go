package agentbase

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pathutil"
)

// ServingLog is the file a serving process's output is appended to: {Prefix}_{name} in the
// directory of TFSLog, whose name is {name} (agent v1 uses the process kind as the prefix:
// ps_tfs.std.log, entry_tfs.std.log, ...).
type ServingLog struct {
	Prefix string
	TFSLog string
}

// Path is the log file's path, spelled as the reference's os.path calls spell it.
func (l ServingLog) Path() string {
	// os.path.basename is what follows the last '/'.
	name := l.Prefix + "_" + l.TFSLog[strings.LastIndexByte(l.TFSLog, '/')+1:]
	return pathutil.Join(pathutil.Dirname(l.TFSLog), name)
}

// Open opens the log for appending, creating it if needed (Python's open(path, 'a')).
func (l ServingLog) Open() (*os.File, error) {
	f, err := os.OpenFile(l.Path(), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o666)
	if err != nil {
		return nil, fmt.Errorf("serving log: %w", err)
	}
	return f, nil
}

// ProcessSpec says how to start a serving process.
type ProcessSpec struct {
	// Cmd is the command line (CmdAndPort's): split on white space, a trailing "&" dropped.
	Cmd string
	// Dir is the working directory; "" means BinDir, or the binary's own directory where BinDir
	// does not exist (off a serving host), so no particular directory is required. The reference
	// changed the whole agent's working directory to BinDir around the start (ServingLog's
	// chdir); here only the child runs there, so nothing else in the agent sees a changed
	// directory.
	Dir string
	// Env is the environment; nil means the agent's.
	Env []string
	// Log receives stdout and stderr; nil sends both to the agent's stdout (the reference does so
	// when MLP_POD_NAME is set).
	Log *ServingLog
}

// Argv splits a command line as the reference's cmd.split() does, without the trailing "&" of the
// proxy's command line (meant for a shell; the reference, running no shell, passed it to the proxy
// as an argument).
func Argv(cmd string) []string {
	argv := strings.Fields(cmd)
	if n := len(argv); n > 0 && argv[n-1] == "&" {
		argv = argv[:n-1]
	}
	return argv
}

// StartProcess starts the process p describes and returns it running; the caller waits for it.
// Cancelling ctx kills it (exec.CommandContext). The log file is closed here once the child holds
// its own copy (the reference left its handle open).
func StartProcess(ctx context.Context, p ProcessSpec) (*exec.Cmd, error) {
	argv := Argv(p.Cmd)
	if len(argv) == 0 {
		return nil, errkind.New(errkind.Value, "start process: empty command line %q", p.Cmd)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = p.Dir
	if cmd.Dir == "" {
		cmd.Dir = defaultDir(argv[0])
	}
	cmd.Env = p.Env
	var logFile *os.File
	if p.Log != nil {
		f, err := p.Log.Open()
		if err != nil {
			return nil, fmt.Errorf("start %s: %w", argv[0], err)
		}
		logFile = f
		cmd.Stdout, cmd.Stderr = f, f
	} else {
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stdout
	}
	err := cmd.Start()
	if logFile != nil {
		// The child has its own descriptor, and nothing was written through this one.
		_ = logFile.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("start %s in %s: %w", argv[0], cmd.Dir, err)
	}
	return cmd, nil
}

// defaultDir is BinDir when it exists, else the directory of the binary bin.
func defaultDir(bin string) string {
	if st, err := os.Stat(BinDir); err == nil && st.IsDir() {
		return BinDir
	}
	if !strings.Contains(bin, "/") {
		if p, err := exec.LookPath(bin); err == nil {
			bin = p
		}
	}
	if abs, err := filepath.Abs(bin); err == nil {
		return filepath.Dir(abs)
	}
	return filepath.Dir(bin)
}

// SetEnv returns a copy of env with key=value, any earlier key= entry dropped (a serving
// process's environment with one variable set).
func SetEnv(env []string, key, value string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+value)
}
