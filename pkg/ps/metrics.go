package ps

import (
	"net/http"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/monolith-go/monolith/pkg/promstatus"
)

// Namespace prefixes every metric of the parameter server.
const Namespace = "monolith_ps"

// Metrics are a parameter server's Prometheus metrics, on a registry of their own: its RPCs, and
// each table's entries, memory and traffic, and the updates it refused for a gradient that is not
// finite (monolith_ps_rejected_gradients_total), read from the server when scraped. Methods do nothing
// on a nil *Metrics.
type Metrics struct {
	reg  *prometheus.Registry
	rpcs *promstatus.RPCMetrics

	mu      sync.Mutex
	servers []*Server
}

// NewMetrics registers the metrics, the build info gauge and the Go runtime and process
// collectors on a new registry.
func NewMetrics() *Metrics {
	m := &Metrics{reg: promstatus.NewRegistry()}
	m.rpcs = promstatus.NewRPCMetrics(m.reg, Namespace, "ParameterServer", prometheus.ExponentialBuckets(.0001, 2.5, 14))
	m.reg.MustRegister(tableCollector{m})
	return m
}

// Registry is the registry the metrics are on.
func (m *Metrics) Registry() *prometheus.Registry {
	if m == nil {
		return nil
	}
	return m.reg
}

// watch adds s's tables to the table metrics.
func (m *Metrics) watch(s *Server) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.servers = append(m.servers, s)
}

// UnaryServerInterceptor counts and times the RPCs, by method and status code.
func (m *Metrics) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	var rpcs *promstatus.RPCMetrics // nil without metrics: calls pass through
	if m != nil {
		rpcs = m.rpcs
	}
	return rpcs.UnaryServerInterceptor()
}

// Table metrics, read from the servers' tables at each scrape.
var (
	descEntries = prometheus.NewDesc(Namespace+"_table_entries", "Entries of the table.", []string{"ps", "table"}, nil)
	descMemory  = prometheus.NewDesc(Namespace+"_table_memory_bytes", "Memory the table's entries occupy.", []string{"ps", "table"}, nil)
	descLookup  = prometheus.NewDesc(Namespace+"_table_lookup_ids_total", "Ids looked up in the table.", []string{"ps", "table"}, nil)
	descApply   = prometheus.NewDesc(Namespace+"_table_apply_ids_total", "Ids the table's optimizer was applied to (before de-duplication).", []string{"ps", "table"}, nil)
	descReject  = prometheus.NewDesc(Namespace+"_rejected_gradients_total",
		"ApplyGradients calls to the table refused for a gradient or learning rate that is not finite (NaN, +-Inf); nothing of them was applied.", []string{"ps", "table"}, nil)
)

type tableCollector struct{ m *Metrics }

func (c tableCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descEntries
	ch <- descMemory
	ch <- descLookup
	ch <- descApply
	ch <- descReject
}

func (c tableCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.mu.Lock()
	servers := append([]*Server(nil), c.m.servers...)
	c.m.mu.Unlock()
	for _, s := range servers {
		tables, _ := s.selected(nil)
		ps := strconv.Itoa(s.cfg.Index)
		for _, tb := range tables {
			ch <- prometheus.MustNewConstMetric(descEntries, prometheus.GaugeValue, float64(tb.t.Size()), ps, tb.name)
			ch <- prometheus.MustNewConstMetric(descMemory, prometheus.GaugeValue, float64(tb.t.MemoryBytes()), ps, tb.name)
			ch <- prometheus.MustNewConstMetric(descLookup, prometheus.CounterValue, float64(tb.lookupIDs.Load()), ps, tb.name)
			ch <- prometheus.MustNewConstMetric(descApply, prometheus.CounterValue, float64(tb.applyIDs.Load()), ps, tb.name)
			ch <- prometheus.MustNewConstMetric(descReject, prometheus.CounterValue, float64(tb.rejected.Load()), ps, tb.name)
		}
	}
}

// StatusHandler serves the server's status endpoint: /metrics (Prometheus), /healthz (200 "ok"
// while the process serves) and Go's /debug/pprof/.
func StatusHandler(m *Metrics) http.Handler { return promstatus.Handler(m.Registry()) }
