package agentbase

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pathutil"
)

// Environment variables naming TF Serving's files.
const (
	// TFSBinaryEnv names TF Serving's binary (the reference's MONOLITH_TFS_BINARY).
	TFSBinaryEnv = "MONOLITH_TFS_BINARY"
	// TFSDirEnv names TF Serving's working directory, which the relative paths of its command
	// line (conf/service.conf, ...) are read from. The reference has none: it chdir'ed the whole
	// agent to find_main().
	TFSDirEnv = "MONOLITH_TFS_DIR"
)

// TFSLocator finds TF Serving's binary and working directory from what the operator gave (an
// option or flag, then the environment), then from where a serving host installs them; nothing
// depends on the agent's own working directory, which is never changed. Zero fields take the
// process's values and the package's defaults.
type TFSLocator struct {
	// Binary is the binary given by an option or flag; it wins over $MONOLITH_TFS_BINARY.
	Binary string
	// BinaryFrom names where Binary came from in errors (default "the TF Serving binary option";
	// a command sets its flag, "--tfs_binary").
	BinaryFrom string
	// Dir is the working directory given by an option or flag; it wins over $MONOLITH_TFS_DIR.
	Dir string
	// LookupEnv reads the environment (default os.LookupEnv).
	LookupEnv func(string) (string, bool)
	// DefaultBinary is the binary when none is given (default TFSBinary).
	DefaultBinary string
	// Home is the serving host's installation (default agentconf.TFSHome).
	Home string
	// FindMain finds the monolith base directory (default pathutil.FindMain).
	FindMain func() (string, error)
}

func (l TFSLocator) env(key string) (string, bool) {
	lookup := l.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	v, ok := lookup(key)
	return v, ok && v != ""
}

// LocateBinary returns TF Serving's binary as an absolute path: Binary, else
// $MONOLITH_TFS_BINARY, else DefaultBinary (a name without "/" is looked up in PATH). The error,
// of kind NotFound, says what was looked for and where it came from, e.g. "TF Serving binary not
// found: $MONOLITH_TFS_BINARY is unset and /opt/tiger/monolith_serving/bin/tensorflow_model_server
// does not exist".
func (l TFSLocator) LocateBinary() (string, error) {
	var p, what string
	switch v, ok := l.env(TFSBinaryEnv); {
	case l.Binary != "":
		from := l.BinaryFrom
		if from == "" {
			from = "the TF Serving binary option"
		}
		p, what = l.Binary, from+" "+l.Binary
	case ok:
		p, what = v, "$"+TFSBinaryEnv+"="+v
	default:
		p = l.DefaultBinary
		if p == "" {
			p = TFSBinary
		}
		what = "$" + TFSBinaryEnv + " is unset and " + p
	}
	abs, err := executable(p)
	if err != nil {
		return "", errkind.Wrap(errkind.NotFound, fmt.Errorf("TF Serving binary not found: %s %w", what, err))
	}
	return abs, nil
}

// executable is p made absolute (looked up in PATH without a "/"), when it is an executable
// file; the error reads after the path ("does not exist").
func executable(p string) (string, error) {
	if !strings.Contains(p, "/") {
		found, err := exec.LookPath(p)
		if err != nil {
			return "", errors.New("is not in $PATH")
		}
		p = found
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("cannot be made absolute: %w", err)
	}
	st, err := os.Stat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", errNotExist{}
	case err != nil:
		return "", fmt.Errorf("cannot be read: %w", err)
	case st.IsDir():
		return "", errors.New("is a directory")
	case st.Mode().Perm()&0o111 == 0:
		return "", errors.New("is not executable")
	}
	return abs, nil
}

// errNotExist reads "does not exist" after a path and is fs.ErrNotExist to errors.Is.
type errNotExist struct{}

func (errNotExist) Error() string        { return "does not exist" }
func (errNotExist) Is(target error) bool { return target == fs.ErrNotExist }

// LocateDir returns TF Serving's working directory, absolute, and what chose it: Dir, else
// $MONOLITH_TFS_DIR (either must be a directory: an error otherwise), else the monolith base
// directory (FindMain: the reference's chdir(find_main())), else Home when it exists, else the
// binary's own directory. Only a directory given explicitly can make it fail.
func (l TFSLocator) LocateDir(binary string) (dir, source string, err error) {
	given := func(p, from string) (string, string, error) {
		abs, err := filepath.Abs(p)
		if err == nil {
			var st os.FileInfo
			if st, err = os.Stat(abs); err == nil && !st.IsDir() {
				err = errors.New("not a directory")
			}
		}
		if err != nil {
			return "", "", errkind.Wrap(errkind.NotFound, fmt.Errorf("TF Serving working directory %s (%s): %w", p, from, err))
		}
		return abs, from, nil
	}
	if l.Dir != "" {
		return given(l.Dir, "the TF Serving directory option")
	}
	if v, ok := l.env(TFSDirEnv); ok {
		return given(v, "$"+TFSDirEnv)
	}
	findMain := l.FindMain
	if findMain == nil {
		findMain = pathutil.FindMain
	}
	if d, err := findMain(); err == nil {
		if abs, err := filepath.Abs(d); err == nil {
			return abs, "the monolith base directory", nil
		}
	}
	home := l.Home
	if home == "" {
		home = agentconf.TFSHome
	}
	if st, err := os.Stat(home); err == nil && st.IsDir() {
		return home, "TFS_HOME", nil
	}
	return filepath.Dir(binary), "the binary's directory", nil
}
