// Package leakcheck fails a test that leaves goroutines behind: the project's rule that every
// goroutine stops. It counts goroutines, so it suits tests that do not run in parallel with others
// of the same package.
package leakcheck

import (
	"runtime"
	"testing"
	"time"
)

// Grace is how long Check waits for goroutines to finish after the test.
const Grace = 5 * time.Second

// Check records the number of goroutines now and, when the test ends, waits up to Grace for the
// count to come back to it; otherwise it fails the test with every goroutine's stack.
func Check(t testing.TB) {
	t.Helper()
	check(t, Grace)
}

func check(t testing.TB, grace time.Duration) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(grace)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				t.Errorf("leaked goroutines: %d before the test, %d after:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}
