// Package cmdbin gives tests a binary of this repository's cmd/: the one Bazel built, passed to
// the test as -<name>=$(rootpath //cmd/<name>) (with the binary in the test's data), or one
// `go build` makes once per test binary. faketfsbin is the same for cmd/fake_tfs.
//
// A test package declares its binaries at package level (cmdbin.New registers their flags) and
// calls Cleanup after m.Run in its TestMain, so that the binaries go build made are removed.
package cmdbin

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// buildTimeout bounds one go build.
const buildTimeout = 3 * time.Minute

// Binary is one binary of cmd/.
type Binary struct {
	name, pkg string
	flag      *string

	once sync.Once
	path string
	dir  string // the go build output directory, removed by Cleanup
	err  error
}

// New declares the binary name, built from the package pkg (an import path), with its flag
// -<name>. It must be called before flag.Parse (at package level).
func New(name, pkg string) *Binary {
	return &Binary{name: name, pkg: pkg,
		flag: flag.String(name, "", fmt.Sprintf("path of the %s binary (Bazel passes it; go test builds %s)", name, pkg))}
}

// Path returns the binary's absolute path, failing t when it cannot be had.
func (b *Binary) Path(t testing.TB) string {
	t.Helper()
	b.once.Do(func() { b.path, b.err = b.locate() })
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

func (b *Binary) locate() (string, error) {
	if p := *b.flag; p != "" {
		// $(rootpath) is relative to the workspace root inside the runfiles tree.
		if srcdir := os.Getenv("TEST_SRCDIR"); srcdir != "" {
			p = filepath.Join(srcdir, os.Getenv("TEST_WORKSPACE"), p)
		}
		return filepath.Abs(p)
	}
	d, err := os.MkdirTemp("", "cmdbin-"+b.name+"-")
	if err != nil {
		return "", err
	}
	b.dir = d
	bin := filepath.Join(d, b.name)
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, b.pkg).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", b.pkg, err, out)
	}
	return bin, nil
}

// Cleanup removes the binary go build made, if any.
func (b *Binary) Cleanup() {
	if b.dir != "" {
		os.RemoveAll(b.dir)
	}
}
