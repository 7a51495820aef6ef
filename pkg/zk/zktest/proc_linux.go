package zktest

import "syscall"

// sysProcAttr makes the kernel kill the server when the thread that started it exits, which
// launch keeps alive as long as the server: a killed or crashed test binary leaves no java behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
