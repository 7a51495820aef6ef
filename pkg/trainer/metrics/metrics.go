// Package metrics holds the evaluation metrics of binary classifiers as estimator metrics: AUC
// (pkg/core/auc, tf.metrics.auc) and log loss.
package metrics

import (
	"math"

	"github.com/monolith-go/monolith/pkg/core/auc"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// AUC is the streaming ROC AUC of tf.metrics.auc (200 thresholds).
type AUC struct{ s *auc.Streaming }

// NewAUC returns an empty AUC.
func NewAUC() *AUC {
	s, err := auc.New(auc.DefaultThresholds)
	if err != nil {
		panic(err) // DefaultThresholds is valid
	}
	return &AUC{s: s}
}

// Update adds a batch; predictions must lie in [0, 1].
func (a *AUC) Update(labels, predictions []float32) error { return a.s.Update(labels, predictions) }

// Value is the AUC of every batch added.
func (a *AUC) Value() float64 { return float64(a.s.Value()) }

// LogLossEpsilon clips predictions away from 0 and 1 (tf.losses.log_loss's epsilon).
const LogLossEpsilon = 1e-7

// LogLoss is the mean binary cross-entropy over every example added.
type LogLoss struct {
	sum float64
	n   int64
}

// Update adds a batch.
func (l *LogLoss) Update(labels, predictions []float32) error {
	if len(labels) != len(predictions) {
		return errkind.New(errkind.Value, "log loss: %d labels for %d predictions", len(labels), len(predictions))
	}
	for i, y := range labels {
		l.sum += Loss(float64(y), float64(predictions[i]))
	}
	l.n += int64(len(labels))
	return nil
}

// Value is the mean log loss, 0 before any example.
func (l *LogLoss) Value() float64 {
	if l.n == 0 {
		return 0
	}
	return l.sum / float64(l.n)
}

// Loss is the log loss of probability p for label y (in [0, 1]), p clipped by LogLossEpsilon.
func Loss(y, p float64) float64 {
	p = math.Min(math.Max(p, LogLossEpsilon), 1-LogLossEpsilon)
	return -y*math.Log(p) - (1-y)*math.Log1p(-p)
}
