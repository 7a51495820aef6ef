package entry

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"

	"github.com/monolith-go/monolith/pkg/modelserver"
)

// Metrics are the entry's calls to the PS sub-graphs. Methods do nothing on a nil *Metrics.
type Metrics struct {
	calls   *prometheus.CounterVec
	seconds *prometheus.HistogramVec
	retries *prometheus.CounterVec
}

// NewMetrics registers the entry's metrics on reg (the model server's registry).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: modelserver.Namespace, Name: "entry_ps_requests_total",
			Help: "Lookups the entry sent to PS replicas, by PS sub-graph and gRPC status code."}, []string{"ps", "code"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: modelserver.Namespace, Name: "entry_ps_request_duration_seconds",
			Help:    "Latency of the entry's lookups on PS replicas, by PS sub-graph.",
			Buckets: prometheus.ExponentialBuckets(.00005, 2, 18)}, []string{"ps"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: modelserver.Namespace, Name: "entry_ps_retries_total",
			Help: "Lookups the entry tried again (on the next replica), by PS sub-graph."}, []string{"ps"}),
	}
	reg.MustRegister(m.calls, m.seconds, m.retries)
	return m
}

func (m *Metrics) psCall(ps string, code codes.Code, d time.Duration) {
	if m == nil {
		return
	}
	m.calls.WithLabelValues(ps, code.String()).Inc()
	m.seconds.WithLabelValues(ps).Observe(d.Seconds())
}

func (m *Metrics) retry(ps string) {
	if m == nil {
		return
	}
	m.retries.WithLabelValues(ps).Inc()
}
