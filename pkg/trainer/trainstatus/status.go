// Package trainstatus is a training worker's status: its Prometheus metrics (a registry of their
// own), the status endpoint that serves them (/metrics, /healthz, /debug/pprof/), the progress
// lines printed every few steps and the throughput report at the end. The job (pkg/trainer/job)
// feeds it: steps through its progress hook, input waits, embedding store calls (TimedStore), the
// dense allreduce and evaluations.
package trainstatus

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	agentstatus "github.com/monolith-go/monolith/pkg/agent/status"
	"github.com/monolith-go/monolith/pkg/promstatus"
	"github.com/monolith-go/monolith/pkg/trainer/dnn"
)

// namespace prefixes the worker's metrics.
const namespace = "monolith_train"

// stopTimeout bounds the status endpoint's stop at the end of the run.
const stopTimeout = 5 * time.Second

// latencyBuckets are the buckets of the RPC latency histograms, 50 µs to about 10 s.
var latencyBuckets = prometheus.ExponentialBuckets(50e-6, 2.5, 14)

// Status is the worker's metrics and its status endpoint. The dnn model's counters (phase times,
// lookups) are read from its Stats when scraped.
type Status struct {
	reg *prometheus.Registry
	srv *agentstatus.Server // nil without an address

	globalStep, loss, trainAUC, examplesPerSec, evalAUC, evalLoss prometheus.Gauge
	examples                                                      prometheus.Counter
	readSeconds                                                   prometheus.Counter
	lookup, apply                                                 *prometheus.HistogramVec
	allreduce                                                     prometheus.Histogram

	mu       sync.Mutex
	model    *dnn.Model
	read     time.Duration // the training input's time
	started  time.Time     // the training loop's start
	finished time.Time
	steps    int64
}

// Start registers the metrics and serves them on addr (none when empty), printing the endpoint's
// URL on stdout.
func Start(addr string, stdout io.Writer, log *slog.Logger) (*Status, error) {
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help})
	}
	s := &Status{
		reg:            promstatus.NewRegistry(),
		globalStep:     gauge("global_step", "The training's global step."),
		loss:           gauge("loss", "Mean log loss of the training batches of the last progress interval (before each step's update)."),
		trainAUC:       gauge("train_auc", "AUC of the training predictions since the start (before each step's update; dnn)."),
		examplesPerSec: gauge("examples_per_second", "Training examples per second over the last progress interval."),
		evalAUC:        gauge("eval_auc", "AUC of the last evaluation."),
		evalLoss:       gauge("eval_loss", "Log loss of the last evaluation."),
		examples: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "examples_total",
			Help: "Training examples trained on."}),
		readSeconds: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "input_read_seconds_total",
			Help: "Time the training loop waited for its next batch (reading and decoding records)."}),
		lookup: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "ps_lookup_seconds",
			Help: "Latency of an embedding lookup of one table and batch, all parameter servers in parallel (dnn).", Buckets: latencyBuckets}, []string{"table"}),
		apply: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "ps_apply_seconds",
			Help: "Latency of an embedding update of one table and batch, all parameter servers in parallel (dnn).", Buckets: latencyBuckets}, []string{"table"}),
		allreduce: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: "allreduce_seconds",
			Help: "Latency of the dense gradients' allreduce on PS 0, waiting for the other workers included (dnn, several workers).", Buckets: latencyBuckets}),
	}
	s.reg.MustRegister(s.globalStep, s.loss, s.trainAUC, s.examplesPerSec, s.evalAUC, s.evalLoss, s.examples, s.readSeconds,
		s.lookup, s.apply, s.allreduce, phaseCollector{s})
	if addr == "" {
		return s, nil
	}
	srv, err := agentstatus.Listen(addr, promstatus.Handler(s.reg), log)
	if err != nil {
		return nil, err // it says "status endpoint: listen <addr>: ..."
	}
	srv.Start()
	s.srv = srv
	fmt.Fprintf(stdout, "  status       %s (/metrics: loss, AUC, examples/s, PS lookup latency, step phase times; /healthz, /debug/pprof/)\n", srv.URL())
	return s, nil
}

// Register adds the metrics of c (the training input's: a stream's lag and records) to the
// status's.
func (s *Status) Register(c prometheus.Collector) error {
	if err := s.reg.Register(c); err != nil {
		return fmt.Errorf("training status: register metrics: %w", err)
	}
	return nil
}

