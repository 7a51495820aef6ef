package job

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Lagger is Records that know how far behind the source's newest records they are (a Kafka
// consumer's lag).
type Lagger interface {
	// Lag is the number of records after the position not yet read.
	Lag() int64
}

// Committer is Records that can record a position with their source (a Kafka consumer group's
// committed offsets): for monitoring, and as the start of readers opened without a checkpoint.
type Committer interface {
	Commit(ctx context.Context, position []byte) error
}

// The stream's metrics (Stream.Collector), on the training worker's /metrics.
var (
	descRecords = prometheus.NewDesc("monolith_train_stream_records_total",
		"Records read from the stream, by what became of them: trained, held_out (the evaluation slice), bad (skipped, --max_bad_records).", []string{"outcome"}, nil)
	descRecordsPerSec = prometheus.NewDesc("monolith_train_stream_records_per_second",
		"Records read per second over the last full second (0 when the stream is quiet).", nil, nil)
	descLagRecords = prometheus.NewDesc("monolith_train_stream_lag_records",
		"Consumer lag: records of this worker's partitions produced and not yet read (as of the last fetch).", nil, nil)
	descLagSeconds = prometheus.NewDesc("monolith_train_stream_lag_seconds",
		"Consumer lag in time: how old the newest record read is while records wait behind it (0 when caught up).", nil, nil)
	descCommitted = prometheus.NewDesc("monolith_train_stream_commit_failures_total",
		"Checkpoint positions the source did not take (the consumer group's committed offsets lag; the checkpoint holds them).", nil, nil)
)

// eventAgeBuckets are 10 ms to about 3 h.
var eventAgeBuckets = prometheus.ExponentialBuckets(.01, 2, 20)

// streamMetrics count what a stream's passes read.
type streamMetrics struct {
	mu                    sync.Mutex
	trained, heldOut, bad int64
	windowStart           time.Time
	windowRecords         int64
	perSec                float64
	newestRead            time.Time // the newest event time read
	open                  Records   // the open pass's records (lag), nil when none
	commitFailures        int64
	eventAge              prometheus.Histogram
}

func newStreamMetrics() *streamMetrics {
	return &streamMetrics{eventAge: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "monolith_train_stream_event_age_seconds",
		Help:    "Age of a training batch's newest event (its record's event time) when the batch is taken for training: event -> trained.",
		Buckets: eventAgeBuckets})}
}

// read counts a record read (outcome: "trained", "held_out", "bad") with its event time.
func (m *streamMetrics) read(outcome string, at time.Time) {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	switch outcome {
	case "trained":
		m.trained++
	case "held_out":
		m.heldOut++
	default:
		m.bad++
	}
	if at.After(m.newestRead) {
		m.newestRead = at
	}
	m.tickLocked(now)
	m.windowRecords++
}

// tickLocked closes the records/s window once a second has passed.
func (m *streamMetrics) tickLocked(now time.Time) {
	if m.windowStart.IsZero() {
		m.windowStart = now
		return
	}
	if d := now.Sub(m.windowStart); d >= time.Second {
		m.perSec = float64(m.windowRecords) / d.Seconds()
		if d >= 2*time.Second {
			m.perSec = 0 // a quiet second (or more) passed since the window's records
		}
		m.windowStart, m.windowRecords = now, 0
	}
}

// batch observes a batch taken for training.
func (m *streamMetrics) batch(newest time.Time) {
	if !newest.IsZero() {
		m.eventAge.Observe(max(0, time.Since(newest).Seconds()))
	}
}

func (m *streamMetrics) setOpen(r Records) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.open = r
}

func (m *streamMetrics) commitFailed() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.commitFailures++
}

func (m *streamMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRecords, descRecordsPerSec, descLagRecords, descLagSeconds, descCommitted} {
		ch <- d
	}
	m.eventAge.Describe(ch)
}

func (m *streamMetrics) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	m.mu.Lock()
	m.tickLocked(now)
	trained, heldOut, bad, perSec, newest, open, failures := m.trained, m.heldOut, m.bad, m.perSec, m.newestRead, m.open, m.commitFailures
	m.mu.Unlock()
	var lag int64
	if l, ok := open.(Lagger); ok {
		lag = l.Lag()
	}
	lagSec := 0.0
	if lag > 0 && !newest.IsZero() {
		lagSec = max(0, now.Sub(newest).Seconds())
	}
	for outcome, n := range map[string]int64{"trained": trained, "held_out": heldOut, "bad": bad} {
		ch <- prometheus.MustNewConstMetric(descRecords, prometheus.CounterValue, float64(n), outcome)
	}
	ch <- prometheus.MustNewConstMetric(descRecordsPerSec, prometheus.GaugeValue, perSec)
	ch <- prometheus.MustNewConstMetric(descLagRecords, prometheus.GaugeValue, float64(lag))
	ch <- prometheus.MustNewConstMetric(descLagSeconds, prometheus.GaugeValue, lagSec)
	ch <- prometheus.MustNewConstMetric(descCommitted, prometheus.CounterValue, float64(failures))
	m.eventAge.Collect(ch)
}
