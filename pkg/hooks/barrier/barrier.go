// Package barrier is the Go form of the reference's barrier_ops: a barrier the chief places to
// block workers between steps and removes to let them go on. Slot 0 is the barrier itself; slot i
// (1 <= i < capacity) is set while worker i waits at the barrier, so the chief can see who is
// blocked.
//
// The reference keeps this state in TensorFlow variables read through a session, on a parameter
// server when the job is distributed. Here Barrier is plain in-process state guarded by a mutex
// (waiting workers are woken by a channel rather than by polling every wait_seconds), and Remote is
// the same barrier held by a parameter server (pkg/ps), reached through its Barrier RPC, for the
// processes of a distributed job. The hooks take either, as an Op.
package barrier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// ErrAlreadyPlaced is returned by Place when the barrier is placed already (the reference's
// BarrierAlreadyPlacedError).
var ErrAlreadyPlaced = errkind.Wrap(errkind.Runtime, errors.New("barrier: barrier is placed already"))

// Callback is told the action of a barrier when the barrier is placed and when a worker reaches
// it (the reference's barrier_callbacks). It runs with the Barrier's lock held, so it must not
// call the Barrier.
type Callback func(ctx context.Context, action string) error

// waitLogInterval is how often a waiting worker logs that it still waits (the reference: 60 s).
var waitLogInterval = 60 * time.Second

// Barrier is a barrier with capacity slots. It is safe for concurrent use.
type Barrier struct {
	callbacks []Callback

	mu      sync.Mutex
	blocked []bool // one per slot; its length is the capacity
	action  string
	removed chan struct{} // closed when slot 0 is cleared; replaced when it is set
}

// New returns a removed barrier with capacity slots (the chief and capacity-1 workers).
func New(capacity int, callbacks ...Callback) (*Barrier, error) {
	if capacity < 1 {
		return nil, errkind.New(errkind.Value, "barrier: capacity %d must be at least 1", capacity)
	}
	removed := make(chan struct{})
	close(removed)
	return &Barrier{
		callbacks: callbacks,
		blocked:   make([]bool, capacity),
		removed:   removed,
	}, nil
}

// Capacity is the number of slots.
func (b *Barrier) Capacity() int { return len(b.blocked) }

// Place places the barrier with an action for the callbacks, then runs the callbacks. It returns
// ErrAlreadyPlaced when the barrier is placed already, and the first callback error (the barrier
// stays placed, as in the reference).
func (b *Barrier) Place(ctx context.Context, action string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.blocked[0] {
		return ErrAlreadyPlaced
	}
	b.blocked[0] = true
	b.action = action
	b.removed = make(chan struct{})
	return b.runCallbacks(ctx, action)
}

// Remove removes the barrier. Removing a barrier that is not placed does nothing (the reference is
// "more generous about removing").
func (b *Barrier) Remove() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.blocked[0] {
		b.blocked[0] = false
		close(b.removed)
	}
}

// IsPlaced reports whether the barrier is placed.
func (b *Barrier) IsPlaced() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.blocked[0]
}

// IsRemoved reports whether the barrier is not placed.
func (b *Barrier) IsRemoved() bool { return !b.IsPlaced() }

// WaitUntilRemoved marks worker index as blocked, runs the callbacks with the barrier's action,
// waits until the barrier is removed (or ctx is done) and unmarks the worker. index must be in
// [1, capacity): slot 0 is the barrier itself.
func (b *Barrier) WaitUntilRemoved(ctx context.Context, index int) error {
	b.mu.Lock()
	if index <= 0 || index >= len(b.blocked) {
		b.mu.Unlock()
		return errkind.New(errkind.Value, "Index [%d] must be non-negative and less than capacity [%d]. ", index, len(b.blocked))
	}
	b.blocked[index] = true
	removed := b.removed
	err := b.runCallbacks(ctx, b.action)
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.blocked[index] = false
		b.mu.Unlock()
	}()
	if err != nil {
		return err
	}
	tick := time.NewTicker(waitLogInterval)
	defer tick.Stop()
	for {
		select {
		case <-removed:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("barrier: worker %d waiting for the barrier's removal: %w", index, ctx.Err())
		case <-tick.C:
			slog.Info(fmt.Sprintf("The worker %d waits until barrier removed.", index))
		}
	}
}

// Status is the barrier's state, read at once.
func (b *Barrier) Status(context.Context) (Status, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	blocked := []int{}
	for i, v := range b.blocked {
		if v {
			blocked = append(blocked, i)
		}
	}
	return Status{Placed: b.blocked[0], Action: b.action, Blocked: blocked, Capacity: len(b.blocked)}, nil
}

// RemoveContext is Remove, as Op has it.
func (b *Barrier) RemoveContext(context.Context) error {
	b.Remove()
	return nil
}

// IsAllBlocked reports whether every slot is set: the barrier is placed and every worker waits.
func (b *Barrier) IsAllBlocked() bool { return len(b.BlockedIndices()) == len(b.blocked) }

// IsNoneBlocked reports whether no slot is set.
func (b *Barrier) IsNoneBlocked() bool { return len(b.BlockedIndices()) == 0 }

// BlockedIndices are the set slots, ascending.
func (b *Barrier) BlockedIndices() []int { return b.indices(true) }

// UnblockedIndices are the clear slots, ascending.
func (b *Barrier) UnblockedIndices() []int { return b.indices(false) }

func (b *Barrier) indices(blocked bool) []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := []int{}
	for i, v := range b.blocked {
		if v == blocked {
			out = append(out, i)
		}
	}
	return out
}

// runCallbacks runs the callbacks in order; b.mu is held, as the reference holds its lock.
func (b *Barrier) runCallbacks(ctx context.Context, action string) error {
	return runCallbacks(ctx, b.callbacks, action)
}

// runCallbacks runs callbacks in order and stops at the first error.
func runCallbacks(ctx context.Context, callbacks []Callback, action string) error {
	for i, cb := range callbacks {
		if err := cb(ctx, action); err != nil {
			return fmt.Errorf("barrier: callback %d (action %q): %w", i, action, err)
		}
	}
	return nil
}
