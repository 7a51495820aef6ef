package agentstatus

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/monolith-go/monolith/pkg/promstatus"
	"github.com/monolith-go/monolith/pkg/zk"
)

// Namespace prefixes every metric of the agent.
const Namespace = "monolith_agent"

// Metrics are the agent's Prometheus metrics, on a registry of their own (so tests and several
// agents in one process do not collide). Every method is safe for concurrent use and does nothing
// on a nil *Metrics, so an agent built without metrics needs no checks.
type Metrics struct {
	reg *prometheus.Registry

	rpcs          *promstatus.RPCMetrics
	reloads       *prometheus.CounterVec
	reloadSeconds prometheus.Histogram
	layouts       *prometheus.CounterVec
	skipped       prometheus.Counter
	syncs         *prometheus.CounterVec
	reports       *prometheus.CounterVec
	zkStates      *prometheus.CounterVec
	zkConnected   prometheus.Gauge
	zkWatchEvents *prometheus.CounterVec
	models        *prometheus.GaugeVec
	failedLoads   *prometheus.GaugeVec
	loadFailures  *prometheus.CounterVec
	restarts      *prometheus.CounterVec
	mmCounters    *prometheus.CounterVec
	mmStores      *prometheus.GaugeVec
	copySeconds   *prometheus.HistogramVec
	copyBytes     *prometheus.CounterVec
}

// NewMetrics registers the agent's metrics, the build info gauge (monolith_build_info) and the Go
// runtime and process collectors, on a new registry.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: promstatus.NewRegistry(),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "tfs_reloads_total",
			Help: "Model server configs sent to TF Serving (HandleReloadConfigRequest), by result (ok, error)."}, []string{"result"}),
		reloadSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "tfs_reload_duration_seconds",
			Help: "Latency of TF Serving reloads.", Buckets: prometheus.ExponentialBuckets(.001, 4, 10)}),
		layouts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "layout_updates_total",
			Help: "Layout callbacks, by result: written (a new model server config), unchanged, error (the previous config stays)."}, []string{"result"}),
		skipped: prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "layout_entries_skipped_total",
			Help: "Layout entries the filters accept that were skipped for a bad deploy config (the rest of the layout loads)."}),
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "binding_syncs_total",
			Help: "Syncs of the available saved models into bindings, by result (ok, error)."}, []string{"result"}),
		reports: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "service_info_reports_total",
			Help: "Service info reports, by result (ok, error)."}, []string{"result"}),
		zkStates: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "zk_state_changes_total",
			Help: "ZooKeeper connection state changes, by new state (CONNECTED, SUSPENDED, LOST)."}, []string{"state"}),
		zkConnected: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "zk_connected",
			Help: "1 while the ZooKeeper session is connected, else 0."}),
		zkWatchEvents: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "zk_watch_events_total",
			Help: "ZooKeeper watch calls, by watch kind (data, children) and event (INITIAL for the first call, NONE, CREATED, DELETED, CHANGED, CHILD)."},
			[]string{"kind", "event"}),
		models: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: "tfs_models",
			Help: "Models in TF Serving's config, by state of their newest available (else newest) version, as last read."}, []string{"state"}),
		failedLoads: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: "tfs_failed_loads",
			Help: "Versions TF Serving reports failed to load (END with an error), by model, as last read."}, []string{"model"}),
		loadFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "tfs_load_failures_total",
			Help: "Failed loads of a version seen in TF Serving's model status, by model (each failure once)."}, []string{"model"}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "tfs_restarts_total",
			Help: "Restarts of TF Serving after its process exited, by result (ok: a new process runs, error: it could not be started)."}, []string{"result"}),
		mmCounters: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "model_manager_events_total",
			Help: "The model manager's counters (loop_once_failed), by name and model."}, []string{"name", "model"}),
		copySeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "model_copy_duration_seconds",
			Help:    "Duration of the model manager's copies of a model version into the serving area, by model.",
			Buckets: prometheus.ExponentialBuckets(.01, 4, 10)}, []string{"model"}),
		copyBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "model_copy_bytes_total",
			Help: "Bytes the model manager copied into the serving area, by model."}, []string{"model"}),
		mmStores: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: "model_manager_delay_seconds",
			Help: "The model manager's delays (version.delay, update.delay), by name and model."}, []string{"name", "model"}),
	}
	m.rpcs = promstatus.NewRPCMetrics(m.reg, Namespace, "AgentService",
		[]float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1})
	m.reg.MustRegister(m.reloads, m.reloadSeconds, m.layouts, m.skipped, m.syncs, m.reports,
		m.zkStates, m.zkConnected, m.zkWatchEvents, m.models, m.failedLoads, m.loadFailures, m.restarts, m.mmCounters, m.mmStores, m.copySeconds, m.copyBytes)
	return m
}

// Registry is the registry the metrics are on (to add more, or to gather them).
func (m *Metrics) Registry() *prometheus.Registry {
	if m == nil {
		return nil
	}
	return m.reg
}

// Handler serves the metrics in the Prometheus text format; nil Metrics serve 404.
func (m *Metrics) Handler() http.Handler { return promstatus.MetricsHandler(m.Registry()) }

