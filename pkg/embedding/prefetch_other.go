//go:build !amd64

package embedding

// prefetch is a no-op where there is no prefetch instruction in assembly here: lookups stay
// correct, only slower.
func prefetch([]uintptr) {}
