package modelmgr

import (
	"io/fs"
	"syscall"
	"time"
)

// atime returns the access time of info, or its modification time when the platform data lacks it.
func atime(info fs.FileInfo) time.Time {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		// The conversions are needed where Atim's fields are int32 (32-bit platforms).
		return time.Unix(int64(st.Atim.Sec), int64(st.Atim.Nsec))
	}
	return info.ModTime()
}
