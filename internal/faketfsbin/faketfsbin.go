// Package faketfsbin gives tests the cmd/fake_tfs binary (a fake tensorflow_model_server): the
// one Bazel built, passed as -fake_tfs=$(rootpath //cmd/fake_tfs), or one `go build` makes once
// per test binary.
//
// A test package using it calls Main from its TestMain (or Cleanup after m.Run), so the binary
// built for go test is removed.
package faketfsbin

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

var binFlag = flag.String("fake_tfs", "", "path of the fake_tfs binary (Bazel passes it; go test builds it)")

var (
	once sync.Once
	path string
	dir  string // the go build output directory, removed by Cleanup
	err  error
)

// Path returns the fake_tfs binary's absolute path, failing t when it cannot be had.
func Path(t testing.TB) string {
	t.Helper()
	once.Do(func() { path, err = locate() })
	if err != nil {
		t.Fatal(err)
	}
	return path
}

func locate() (string, error) {
	if p := *binFlag; p != "" {
		// $(rootpath) is relative to the workspace root inside the runfiles tree.
		if srcdir := os.Getenv("TEST_SRCDIR"); srcdir != "" {
			p = filepath.Join(srcdir, os.Getenv("TEST_WORKSPACE"), p)
		}
		return filepath.Abs(p)
	}
	d, err := os.MkdirTemp("", "fake-tfs-")
	if err != nil {
		return "", err
	}
	dir = d
	bin := filepath.Join(d, "fake_tfs")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/monolith-go/monolith/cmd/fake_tfs").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build fake_tfs: %v\n%s", err, out)
	}
	return bin, nil
}

// Cleanup removes the binary go build made, if any.
func Cleanup() {
	if dir != "" {
		os.RemoveAll(dir)
	}
}

// Main is a TestMain: it parses the flags, runs the tests, cleans up and exits.
func Main(m *testing.M) {
	flag.Parse()
	code := m.Run()
	Cleanup()
	os.Exit(code)
}
