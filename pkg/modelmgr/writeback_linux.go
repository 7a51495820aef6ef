//go:build linux && (amd64 || arm64)

package modelmgr

import (
	"os"
	"syscall"
)

// syncFileRangeWrite is SYNC_FILE_RANGE_WRITE: start writing the range back, do not wait.
const syncFileRangeWrite = 2

// startWriteback asks the kernel to start writing n bytes of f at off to disk. It is only a hint
// (the fsync that follows is what guarantees durability), so errors are ignored.
func startWriteback(f *os.File, off, n int64) {
	if rc, err := f.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) {
			_ = syscall.SyncFileRange(int(fd), off, n, syncFileRangeWrite)
		})
	}
}
