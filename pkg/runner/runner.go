// Package runner is the Go form of the reference's base_runner: the interface every job runner
// implements and the helper that writes a step's metrics as TensorBoard scalar summaries.
//
// The summaries go to a SummaryWriter; pkg/runner/tbevent's Writer is the one that writes real
// TensorBoard event files, as tf.compat.v1.summary.FileWriter does for the reference.
package runner

import (
	"context"
	"fmt"
	"sort"

	tfframework "github.com/monolith-go/monolith/gen/pb/tensorflow/core/framework"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// Runner is a job (the reference's BaseRunner): Run does the job's work until it is done, fails,
// or ctx is done.
type Runner interface {
	Run(ctx context.Context) error
}

// Scalar is one named metric value.
type Scalar struct {
	Tag   string
	Value float64
}

// Logs are a step's metrics in the order they are written (the reference's logs dict, whose
// insertion order Python keeps).
type Logs []Scalar

// LogsFromMap returns m's metrics ordered by tag: a Go map has no order, so the tag order makes the
// written summaries reproducible.
func LogsFromMap(m map[string]float64) Logs {
	out := make(Logs, 0, len(m))
	for tag, v := range m {
		out = append(out, Scalar{Tag: tag, Value: v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tag < out[j].Tag })
	return out
}

// SummaryWriter receives summaries (tf.compat.v1.summary.FileWriter's add_summary).
type SummaryWriter interface {
	AddSummary(s *tfframework.Summary, step int64) error
}

// ScalarSummary is the Summary the reference builds from logs: one simple_value per metric, in
// order. A value is stored as a float32, rounded to nearest as protobuf's C++ runtime stores a
// Python float in a float field (beyond the float32 range it becomes ±Inf).
func ScalarSummary(logs Logs) *tfframework.Summary {
	s := &tfframework.Summary{Value: make([]*tfframework.Summary_Value, 0, len(logs))}
	for _, l := range logs {
		s.Value = append(s.Value, &tfframework.Summary_Value{
			Tag:   l.Tag,
			Value: &tfframework.Summary_Value_SimpleValue{SimpleValue: float32(l.Value)},
		})
	}
	return s
}

// WriteSummary writes logs to w as one summary of step currentStep (BaseRunner.write_summary).
func WriteSummary(logs Logs, w SummaryWriter, currentStep int64) error {
	if w == nil {
		// The reference fails with AttributeError on a None writer.
		return errkind.New(errkind.Attribute, "runner: write summary of step %d: no summary writer", currentStep)
	}
	if err := w.AddSummary(ScalarSummary(logs), currentStep); err != nil {
		return fmt.Errorf("runner: write summary of step %d: %w", currentStep, err)
	}
	return nil
}
