// Package pathutil finds the base directory of the code base at run time (monolith/path_utils.py):
// the directory that relative library paths (get_libops_path) are resolved against.
//
// The reference derives it from the path of its own source file inside a Bazel runfiles tree,
// a pip install or a source checkout. A Go binary has no source file at run time, so FindMain
// looks, in order, at the Bazel runfiles of the running binary (RUNFILES_DIR / TEST_SRCDIR and
// the workspace, or "<executable>.runfiles"), at the reference's markers in the executable's
// path (FindMainFrom), and at the module root above the working directory (go test / go run).
package pathutil

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// Workspace is this repository's Bazel workspace name: the runfiles directory of its files.
const Workspace = "monolith_go"

// markers are the reference's split markers, in its order.
var markers = []string{"/__main__/", "/site-packages/", "/monolith/"}

// FindMainFrom is the reference's find_main for a file at path: the part of path before the last
// "/__main__/" (kept as ".../__main__"), else before "/site-packages/" (kept), else before
// "/monolith/" (dropped), the first marker present deciding; the result must contain a
// "monolith" directory. The error (kind Value, the reference's ValueError) carries the full path.
func FindMainFrom(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("find main: %w", err)
	}
	for _, m := range markers {
		end := strings.LastIndex(abs, m)
		if end < 0 {
			continue
		}
		dir := abs[:end]
		if m != "/monolith/" {
			dir = filepath.Join(dir, strings.Trim(m, "/"))
		}
		if _, err := os.Stat(filepath.Join(dir, "monolith")); err == nil {
			return dir, nil
		}
		break
	}
	return "", errkind.New(errkind.Value,
		"Unable to find the monolith base directory. This file directory is %s. Are you running under bazel structure?", abs)
}

// Join is Python's os.path.join for "/"-separated paths: an absolute part restarts the path, one
// "/" goes between parts unless the path so far is empty or already ends with one, and nothing is
// cleaned (so "hdfs://ns/p" keeps its "//", and paths stay the reference's strings).
func Join(parts ...string) string {
	out := ""
	for _, p := range parts {
		switch {
		case strings.HasPrefix(p, "/"):
			out = p
		case out == "" || strings.HasSuffix(out, "/"):
			out += p
		default:
			out += "/" + p
		}
	}
	return out
}

// Dirname is Python's os.path.dirname for "/"-separated paths: what precedes the last "/" (""
// for a bare file name), its trailing slashes removed unless it is all slashes.
func Dirname(p string) string {
	head := p[:strings.LastIndexByte(p, '/')+1]
	if t := strings.TrimRight(head, "/"); t != "" {
		head = t
	}
	return head
}

// Env reads environment variables (os.LookupEnv in production).
type Env func(string) (string, bool)

// Finder locates the base directory; its fields default to the process's.
type Finder struct {
	Env        Env                    // default os.LookupEnv
	Executable func() (string, error) // default os.Executable
	Getwd      func() (string, error) // default os.Getwd
}

// FindMain returns the base directory of the running binary with the process's environment.
func FindMain() (string, error) { return Finder{}.FindMain() }

// GetLibopsPath is get_libops_path: name joined to FindMain's directory (not cleaned, as
// os.path.join does not clean either).
func GetLibopsPath(name string) (string, error) { return Finder{}.GetLibopsPath(name) }

// GetLibopsPath is the package's GetLibopsPath with f's inputs.
func (f Finder) GetLibopsPath(name string) (string, error) {
	base, err := f.FindMain()
	if err != nil {
		return "", err
	}
	return Join(base, name), nil
}

// FindMain tries, in order: the Bazel runfiles tree of the workspace (RUNFILES_DIR or
// TEST_SRCDIR, joined with TEST_WORKSPACE or Workspace), "<executable>.runfiles/<Workspace>",
// the reference's markers in the executable's path, and the nearest directory holding go.mod
// above the working directory. The error names everything it looked at.
func (f Finder) FindMain() (string, error) {
	env := f.Env
	if env == nil {
		env = os.LookupEnv
	}
	exe := f.Executable
	if exe == nil {
		exe = os.Executable
	}
	getwd := f.Getwd
	if getwd == nil {
		getwd = os.Getwd
	}
	var tried []string
	isDir := func(p string) bool {
		tried = append(tried, p)
		st, err := os.Stat(p)
		return err == nil && st.IsDir()
	}
	ws := Workspace
	if v, ok := env("TEST_WORKSPACE"); ok && v != "" {
		ws = v
	}
	for _, key := range []string{"RUNFILES_DIR", "TEST_SRCDIR"} {
		if root, ok := env(key); ok && root != "" {
			if d := filepath.Join(root, ws); isDir(d) {
				return d, nil
			}
		}
	}
	exePath, exeErr := exe()
	if exeErr == nil {
		if d := filepath.Join(exePath+".runfiles", Workspace); isDir(d) {
			return d, nil
		}
		if d, err := FindMainFrom(exePath); err == nil {
			return d, nil
		}
		tried = append(tried, "markers in "+exePath)
	}
	if wd, err := getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			tried = append(tried, filepath.Join(d, "go.mod"))
			if st, err := os.Stat(filepath.Join(d, "go.mod")); err == nil && st.Mode().IsRegular() {
				return d, nil
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	if exeErr != nil {
		tried = append(tried, "the executable ("+exeErr.Error()+")")
	}
	return "", errkind.New(errkind.Value, "Unable to find the monolith base directory (looked at %s). Are you running under bazel structure?", strings.Join(tried, ", "))
}
