//go:build !linux || !(amd64 || arm64)

package modelmgr

import "os"

// startWriteback is a no-op where sync_file_range is not used; the fsync after the copy does the
// writing back.
func startWriteback(*os.File, int64, int64) {}
