package paramsync

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
)

// Namespace prefixes the metrics (the reference's parameter_sync_* metrics).
const Namespace = "monolith_parameter_sync"

// Metrics are a pusher's Prometheus metrics. Methods do nothing on a nil *Metrics.
type Metrics struct {
	takenIDs      *prometheus.CounterVec
	pushedIDs     *prometheus.CounterVec
	failedIDs     *prometheus.CounterVec
	requests      *prometheus.CounterVec
	requestSecs   *prometheus.HistogramVec
	retouchedIDs  prometheus.Counter
	noTargets     prometheus.Counter
	cycleSecs     prometheus.Histogram
	lastTargets   prometheus.Gauge
	lastCycleDone prometheus.Gauge
	freshness     prometheus.Histogram
	catchUps      *prometheus.CounterVec
	catchUpIDs    *prometheus.CounterVec
}

// FreshnessBuckets are the buckets of the freshness histograms (event -> served), 50 ms to about
// 14 min.
var FreshnessBuckets = prometheus.ExponentialBuckets(.05, 2, 15)

// NewMetrics registers the metrics on reg (a parameter server's registry).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		takenIDs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "taken_ids_total",
			Help: "Ids taken from the tables to push (each updated entry once per push), by table."}, []string{"table"}),
		pushedIDs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "pushed_ids_total",
			Help: "Ids a target assigned (parameter_sync_fid_count, status OK), by target."}, []string{"target"}),
		failedIDs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "failed_ids_total",
			Help: "Ids of requests a target did not take after their retries, or that were not sent to it once it was down, by target and gRPC code."}, []string{"target", "code"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "requests_total",
			Help: "Push tries, by target and gRPC code."}, []string{"target", "code"}),
		requestSecs: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "request_duration_seconds",
			Help:    "Latency of one push try (parameter_sync_latency), by target.",
			Buckets: prometheus.ExponentialBuckets(.0005, 2.5, 12)}, []string{"target"}),
		retouchedIDs: prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "retouched_ids_total",
			Help: "Ids no target took, given back to the tables for the next push."}),
		noTargets: prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "no_target_total",
			Help: "Pushes skipped because no serving replica of the shard was known."}),
		cycleSecs: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "push_duration_seconds",
			Help:    "Duration of a whole push: taking the updates and sending them to every target.",
			Buckets: prometheus.ExponentialBuckets(.001, 2.5, 12)}),
		lastTargets: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "targets",
			Help: "Targets of the last push."}),
		lastCycleDone: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "last_push_timestamp_seconds",
			Help: "When the last push ended (Unix time)."}),
		freshness: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "freshness_seconds",
			Help:    "Time from the newest event a push's updates include (its examples' event time) to a target's taking the push's last request: event -> served, per target and push.",
			Buckets: FreshnessBuckets}),
		catchUps: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "catch_ups_total",
			Help: "Catch-up pushes of every entry a target took (it was new, had missed a push, or was reloaded), by target."}, []string{"target"}),
		catchUpIDs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "catch_up_ids_total",
			Help: "Ids sent in catch-up pushes a target took, by target."}, []string{"target"}),
	}
	for _, c := range []prometheus.Collector{m.takenIDs, m.pushedIDs, m.failedIDs, m.requests, m.requestSecs, m.retouchedIDs, m.noTargets, m.cycleSecs, m.lastTargets, m.lastCycleDone, m.freshness, m.catchUps, m.catchUpIDs} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) taken(table string, n int) {
	if m != nil && n > 0 {
		m.takenIDs.WithLabelValues(table).Add(float64(n))
	}
}

func (m *Metrics) pushed(target string, n int) {
	if m != nil {
		m.pushedIDs.WithLabelValues(target).Add(float64(n))
	}
}

func (m *Metrics) failed(target string, code codes.Code, n int) {
	if m != nil {
		m.failedIDs.WithLabelValues(target, code.String()).Add(float64(n))
	}
}

func (m *Metrics) request(target string, code codes.Code, d time.Duration) {
	if m != nil {
		m.requests.WithLabelValues(target, code.String()).Inc()
		m.requestSecs.WithLabelValues(target).Observe(d.Seconds())
	}
}

func (m *Metrics) retouched(n int) {
	if m != nil {
		m.retouchedIDs.Add(float64(n))
	}
}

func (m *Metrics) noTarget() {
	if m != nil {
		m.noTargets.Inc()
	}
}

func (m *Metrics) cycle(r *Result) {
	if m != nil {
		m.cycleSecs.Observe(r.Duration.Seconds())
		m.lastTargets.Set(float64(len(r.Targets)))
		m.lastCycleDone.SetToCurrentTime()
	}
}

func (m *Metrics) fresh(d time.Duration) {
	if m != nil {
		m.freshness.Observe(d.Seconds())
	}
}

func (m *Metrics) caughtUp(target string, n int) {
	if m != nil {
		m.catchUps.WithLabelValues(target).Inc()
		m.catchUpIDs.WithLabelValues(target).Add(float64(n))
	}
}
