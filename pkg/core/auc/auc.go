// Package auc is tf.compat.v1.metrics.auc as the host calls use it (ROC curve, trapezoidal
// summation, linearly spaced thresholds): a streaming metric whose confusion counts accumulate
// over every Update, in float32 as TF's local variables do.
package auc

import (
	"fmt"
	"sort"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// DefaultThresholds is tf.metrics.auc's num_thresholds.
const DefaultThresholds = 200

const (
	// kepsilon puts the end thresholds just outside [0, 1].
	kepsilon = 1e-7
	// epsilon keeps the rates finite when a class has not been seen.
	epsilon = float32(1.0e-6)
)

// Streaming accumulates true/false positive/negative counts at fixed thresholds.
type Streaming struct {
	thresholds     []float32
	tp, fn, tn, fp []float32
}

// New returns an empty metric with n thresholds: 0-kepsilon, (i+1)/(n-1) for i < n-2, 1+kepsilon.
func New(n int) (*Streaming, error) {
	if n < 2 {
		return nil, errkind.New(errkind.Value, "auc: num_thresholds must be at least 2, got %d", n)
	}
	th := make([]float32, 0, n)
	th = append(th, float32(0.0-kepsilon))
	for i := range n - 2 {
		th = append(th, float32(float64(i+1)*1.0/float64(n-1)))
	}
	th = append(th, float32(1.0+kepsilon))
	return &Streaming{thresholds: th, tp: make([]float32, n), fn: make([]float32, n), tn: make([]float32, n), fp: make([]float32, n)}, nil
}

// Thresholds returns a copy of the thresholds.
func (s *Streaming) Thresholds() []float32 { return append([]float32{}, s.thresholds...) }

// Update adds a batch: a label counts as positive when it is non-zero (TF casts labels to bool);
// a prediction is positive at a threshold when it is strictly greater. Predictions must lie in
// [0, 1] (TF asserts it; NaN fails); a bad batch changes nothing.
func (s *Streaming) Update(labels, predictions []float32) error {
	if len(labels) != len(predictions) {
		return errkind.New(errkind.Value, "auc: %d labels for %d predictions", len(labels), len(predictions))
	}
	for _, p := range predictions {
		if !(p >= 0) {
			return errkind.New(errkind.Value, "auc: predictions must be >= 0, got %v", p)
		}
		if !(p <= 1) {
			return errkind.New(errkind.Value, "auc: predictions must be <= 1, got %v", p)
		}
	}
	// Per-batch counts first, then one add per threshold, as the update op assign_adds a batch
	// sum. The thresholds ascend, so a prediction is above the first k of them: count where each
	// prediction's k falls, then accumulate.
	n := len(s.thresholds)
	posAt, negAt := make([]float32, n+1), make([]float32, n+1)
	var pos, neg float32
	for i, p := range predictions {
		k := sort.Search(n, func(j int) bool { return s.thresholds[j] >= p })
		if labels[i] != 0 {
			posAt[k]++
			pos++
		} else {
			negAt[k]++
			neg++
		}
	}
	// posAbove: positives above threshold j = those whose k > j.
	var posAbove, negAbove float32 = pos, neg
	for j := range n {
		posAbove -= posAt[j]
		negAbove -= negAt[j]
		s.tp[j] += posAbove
		s.fn[j] += pos - posAbove
		s.fp[j] += negAbove
		s.tn[j] += neg - negAbove
	}
	return nil
}

// Value is the area under the ROC curve of everything seen so far.
func (s *Streaming) Value() float32 {
	n := len(s.thresholds)
	x := make([]float32, n)
	y := make([]float32, n)
	for i := range n {
		y[i] = (s.tp[i] + epsilon) / (s.tp[i] + s.fn[i] + epsilon)
		x[i] = s.fp[i] / (s.fp[i] + s.tn[i] + epsilon)
	}
	var sum float32
	for i := range n - 1 {
		sum += (x[i] - x[i+1]) * ((y[i] + y[i+1]) / 2)
	}
	return sum
}

// Counts returns copies of the accumulated true positives, false negatives, true negatives and
// false positives per threshold.
func (s *Streaming) Counts() (tp, fn, tn, fp []float32) {
	c := func(v []float32) []float32 { return append([]float32{}, v...) }
	return c(s.tp), c(s.fn), c(s.tn), c(s.fp)
}

// Reset zeroes the counts (what re-initialising TF's local variables does).
func (s *Streaming) Reset() {
	clear(s.tp)
	clear(s.fn)
	clear(s.tn)
	clear(s.fp)
}

func (s *Streaming) String() string {
	return fmt.Sprintf("auc(%d thresholds, value %v)", len(s.thresholds), s.Value())
}
