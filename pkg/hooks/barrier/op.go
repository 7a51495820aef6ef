package barrier

import "context"

// Status is a barrier's state.
type Status struct {
	// Placed: slot 0 is set.
	Placed bool
	// Action is the action the barrier was last placed with.
	Action string
	// Blocked are the set slots, ascending: 0 while placed, i while worker i waits.
	Blocked []int
	// Capacity is the number of slots.
	Capacity int
}

// Op is a barrier as its users need it: the in-process *Barrier, or a *Remote one that a parameter
// server holds for the processes of a job. The calls take a context because a Remote one is
// reached over the network; for a *Barrier they do not fail.
type Op interface {
	// Capacity is the number of slots.
	Capacity() int
	// Place places the barrier with an action and runs the callbacks; ErrAlreadyPlaced (or an
	// error wrapping it) when it is placed already.
	Place(ctx context.Context, action string) error
	// RemoveContext removes the barrier; removing a barrier that is not placed does nothing.
	RemoveContext(ctx context.Context) error
	// Status reads the barrier's state.
	Status(ctx context.Context) (Status, error)
	// WaitUntilRemoved blocks worker index (1 <= index < capacity) until the barrier is removed.
	WaitUntilRemoved(ctx context.Context, index int) error
}

var (
	_ Op = (*Barrier)(nil)
	_ Op = (*Remote)(nil)
)
