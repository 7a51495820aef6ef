package zkmirror

import "syscall"

// sysProcAttr kills the server when the process that started it dies (even by SIGKILL).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
