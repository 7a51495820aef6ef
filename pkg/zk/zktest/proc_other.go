//go:build !linux

package zktest

import "syscall"

// sysProcAttr: only Linux can tie the server's life to the test binary's; elsewhere t.Cleanup
// stops it.
func sysProcAttr() *syscall.SysProcAttr { return nil }
