//go:build !linux

package zkmirror

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
