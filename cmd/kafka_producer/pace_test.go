package main

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock whose Sleep advances it at once; it records the sleeps.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	return nil
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *fakeClock) Sleeps() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.sleeps)
}

// TestPacerRate: at 50 events/s the first event is not delayed and event n is due n/50 s after it,
// each wait sleeping 20 ms; a rate that does not divide a second keeps the long-run rate exact.
func TestPacerRate(t *testing.T) {
	for _, tc := range []struct {
		rate   float64
		events int64
		want   time.Duration // from the first event to the last
	}{
		{50, 101, 2 * time.Second},
		{3, 301, 100 * time.Second},
		{0.5, 4, 6 * time.Second},
		{1e6, 1_000_001, time.Second},
	} {
		c := newFakeClock()
		p := newPacer(tc.rate, c)
		start := c.Now()
		for i := int64(0); i < tc.events; i++ {
			if err := p.Wait(context.Background(), time.Time{}); err != nil {
				t.Fatal(err)
			}
		}
		if got := c.Now().Sub(start); got != tc.want {
			t.Errorf("rate %v: %d events took %v, want %v", tc.rate, tc.events, got, tc.want)
		}
		if len(c.sleeps) != int(tc.events-1) {
			t.Errorf("rate %v: %d sleeps for %d events, want %d", tc.rate, len(c.sleeps), tc.events, tc.events-1)
		}
		if tc.rate == 50 {
			for i, d := range c.sleeps {
				if d != 20*time.Millisecond {
					t.Fatalf("sleep %d: %v, want 20ms", i, d)
				}
			}
		}
	}
}

// TestPacerUnpaced: rate 0 never sleeps.
func TestPacerUnpaced(t *testing.T) {
	c := newFakeClock()
	p := newPacer(0, c)
	for range 1000 {
		if err := p.Wait(context.Background(), time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	if c.Sleeps() != 0 || !c.Now().Equal(newFakeClock().Now()) {
		t.Errorf("an unpaced pacer slept %d times", c.Sleeps())
	}
}

// TestPacerBehind: a producer held up for 5 s sends one second's worth of events (plus the one
// due now) at once, not five seconds' worth, and then keeps the rate again.
func TestPacerBehind(t *testing.T) {
	c := newFakeClock()
	p := newPacer(50, c)
	ctx := context.Background()
	for range 10 {
		if err := p.Wait(ctx, time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	c.Advance(5 * time.Second)
	slept := c.Sleeps()
	immediate := 0
	for c.Sleeps() == slept {
		if err := p.Wait(ctx, time.Time{}); err != nil {
			t.Fatal(err)
		}
		if c.Sleeps() == slept {
			immediate++
		}
	}
	if immediate != 51 || p.resets != 1 {
		t.Errorf("%d events at once after falling 5 s behind (%d resets), want 51 (1)", immediate, p.resets)
	}
	// Behind by less than maxBurst: everything owed is sent, with no reset.
	c.Advance(500 * time.Millisecond)
	slept = c.Sleeps()
	immediate = 0
	for c.Sleeps() == slept {
		if err := p.Wait(ctx, time.Time{}); err != nil {
			t.Fatal(err)
		}
		if c.Sleeps() == slept {
			immediate++
		}
	}
	if immediate != 25 || p.resets != 1 {
		t.Errorf("%d events at once after falling 0.5 s behind (%d resets), want 25 (1)", immediate, p.resets)
	}
}

// TestPacerEnd: events due at or after the end are not sent: the pacer sleeps until the end
// and says so; 100 events/s for 1 s is 100 events exactly.
func TestPacerEnd(t *testing.T) {
	for _, rate := range []float64{100, 0.1} {
		c := newFakeClock()
		p := newPacer(rate, c)
		end := c.Now().Add(time.Second)
		n := 0
		for {
			err := p.Wait(context.Background(), end)
			if errors.Is(err, errEnd) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		want := int(rate)
		if want == 0 {
			want = 1
		}
		if n != want || !c.Now().Equal(end) {
			t.Errorf("rate %v: %d events in 1 s ending at +%v, want %d ending at +1s", rate, n, c.Now().Sub(end.Add(-time.Second)), want)
		}
		if err := p.Wait(context.Background(), end); !errors.Is(err, errEnd) {
			t.Errorf("rate %v: a wait after the end: %v", rate, err)
		}
	}
}

// TestPacerCancel: a cancelled context ends a wait with its error.
func TestPacerCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := newPacer(10, newFakeClock())
	if err := p.Wait(ctx, time.Time{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait with a cancelled context: %v", err)
	}
	// The real clock's sleep ends with the context too.
	ctx, cancel = context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	if err := (realClock{}).Sleep(ctx, time.Hour); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("realClock.Sleep: %v", err)
	}
}
