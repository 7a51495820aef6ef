package densesync

import (
	"context"

	"github.com/monolith-go/monolith/pkg/hooks/runhook"
)

// GlobalStepper is the model whose steps the synchronization gates: its global step.
type GlobalStepper interface {
	GlobalStep() int64
}

// hook drives a Sync in the training loop.
type hook struct {
	runhook.Base
	s     *Sync
	model GlobalStepper
	chief bool
}

// Hook is the training loop's hook of s over model: at the start the chief (restored by then)
// meets the others and all check their step, before every step but the first the gate, after
// each the agreed stop, and at a failure the others are told why.
func (s *Sync) Hook(model GlobalStepper) runhook.Hook {
	return &hook{s: s, model: model, chief: s.cfg.Index == 0}
}

// AfterCreateSession: the chief, restored, meets the others; then all check their step. A job
// whose worker has no input stops before its first step.
func (h *hook) AfterCreateSession(ctx context.Context, sess *runhook.Session) error {
	if h.chief {
		if err := h.s.Start(ctx); err != nil {
			return err
		}
	}
	empty, err := h.s.checkStart(ctx, h.model.GlobalStep())
	if err != nil {
		return err
	}
	if empty {
		h.s.cfg.Log.Info("a worker's training input is over: the job stops", "global_step", h.model.GlobalStep())
		sess.Coord.RequestStop(nil)
	}
	return nil
}

func (h *hook) BeforeRun(ctx context.Context, rc *runhook.RunContext) error {
	if rc.Step == 0 {
		return nil
	}
	return h.s.gate(ctx, h.model.GlobalStep()+1)
}

func (h *hook) AfterRun(_ context.Context, rc *runhook.RunContext) error {
	if h.s.stop.Load() {
		rc.RequestStop()
	}
	return nil
}

// End tells the others why this worker's training failed.
func (h *hook) End(ctx context.Context, _ *runhook.Session, runErr error) error {
	if runErr != nil && h.s.round > 0 {
		h.s.abort(ctx, h.model.GlobalStep()+1, runErr)
	}
	return nil
}
