package backend

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/monolith-go/monolith/pkg/zk/zktest"
)

// startServer starts a real single-node ZooKeeper for one case (Debian's zookeeper package, as
// pkg/zk/zktest runs it for tests) and returns it with the function that stops it and removes
// its directory.
func startServer(opts ...zktest.Option) (srv *zktest.Server, stop func(), err error) {
	tb := &serverTB{}
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(fatal)
			if !ok {
				panic(r)
			}
			tb.close()
			srv, stop, err = nil, nil, fmt.Errorf("real ZooKeeper: %s", f)
		}
	}()
	srv = zktest.Start(tb, opts...)
	return srv, tb.close, nil
}

// serverTB is the testing.TB zktest.Start needs, for a server started outside a test. zktest
// calls Helper, Fatalf, Logf, TempDir, Cleanup and Failed (the adapter's test runs a case on a
// real server, so a change there shows); the embedded TB is nil, so any other call panics, and
// the harness reports the panic as a failure of the case.
type serverTB struct {
	testing.TB

	mu       sync.Mutex
	dirs     []string
	cleanups []func()
	failed   bool
}

// fatal is the panic value of Fatalf: zktest expects Fatalf not to return.
type fatal string

func (t *serverTB) Helper() {}

func (t *serverTB) Logf(string, ...any) {}

func (t *serverTB) Fatalf(format string, args ...any) {
	t.mu.Lock()
	t.failed = true
	t.mu.Unlock()
	panic(fatal(fmt.Sprintf(format, args...)))
}

func (t *serverTB) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

func (t *serverTB) TempDir() string {
	d, err := os.MkdirTemp("", "parity-zookeeper-")
	if err != nil {
		t.Fatalf("temp dir: %v", err)
	}
	t.mu.Lock()
	t.dirs = append(t.dirs, d)
	t.mu.Unlock()
	return d
}

func (t *serverTB) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

// close runs the cleanups, last registered first (zktest's stops the server), then removes the
// directories, as testing does.
func (t *serverTB) close() {
	t.mu.Lock()
	cleanups, dirs := t.cleanups, t.dirs
	t.cleanups, t.dirs = nil, nil
	t.mu.Unlock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	var errs []error
	for _, d := range dirs {
		errs = append(errs, os.RemoveAll(d))
	}
	_ = errors.Join(errs...) // a leftover temporary directory is not the case's failure
}
