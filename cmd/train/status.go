package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	agentstatus "github.com/monolith-go/monolith/pkg/agent/status"
	"github.com/monolith-go/monolith/pkg/estimator"
	"github.com/monolith-go/monolith/pkg/hooks/runhook"
	"github.com/monolith-go/monolith/pkg/promstatus"
	"github.com/monolith-go/monolith/pkg/trainer/dnn"
)

// namespace prefixes the worker's metrics.
const namespace = "monolith_train"

// statusStopTimeout bounds the status endpoint's stop at the end of the run.
const statusStopTimeout = 5 * time.Second

// latencyBuckets are the buckets of the RPC latency histograms, 50 µs to about 10 s.
var latencyBuckets = prometheus.ExponentialBuckets(50e-6, 2.5, 14)

// status is the worker's metrics (a registry of their own) and its status endpoint: /metrics,
// /healthz and /debug/pprof/. The dnn model's counters (phase times, lookups) are read from its
// Stats when scraped.
type status struct {
	reg *prometheus.Registry
	srv *agentstatus.Server // nil without --status_addr

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

// startStatus registers the metrics and serves them on addr (none when empty).
func startStatus(addr, model string, stdout io.Writer, log *slog.Logger) (*status, error) {
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help})
	}
	s := &status{
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
		return nil, err
	}
	srv.Start()
	s.srv = srv
	fmt.Fprintf(stdout, "  status       %s (/metrics: loss, AUC, examples/s, PS lookup latency, step phase times; /healthz, /debug/pprof/)\n", srv.URL())
	return s, nil
}

// addr is the status endpoint's address, "" without one.
func (s *status) addr() string {
	if s.srv == nil {
		return ""
	}
	return s.srv.Addr()
}

func (s *status) stop(ctx context.Context) {
	if s.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), statusStopTimeout)
	defer cancel()
	s.srv.Stop(ctx)
}

// watch makes the dnn model's Stats part of the metrics.
func (s *status) watch(m *dnn.Model) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.model = m
}

// trainStarted marks the training's start (its wall time is the throughput's).
func (s *status) trainStarted() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started = time.Now()
}

// stepped records a training step.
func (s *status) stepped(step int64, examples int) {
	s.globalStep.Set(float64(step))
	s.examples.Add(float64(examples))
	s.mu.Lock()
	defer s.mu.Unlock()
	s.steps++
	s.finished = time.Now()
}

// readFor records the time the loop waited for a training batch.
func (s *status) readFor(d time.Duration) {
	s.readSeconds.Add(d.Seconds())
	s.mu.Lock()
	defer s.mu.Unlock()
	s.read += d
}

func (s *status) evaluated(auc, loss float64) {
	s.evalAUC.Set(auc)
	s.evalLoss.Set(loss)
}

// throughput is the training's wall time (first to last step) and the input's share of it.
func (s *status) throughput() (steps int64, wall, read time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.steps, s.finished.Sub(s.started), s.read
}

// phaseCollector reports the dnn model's Stats.
type phaseCollector struct{ s *status }

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

// progressHook prints a progress line every interval steps (step, examples/s, mean loss, and for
// dnn the training AUC and the mean PS lookup latency of the interval) and keeps the gauges.
type progressHook struct {
	runhook.Base
	s        *status
	every    int64
	w        *worker
	out      io.Writer
	last     time.Time
	lastStat dnn.Stats
	examples int64
	lossSum  float64
	batches  int64
}

func (s *status) progressHook(every int, w *worker, out io.Writer) *progressHook {
	if every <= 0 {
		every = estimator.DefaultLogStepCountSteps
	}
	return &progressHook{s: s, every: int64(every), w: w, out: out}
}

func (h *progressHook) AfterCreateSession(context.Context, *runhook.Session) error {
	h.s.trainStarted()
	h.last = time.Now()
	if h.w != nil {
		h.lastStat = h.w.model.Stats()
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
	if h.w != nil {
		st := h.w.model.Stats()
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
