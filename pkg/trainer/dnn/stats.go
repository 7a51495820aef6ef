package dnn

import (
	"sync"
	"time"

	"github.com/monolith-go/monolith/pkg/trainer/metrics"
)

// Stats are the model's counters since it was created or last reset, for logs and metrics
// exporters: throughput is Examples over the wall time between two snapshots, or over
// StepTime() for the model's own share of it.
type Stats struct {
	// Steps and Examples count the training steps and their examples.
	Steps, Examples int64
	// LossSum is the sum over training examples of their log loss (before each step's update):
	// LossSum/Examples is the mean training loss.
	LossSum float64
	// AUC is the streaming AUC (200 thresholds) of the training predictions, before each step's
	// update; 0 before any step.
	AUC float64
	// EvalExamples counts the examples predicted without training (Predict, evaluation).
	EvalExamples int64

	// Input, Lookup, Layout, Dense and Apply are the time the training steps spent in each phase:
	// building the layout input and de-duplicating ids; the store lookups (all tables, in
	// parallel); the layout op and its gradient; the MLP forward, backward and dense update; the
	// store applies (all tables, in parallel).
	Input, Lookup, Layout, Dense, Apply time.Duration

	// Lookups counts the store's Lookup calls (training and evaluation, one per table and batch),
	// LookupIDs the ids they asked for, LookupTime their summed latency and LookupMax the longest.
	Lookups, LookupIDs    int64
	LookupTime, LookupMax time.Duration
	// Applies, ApplyIDs, ApplyTime and ApplyMax are the same for the store's Apply calls.
	Applies, ApplyIDs   int64
	ApplyTime, ApplyMax time.Duration
}

// StepTime is the training steps' total time, all phases.
func (s Stats) StepTime() time.Duration { return s.Input + s.Lookup + s.Layout + s.Dense + s.Apply }

// MeanLoss is the mean training log loss, 0 before any step.
func (s Stats) MeanLoss() float64 {
	if s.Examples == 0 {
		return 0
	}
	return s.LossSum / float64(s.Examples)
}

// MeanLookupLatency is the mean latency of a Lookup call, 0 before any.
func (s Stats) MeanLookupLatency() time.Duration {
	if s.Lookups == 0 {
		return 0
	}
	return s.LookupTime / time.Duration(s.Lookups)
}

// stepTimes are one step's phase times.
type stepTimes struct{ input, lookup, layout, dense, apply time.Duration }

// statsRecorder accumulates Stats; its lock lets exporters read while the model trains.
type statsRecorder struct {
	mu  sync.Mutex
	s   Stats
	auc *metrics.AUC
}

func (r *statsRecorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.s, r.auc = Stats{}, metrics.NewAUC()
}

func (r *statsRecorder) addStep(examples int, meanLoss float64, labels, probs []float32, t stepTimes) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.s.Steps++
	r.s.Examples += int64(examples)
	r.s.LossSum += meanLoss * float64(examples)
	// Update fails only on predictions outside [0, 1]: sigmoids are not, unless NaN, and a NaN
	// logit makes a NaN loss, which the estimator reports.
	_ = r.auc.Update(labels, probs)
	r.s.Input += t.input
	r.s.Lookup += t.lookup
	r.s.Layout += t.layout
	r.s.Dense += t.dense
	r.s.Apply += t.apply
}

func (r *statsRecorder) addEval(examples int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.s.EvalExamples += int64(examples)
}

func (r *statsRecorder) addLookup(ids int, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.s.Lookups++
	r.s.LookupIDs += int64(ids)
	r.s.LookupTime += d
	r.s.LookupMax = max(r.s.LookupMax, d)
}

func (r *statsRecorder) addApply(ids int, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.s.Applies++
	r.s.ApplyIDs += int64(ids)
	r.s.ApplyTime += d
	r.s.ApplyMax = max(r.s.ApplyMax, d)
}

// Stats returns a snapshot of the counters. It may be called from any goroutine.
func (m *Model) Stats() Stats {
	r := &m.stats
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.s
	if s.Steps > 0 {
		s.AUC = r.auc.Value()
	}
	return s
}

// ResetStats zeroes the counters (the training AUC included). It may be called from any
// goroutine.
func (m *Model) ResetStats() { m.stats.reset() }