// Addr is the status endpoint's address, "" without one.
func (s *Status) Addr() string {
	if s.srv == nil {
		return ""
	}
	return s.srv.Addr()
}

// Stop stops the status endpoint, also when ctx is cancelled (within a bound of its own).
func (s *Status) Stop(ctx context.Context) {
	if s.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
	defer cancel()
	s.srv.Stop(ctx)
}

// Watch makes the dnn model's Stats part of the metrics.
func (s *Status) Watch(m *dnn.Model) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.model = m
}

// trainStarted marks the training's start (its wall time is the throughput's).
func (s *Status) trainStarted() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started = time.Now()
}

// stepped records a training step.
func (s *Status) stepped(step int64, examples int) {
	s.globalStep.Set(float64(step))
	s.examples.Add(float64(examples))
	s.mu.Lock()
	defer s.mu.Unlock()
	s.steps++
	s.finished = time.Now()
}

// ReadFor records the time the training loop waited for a batch.
func (s *Status) ReadFor(d time.Duration) {
	s.readSeconds.Add(d.Seconds())
	s.mu.Lock()
	defer s.mu.Unlock()
	s.read += d
}

// ObserveAllreduce records the time one allreduce of the dense gradients took.
func (s *Status) ObserveAllreduce(d time.Duration) { s.allreduce.Observe(d.Seconds()) }

// Evaluated records an evaluation's result.
func (s *Status) Evaluated(auc, loss float64) {
	s.evalAUC.Set(auc)
	s.evalLoss.Set(loss)
}

// throughput is the training's wall time (first to last step) and the input's share of it.
func (s *Status) throughput() (steps int64, wall, read time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.steps, s.finished.Sub(s.started), s.read
}

// Report prints the dnn training's throughput and where its time went (nothing before a step).
func (s *Status) Report(out io.Writer, m *dnn.Model) {
	st := m.Stats()
	steps, wall, read := s.throughput()
	if steps == 0 || wall <= 0 {
		return
	}
	pct := func(d time.Duration) float64 { return 100 * d.Seconds() / wall.Seconds() }
	other := wall - read - st.StepTime()
	fmt.Fprintf(out, "throughput   %.0f examples/s: %d examples in %d steps, %.2f s; time split: read %.0f%%, input %.0f%%, lookup %.0f%%, layout %.0f%%, dense %.0f%%, apply %.0f%%, other %.0f%%\n",
		float64(st.Examples)/wall.Seconds(), st.Examples, steps, wall.Seconds(),
		pct(read), pct(st.Input), pct(st.Lookup), pct(st.Layout), pct(st.Dense), pct(st.Apply), pct(max(0, other)))
	fmt.Fprintf(out, "ps lookups   %d calls, %d ids, mean %.2f ms, max %.2f ms; applies %d calls, mean %.2f ms\n",
		st.Lookups, st.LookupIDs, float64(st.MeanLookupLatency())/1e6, float64(st.LookupMax)/1e6, st.Applies, meanMs(st.ApplyTime, st.Applies))
}

func meanMs(d time.Duration, n int64) float64 {
	if n == 0 {
		return 0
	}
	return float64(d) / float64(n) / 1e6
}

// phaseCollector reports the dnn model's Stats.
type phaseCollector struct{ s *Status }

var (
	descPhase = prometheus.NewDesc(namespace+"_step_phase_seconds_total",
		"Time the training steps spent in each phase (dnn): input (building the layout input, de-duplicating ids), lookup, layout (pooling and its gradient), dense (MLP forward, backward, update; the allreduce included), apply.",
		[]string{"phase"}, nil)
	descLookups = prometheus.NewDesc(namespace+"_ps_lookup_ids_total", "Ids the model asked the embedding store for (dnn).", nil, nil)
)

func (c phaseCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descPhase
	ch <- descLookups
}

func (c phaseCollector) Collect(ch chan<- prometheus.Metric) {
	c.s.mu.Lock()
	m := c.s.model
	c.s.mu.Unlock()
	if m == nil {
		return
	}
	st := m.Stats()
	for _, p := range []struct {
		name string
		d    time.Duration
	}{{"input", st.Input}, {"lookup", st.Lookup}, {"layout", st.Layout}, {"dense", st.Dense}, {"apply", st.Apply}} {
		ch <- prometheus.MustNewConstMetric(descPhase, prometheus.CounterValue, p.d.Seconds(), p.name)
	}
	ch <- prometheus.MustNewConstMetric(descLookups, prometheus.CounterValue, float64(st.LookupIDs))
}
