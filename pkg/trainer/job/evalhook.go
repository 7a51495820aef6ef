package job

import (
	"context"
	"fmt"
	"io"

	"github.com/monolith-go/monolith/pkg/estimator"
	"github.com/monolith-go/monolith/pkg/hooks/runhook"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
)

// evalHook evaluates the chief's current variables while it trains: every `every` global steps
// (0: never by count) and after the step whose batch ended an epoch, one line each on out:
// "eval step=<s> epoch=<e> auc=<x> loss=<y>" (e is the epoch in progress, or the one just
// ended). Evaluation reads the tables without changing them, so training goes on as it would
// have.
type evalHook struct {
	runhook.Base
	est   *estimator.Estimator[*batch.Batch]
	input estimator.InputFn[*batch.Batch]
	steps int64
	every int64
	tr    *tracker
	out   io.Writer
	// last is the global step last evaluated, so that one step is evaluated once.
	last int64
}

func (h *evalHook) AfterRun(ctx context.Context, _ *runhook.RunContext) error {
	step := h.est.GlobalStep()
	ended := h.tr.endedEpoch()
	due := ended > 0 || (h.every > 0 && step%h.every == 0)
	if !due || step == h.last {
		return nil
	}
	h.last = step
	epoch := ended
	if epoch == 0 {
		epoch = h.tr.epoch()
	}
	res, err := h.est.EvaluateNow(ctx, h.input, h.steps)
	if err != nil {
		return fmt.Errorf("evaluation at step %d: %w", step, err)
	}
	_, err = fmt.Fprintf(h.out, "eval step=%d epoch=%d auc=%.4f loss=%.4f\n", step, epoch, res.Metrics["auc"], res.Metrics["log_loss"])
	return err
}
