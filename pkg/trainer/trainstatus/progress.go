package trainstatus

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/monolith-go/monolith/pkg/estimator"
	"github.com/monolith-go/monolith/pkg/hooks/runhook"
	"github.com/monolith-go/monolith/pkg/trainer/dnn"
)

// progressHook prints a progress line every interval steps (step, examples/s, mean loss, and for
// dnn the training AUC and the mean PS lookup latency of the interval) and keeps the gauges.
type progressHook struct {
	runhook.Base
	s        *Status
	every    int64
	model    *dnn.Model // nil: not a dnn
	out      io.Writer
	last     time.Time
	lastStat dnn.Stats
	examples int64
	lossSum  float64
	batches  int64
}

// ProgressHook is the training loop's hook that records every step into s and prints a progress
// line on out every `every` steps (estimator.DefaultLogStepCountSteps when not positive); with a
// dnn model (nil otherwise) the line has its training AUC and PS lookup latency too.
func (s *Status) ProgressHook(every int, model *dnn.Model, out io.Writer) runhook.Hook {
	if every <= 0 {
		every = estimator.DefaultLogStepCountSteps
	}
	return &progressHook{s: s, every: int64(every), model: model, out: out}
}

func (h *progressHook) AfterCreateSession(context.Context, *runhook.Session) error {
	h.s.trainStarted()
	h.last = time.Now()
	if h.model != nil {
		h.lastStat = h.model.Stats()
	}
	return nil
}

func (h *progressHook) AfterRunValues(_ context.Context, _ *runhook.RunContext, v estimator.RunValues) error {
	h.s.stepped(v.GlobalStep, v.Output.Examples)
	h.examples += int64(v.Output.Examples)
	h.lossSum += v.Output.Loss
	h.batches++
	if v.GlobalStep%h.every != 0 {
		return nil
	}
	now := time.Now()
	rate := float64(h.examples) / now.Sub(h.last).Seconds()
	loss := h.lossSum / float64(h.batches)
	h.s.examplesPerSec.Set(rate)
	h.s.loss.Set(loss)
	line := fmt.Sprintf("  step %-6d %8.0f examples/s  loss %.4f", v.GlobalStep, rate, loss)
	if h.model != nil {
		st := h.model.Stats()
		h.s.trainAUC.Set(st.AUC)
		lookups := st.Lookups - h.lastStat.Lookups
		mean := time.Duration(0)
		if lookups > 0 {
			mean = (st.LookupTime - h.lastStat.LookupTime) / time.Duration(lookups)
		}
		line += fmt.Sprintf("  train auc %.4f  ps lookup %.2f ms", st.AUC, float64(mean)/1e6)
		h.lastStat = st
	}
	h.last, h.examples, h.lossSum, h.batches = now, 0, 0, 0
	_, err := fmt.Fprintln(h.out, line)
	return err
}
