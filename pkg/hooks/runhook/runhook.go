// Package runhook is the hook interface of a training run loop: the Go form of TensorFlow's
// SessionRunHook driven by a MonitoredSession, without a graph. Packages that react to the life of
// a training loop (the controller server, the PS health checker, barriers, file closers) implement
// Hook; training runners drive them with Run.
//
// The life of a loop, as Run drives it:
//
//	Begin               every hook, in order (before the session exists)
//	AfterCreateSession  every hook, in order (the session and its Coordinator exist)
//	repeat until stopped:
//	    BeforeRun       every hook, in order
//	    step            the caller's unit of work (one session.run)
//	    AfterRun        every hook, in order
//	End                 every hook whose Begin succeeded, in order, with the error that ended the loop
//	stop the Coordinator and join its goroutines (bounded by a grace period)
//
// The loop stops when a hook or the step calls RunContext.RequestStop (after the current step
// finishes, as in TensorFlow), when the Coordinator is stopped (a goroutine it runs failed, or
// anyone called RequestStop), or when the context is done. The first error from any hook method or
// from the step ends the loop at once: later hooks of that phase are not called.
//
// One difference from TensorFlow, on purpose: End is called on failure too (with the error), so
// hooks that own resources (servers, files) always release them; a hook that must act only on a
// clean finish checks for a nil error.
package runhook

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Hook reacts to the life of a run loop. Every method is called from the loop's goroutine, never
// concurrently with another method of the same loop. Embed Base to implement only some methods.
type Hook interface {
	// Begin is called once before the session is created.
	Begin(ctx context.Context) error
	// AfterCreateSession is called once when the session exists; long-running work belongs in
	// s.Coord.Go so that it stops with the loop.
	AfterCreateSession(ctx context.Context, s *Session) error
	// BeforeRun is called before each step. It may call rc.RequestStop.
	BeforeRun(ctx context.Context, rc *RunContext) error
	// AfterRun is called after each successful step. It may call rc.RequestStop.
	AfterRun(ctx context.Context, rc *RunContext) error
	// End is called once when the loop is over, with the error that ended it (nil on a clean stop).
	// It is called even when AfterCreateSession was not (the loop failed earlier).
	End(ctx context.Context, s *Session, runErr error) error
}

// Base implements Hook with methods that do nothing, like TensorFlow's SessionRunHook base class.
type Base struct{}

// Begin does nothing.
func (Base) Begin(context.Context) error { return nil }

// AfterCreateSession does nothing.
func (Base) AfterCreateSession(context.Context, *Session) error { return nil }

// BeforeRun does nothing.
func (Base) BeforeRun(context.Context, *RunContext) error { return nil }

// AfterRun does nothing.
func (Base) AfterRun(context.Context, *RunContext) error { return nil }

// End does nothing.
func (Base) End(context.Context, *Session, error) error { return nil }

// Session is what hooks see of the running session.
type Session struct {
	// Coord runs the loop's background goroutines and stops the loop when one fails.
	Coord *Coordinator
}

// RunContext is the context of one step: TensorFlow's SessionRunContext.
type RunContext struct {
	// Session is the loop's session.
	Session *Session
	// Step counts the steps of this loop, from 0.
	Step int64

	stop bool
}

// RequestStop asks the loop to stop after the current step.
func (rc *RunContext) RequestStop() { rc.stop = true }

// StopRequested reports whether RequestStop was called during this step.
func (rc *RunContext) StopRequested() bool { return rc.stop }

// Step is the caller's unit of work, run once per loop iteration between BeforeRun and AfterRun.
type Step func(ctx context.Context, rc *RunContext) error

// DefaultStopGrace is how long Run waits for the Coordinator's goroutines after stopping it
// (TensorFlow's MonitoredSession default, stop_grace_period_secs=120).
const DefaultStopGrace = 120 * time.Second

// Loop is a run loop's configuration.
type Loop struct {
	// Hooks are driven in this order.
	Hooks []Hook
	// Step is the unit of work; nil means each iteration only drives the hooks.
	Step Step
	// StopGrace bounds the wait for the Coordinator's goroutines at the end; 0 means DefaultStopGrace.
	StopGrace time.Duration
}

// Run drives hooks through a loop of step until it stops (see the package comment). It returns
// the error that ended the loop joined with any error of End or of stopping the Coordinator; nil
// when the loop stopped cleanly.
func Run(ctx context.Context, hooks []Hook, step Step) error {
	return Loop{Hooks: hooks, Step: step}.Run(ctx)
}

// Run drives the loop (see the package comment and the Run function).
func (l Loop) Run(ctx context.Context) error {
	coord := NewCoordinator(ctx)
	s := &Session{Coord: coord}
	begun := 0
	runErr := func() error {
		for _, h := range l.Hooks {
			if err := h.Begin(ctx); err != nil {
				return fmt.Errorf("runhook: %T.Begin: %w", h, err)
			}
			begun++
		}
		for _, h := range l.Hooks {
			if err := h.AfterCreateSession(ctx, s); err != nil {
				return fmt.Errorf("runhook: %T.AfterCreateSession: %w", h, err)
			}
		}
		return l.loop(ctx, s)
	}()
	errs := []error{runErr}
	for _, h := range l.Hooks[:begun] {
		if err := h.End(ctx, s, runErr); err != nil {
			errs = append(errs, fmt.Errorf("runhook: %T.End: %w", h, err))
		}
	}
	coord.RequestStop(nil)
	grace := l.StopGrace
	if grace <= 0 {
		grace = DefaultStopGrace
	}
	if err := coord.Join(grace); err != nil {
		errs = append(errs, err)
	}
	// A goroutine that failed after the loop ended on its own still counts.
	if cerr := coord.Err(); cerr != nil && !errors.Is(runErr, cerr) {
		errs = append(errs, cerr)
	}
	return errors.Join(errs...)
}

func (l Loop) loop(ctx context.Context, s *Session) error {
	for n := int64(0); ; n++ {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("runhook: loop: %w", err)
		}
		if s.Coord.ShouldStop() {
			return s.Coord.Err()
		}
		rc := &RunContext{Session: s, Step: n}
		for _, h := range l.Hooks {
			if err := h.BeforeRun(ctx, rc); err != nil {
				return fmt.Errorf("runhook: %T.BeforeRun (step %d): %w", h, n, err)
			}
		}
		if l.Step != nil {
			if err := l.Step(ctx, rc); err != nil {
				return fmt.Errorf("runhook: step %d: %w", n, err)
			}
		}
		for _, h := range l.Hooks {
			if err := h.AfterRun(ctx, rc); err != nil {
				return fmt.Errorf("runhook: %T.AfterRun (step %d): %w", h, n, err)
			}
		}
		if rc.StopRequested() {
			return nil
		}
	}
}
