//go:build unix

package export

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// lockFile is the file an exporter holds locked in the export base while it writes, so that two
// exports (a trainer's hook and cmd/export, say) do not update a sub-graph's state at once. Its
// name starts with a dot: it is not a sub-graph (agentctl decl declares directories only, and
// model info skips hidden names).
const lockFile = ".export.lock"

// lockBase locks base's lock file, waiting while another exporter holds it, until ctx ends.
func lockBase(ctx context.Context, base string) (unlock func(), err error) {
	name := filepath.Join(base, lockFile)
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock the export base: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("lock %s (another export is writing): %w", name, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
