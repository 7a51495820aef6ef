package modelserver

import (
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"

	"github.com/monolith-go/monolith/pkg/promstatus"
)

// Namespace prefixes every metric of the model server.
const Namespace = "monolith_model_server"

// unknownModel labels requests for models the server does not serve (client-chosen names must not
// grow the label set).
const unknownModel = "(unknown)"

// Metrics are the model server's Prometheus metrics on a registry of their own: requests by
// model, signature, method and code with their latency, loads by result and duration, and the
// versions in each state (read from the watched managers when scraped). Methods do nothing on a
// nil *Metrics.
type Metrics struct {
	reg         *prometheus.Registry
	requests    *prometheus.CounterVec
	seconds     *prometheus.HistogramVec
	loads       *prometheus.CounterVec
	loadSeconds *prometheus.HistogramVec
	freshness   *prometheus.HistogramVec
	newestEvent *prometheus.GaugeVec

	mu     sync.Mutex
	mgrs   []*Manager
	newest map[string]int64 // by model: the newest event time reported (Fresh)
}

// NewMetrics registers the metrics, the build info gauge and the Go runtime and process
// collectors on a new registry.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: promstatus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "requests_total",
			Help: "Requests handled, by model, signature (Predict), method and gRPC status code."}, []string{"model", "signature", "method", "code"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "request_duration_seconds",
			Help:    "Request latency, by model, signature (Predict) and method.",
			Buckets: prometheus.ExponentialBuckets(.00005, 2, 18)}, []string{"model", "signature", "method"}),
		loads: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "loads_total",
			Help: "Version loads, by model and result (ok, error, cancelled)."}, []string{"model", "result"}),
		loadSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "load_duration_seconds",
			Help:    "Time to load a version, by model.",
			Buckets: prometheus.ExponentialBuckets(.001, 4, 12)}, []string{"model"}),
		freshness: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "freshness_seconds",
			Help:    "Time from the newest event a parameter sync push's updates include (the examples' event time) to its assignment here: event -> served, by model (a PS sub-graph).",
			Buckets: prometheus.ExponentialBuckets(.05, 2, 15)}, []string{"model"}),
		newestEvent: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: "newest_event_timestamp_seconds",
			Help: "The newest event time (Unix) the served parameters include, as parameter sync's pushes said, by model (a PS sub-graph)."}, []string{"model"}),
		newest: map[string]int64{},
	}
	m.reg.MustRegister(m.requests, m.seconds, m.loads, m.loadSeconds, m.freshness, m.newestEvent, stateCollector{m})
	return m
}

// Registry is the registry the metrics are on (servables register theirs there too).
func (m *Metrics) Registry() *prometheus.Registry {
	if m == nil {
		return nil
	}
	return m.reg
}

// Watch adds mgr's versions to the state gauge.
func (m *Metrics) Watch(mgr *Manager) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mgrs = append(m.mgrs, mgr)
}

// Fresh records a parameter sync push to model whose updates include every event up to newestMs
// (Unix milliseconds): psshard's Observer.
func (m *Metrics) Fresh(model string, newestMs int64) {
	if m == nil || newestMs <= 0 {
		return
	}
	m.freshness.WithLabelValues(model).Observe(time.Since(time.UnixMilli(newestMs)).Seconds())
	m.mu.Lock()
	defer m.mu.Unlock()
	if newestMs > m.newest[model] {
		m.newest[model] = newestMs
		m.newestEvent.WithLabelValues(model).Set(float64(newestMs) / 1e3)
	}
}

func (m *Metrics) observe(model, signature, method string, code codes.Code, d time.Duration) {
	if m == nil {
		return
	}
	if model == "" {
		model = unknownModel
	}
	m.requests.WithLabelValues(model, signature, method, code.String()).Inc()
	m.seconds.WithLabelValues(model, signature, method).Observe(d.Seconds())
}

func (m *Metrics) load(model, result string, d time.Duration) {
	if m == nil {
		return
	}
	m.loads.WithLabelValues(model, result).Inc()
	if result == "ok" {
		m.loadSeconds.WithLabelValues(model).Observe(d.Seconds())
	}
}

var descVersions = prometheus.NewDesc(Namespace+"_model_versions", "Versions of the model in each state (START, LOADING, AVAILABLE, UNLOADING, END).", []string{"model", "state"}, nil)

var reportedStates = []State{StateStart, StateLoading, StateAvailable, StateUnloading, StateEnd}

type stateCollector struct{ m *Metrics }

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descVersions }

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.mu.Lock()
	mgrs := append([]*Manager(nil), c.m.mgrs...)
	c.m.mu.Unlock()
	counts := map[string]map[State]int{}
	for _, mgr := range mgrs {
		for _, v := range mgr.Versions() {
			if counts[v.Model] == nil {
				counts[v.Model] = map[State]int{}
			}
			counts[v.Model][v.State]++
		}
	}
	for model, byState := range counts {
		for _, s := range reportedStates {
			ch <- prometheus.MustNewConstMetric(descVersions, prometheus.GaugeValue, float64(byState[s]), model, s.String())
		}
	}
}

// StatusHandler serves the status endpoint: /metrics (Prometheus; 404 without metrics), /healthz
// (200 "ok" while the process serves) and Go's /debug/pprof/.
func StatusHandler(m *Metrics) http.Handler { return promstatus.Handler(m.Registry()) }
