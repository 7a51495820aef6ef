//go:build !linux

package modelmgr

import (
	"io/fs"
	"time"
)

// atime returns the modification time: the access time is only read on Linux.
func atime(info fs.FileInfo) time.Time { return info.ModTime() }
