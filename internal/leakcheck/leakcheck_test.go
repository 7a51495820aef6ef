package leakcheck

import (
	"testing"
	"time"
)

// fakeT records what Check reports, to test the failing case without failing this test.
type fakeT struct {
	testing.TB
	cleanups []func()
	errors   int
}

func (f *fakeT) Helper()               {}
func (f *fakeT) Cleanup(fn func())     { f.cleanups = append(f.cleanups, fn) }
func (f *fakeT) Errorf(string, ...any) { f.errors++ }
func (f *fakeT) run() {
	for _, c := range f.cleanups {
		c()
	}
}

func TestCheck(t *testing.T) {
	// A goroutine that ends within the grace period is not a leak.
	ok := &fakeT{}
	Check(ok)
	done := make(chan struct{})
	go func() { time.Sleep(20 * time.Millisecond); close(done) }()
	ok.run()
	if ok.errors != 0 {
		t.Fatalf("a goroutine that ended was reported")
	}
	<-done
}

func TestCheckReportsLeak(t *testing.T) {
	bad := &fakeT{}
	check(bad, 50*time.Millisecond)
	stop := make(chan struct{})
	go func() { <-stop }()
	bad.run()
	close(stop)
	if bad.errors != 1 {
		t.Fatalf("a leaked goroutine was not reported (%d errors)", bad.errors)
	}
}
