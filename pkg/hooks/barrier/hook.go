package barrier

import (
	"context"
	"fmt"

	"github.com/monolith-go/monolith/pkg/hooks/runhook"
)

// Hook makes worker Index wait at the barrier after each step while the barrier is placed (the
// reference's BarrierHook). The chief (index 0) never waits. The barrier is an in-process
// *Barrier, or a *Remote one for workers in other processes.
type Hook struct {
	runhook.Base
	Index   int
	Barrier Op
}

var _ runhook.Hook = (*Hook)(nil)

// NewHook returns the barrier hook of worker index.
func NewHook(index int, b Op) *Hook { return &Hook{Index: index, Barrier: b} }

// AfterRun waits until the barrier is removed when it is placed and this is a worker.
func (h *Hook) AfterRun(ctx context.Context, _ *runhook.RunContext) error {
	if h.Index <= 0 {
		return nil
	}
	st, err := h.Barrier.Status(ctx)
	if err != nil {
		return fmt.Errorf("barrier hook: worker %d: %w", h.Index, err)
	}
	if st.Placed {
		return h.Barrier.WaitUntilRemoved(ctx, h.Index)
	}
	return nil
}
