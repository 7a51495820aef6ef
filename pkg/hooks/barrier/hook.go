package barrier

import (
	"context"

	"github.com/monolith-go/monolith/pkg/hooks/runhook"
)

// Hook makes worker Index wait at the barrier after each step while the barrier is placed (the
// reference's BarrierHook). The chief (index 0) never waits.
type Hook struct {
	runhook.Base
	Index   int
	Barrier *Barrier
}

var _ runhook.Hook = (*Hook)(nil)

// NewHook returns the barrier hook of worker index.
func NewHook(index int, b *Barrier) *Hook { return &Hook{Index: index, Barrier: b} }

// AfterRun waits until the barrier is removed when it is placed and this is a worker.
func (h *Hook) AfterRun(ctx context.Context, _ *runhook.RunContext) error {
	if h.Index > 0 && h.Barrier.IsPlaced() {
		return h.Barrier.WaitUntilRemoved(ctx, h.Index)
	}
	return nil
}