func result(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}

// UnaryServerInterceptor counts and times the gRPC calls of a server (the AgentService), by the
// method's short name and the status code of its answer.
func (m *Metrics) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	var rpcs *promstatus.RPCMetrics // nil without metrics: calls pass through
	if m != nil {
		rpcs = m.rpcs
	}
	return rpcs.UnaryServerInterceptor()
}

// ObserveReload records one TF Serving reload and how long it took.
func (m *Metrics) ObserveReload(d time.Duration, err error) {
	if m == nil {
		return
	}
	m.reloads.WithLabelValues(result(err)).Inc()
	m.reloadSeconds.Observe(d.Seconds())
}

// Layout results (LayoutUpdate's argument).
const (
	LayoutWritten   = "written"
	LayoutUnchanged = "unchanged"
	LayoutError     = "error"
)

// LayoutUpdate records one layout callback with its result (LayoutWritten, LayoutUnchanged,
// LayoutError).
func (m *Metrics) LayoutUpdate(res string) {
	if m == nil {
		return
	}
	m.layouts.WithLabelValues(res).Inc()
}

// LayoutEntrySkipped records one layout entry skipped for a bad deploy config.
func (m *Metrics) LayoutEntrySkipped() {
	if m == nil {
		return
	}
	m.skipped.Inc()
}

// Sync records one sync of the available saved models into bindings.
func (m *Metrics) Sync(err error) {
	if m == nil {
		return
	}
	m.syncs.WithLabelValues(result(err)).Inc()
}

// Report records one service info report.
func (m *Metrics) Report(err error) {
	if m == nil {
		return
	}
	m.reports.WithLabelValues(result(err)).Inc()
}

// SetModelStates sets the tfs_models gauge from a count of models per state name; states not in
// counts drop to 0.
func (m *Metrics) SetModelStates(counts map[string]int) {
	if m == nil {
		return
	}
	m.models.Reset()
	for st, n := range counts {
		m.models.WithLabelValues(st).Set(float64(n))
	}
}

// SetFailedLoads sets the tfs_failed_loads gauge from a count of failed versions per model;
// models not in counts drop out.
func (m *Metrics) SetFailedLoads(counts map[string]int) {
	if m == nil {
		return
	}
	m.failedLoads.Reset()
	for model, n := range counts {
		m.failedLoads.WithLabelValues(model).Set(float64(n))
	}
}

// LoadFailure counts one failed load of a version of model, when it is first seen.
func (m *Metrics) LoadFailure(model string) {
	if m == nil {
		return
	}
	m.loadFailures.WithLabelValues(model).Inc()
}

// TFSRestart counts one restart of TF Serving: err is why no process could be started (nil: one
// runs).
func (m *Metrics) TFSRestart(err error) {
	if m == nil {
		return
	}
	m.restarts.WithLabelValues(result(err)).Inc()
}

// TrackZK counts c's connection state changes and sets zk_connected from now on; the returned
// function stops it.
func (m *Metrics) TrackZK(c zk.Client) (stop func()) {
	if m == nil || c == nil {
		return func() {}
	}
	m.setConnected(c.State())
	return c.AddListener(func(s zk.State) {
		m.zkStates.WithLabelValues(s.String()).Inc()
		m.setConnected(s)
	})
}

func (m *Metrics) setConnected(s zk.State) {
	if s == zk.StateConnected {
		m.zkConnected.Set(1)
	} else {
		m.zkConnected.Set(0)
	}
}

func (m *Metrics) watchEvent(kind string, ev *zk.WatchEvent) {
	name := "INITIAL"
	if ev != nil {
		name = ev.Type.String()
	}
	m.zkWatchEvents.WithLabelValues(kind, name).Inc()
}

// ModelManager adapts the metrics to the model manager's metrics client (modelmgr.Metrics):
// counters become model_manager_events_total, stores model_manager_delay_seconds (the model
// manager's stores are delays in seconds).
func (m *Metrics) ModelManager() *ModelManagerMetrics { return &ModelManagerMetrics{m: m} }

// ModelManagerMetrics implements modelmgr.Metrics on Metrics.
type ModelManagerMetrics struct{ m *Metrics }

// EmitCounter implements modelmgr.Metrics.
func (a *ModelManagerMetrics) EmitCounter(name string, value int64, tags map[string]string) {
	if a == nil || a.m == nil || value < 0 {
		return
	}
	a.m.mmCounters.WithLabelValues(name, tags["model"]).Add(float64(value))
}

// EmitStore implements modelmgr.Metrics.
func (a *ModelManagerMetrics) EmitStore(name string, value int64, tags map[string]string) {
	if a == nil || a.m == nil {
		return
	}
	a.m.mmStores.WithLabelValues(name, tags["model"]).Set(float64(value))
}

// ObserveCopy implements modelmgr.CopyObserver: one model version copied, its bytes and duration.
func (a *ModelManagerMetrics) ObserveCopy(model string, bytes int64, d time.Duration) {
	if a == nil || a.m == nil {
		return
	}
	a.m.copySeconds.WithLabelValues(model).Observe(d.Seconds())
	a.m.copyBytes.WithLabelValues(model).Add(float64(bytes))
}
