package main

import (
	"context"
	"errors"
	"time"
)

// clock is the time a pacer keeps: the real one (realClock), or a test's.
type clock interface {
	Now() time.Time
	// Sleep waits d, or until ctx is done (its error).
	Sleep(ctx context.Context, d time.Duration) error
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// maxBurst is how far behind its schedule a pacer may fall before it forgets the events it owes:
// a producer held up (a slow broker, a full buffer) sends at most this long's worth of events at
// once to catch up, then keeps the rate again.
const maxBurst = time.Second

// pacer spaces events rate a second: event n (from 0) of a schedule is due at base + n/rate.
// Computing each due time from the count, rather than adding an interval per event, keeps the
// long-run rate exact whatever the rate's rounding and whatever a sleep overshoots (the events
// after an overshoot are due at once). A zero or negative rate never waits.
type pacer struct {
	rate  float64
	clock clock
	base  time.Time
	n     int64 // events of the schedule from base
	// resets counts the schedules forgotten for falling more than maxBurst behind.
	resets int64
}

func newPacer(rate float64, c clock) *pacer { return &pacer{rate: rate, clock: c} }

// due is when event n of the schedule is due.
func (p *pacer) due(n int64) time.Time {
	return p.base.Add(time.Duration(float64(n) / p.rate * float64(time.Second)))
}

// errEnd is Wait's error when the next event would be due at or after the end.
var errEnd = errors.New("the end of the run (--duration)")

// Wait returns when the next event is due (at once for the first, and when the pacer is
// unpaced), ctx's error if ctx ends first, or errEnd (after sleeping until end) when the event
// would be due at or after end; a zero end is none.
func (p *pacer) Wait(ctx context.Context, end time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := p.clock.Now()
	if !end.IsZero() && !now.Before(end) {
		return errEnd
	}
	if p.rate <= 0 {
		return nil
	}
	if p.base.IsZero() {
		p.base = now
	}
	due := p.due(p.n)
	if now.Sub(due) > maxBurst {
		// Too far behind: start a schedule whose events are due from maxBurst ago, so that
		// at most maxBurst's worth are sent at once.
		p.base, p.n, p.resets = now.Add(-maxBurst), 0, p.resets+1
		due = p.base
	}
	if !end.IsZero() && !due.Before(end) {
		if err := p.clock.Sleep(ctx, end.Sub(now)); err != nil {
			return err
		}
		return errEnd
	}
	if d := due.Sub(now); d > 0 {
		if err := p.clock.Sleep(ctx, d); err != nil {
			return err
		}
	}
	p.n++
	return nil
}
