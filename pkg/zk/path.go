package zk

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// ValidatePath checks that p is a ZooKeeper path: absolute, no empty, "." or ".." segment, no
// NUL character, no trailing "/" except for the root. The error wraps ErrInvalidPath and says
// what is wrong.
func ValidatePath(p string) error {
	reason := pathProblem(p)
	if reason == "" {
		return nil
	}
	return &PathError{Op: "validate", Path: p, Err: fmt.Errorf("%w: %s", ErrInvalidPath, reason)}
}

// ValidateCreatePath validates the path given to Create: the prefix of a sequence node may end
// with "/", because the server appends the counter to it.
func ValidateCreatePath(p string, sequence bool) error {
	if sequence && strings.HasSuffix(p, "/") {
		if err := ValidatePath(p + "0"); err != nil {
			return &PathError{Op: "validate", Path: p, Err: errors.Unwrap(err)}
		}
		return nil
	}
	return ValidatePath(p)
}

func pathProblem(p string) string {
	switch {
	case p == "":
		return "empty path"
	case p[0] != '/':
		return "path must start with /"
	case p == "/":
		return ""
	case strings.HasSuffix(p, "/"):
		return "path must not end with /"
	case strings.ContainsRune(p, 0):
		return "path must not contain NUL"
	}
	for _, seg := range strings.Split(p[1:], "/") {
		switch seg {
		case "":
			return "empty segment (//)"
		case ".", "..":
			return "relative segment " + seg
		}
	}
	return ""
}

// Join joins path elements with "/" into an absolute path, as os.path.join does for the
// reference's absolute paths; the result is cleaned (path.Clean), so check it with ValidatePath
// when the elements come from outside.
func Join(elem ...string) string {
	return path.Clean("/" + path.Join(elem...))
}

// Parent returns the path of p's parent; the parent of "/" is "/".
func Parent(p string) string {
	return path.Dir(p)
}

// Base returns the last segment of p (the node's name); the base of "/" is "".
func Base(p string) string {
	if p == "/" {
		return ""
	}
	return path.Base(p)
}
