// Package promstatus is the Prometheus and status-endpoint plumbing the servers share: a registry
// that starts with the metrics every process exports (monolith_build_info, the Go runtime's and
// the process's), the metrics of a gRPC server's calls, and the plain status handler (/metrics,
// /healthz, /debug/pprof/).
package promstatus

import (
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/monolith-go/monolith/internal/buildinfo"
)

// NewRegistry returns a new registry (one per component, so tests and several components in one
// process do not collide) with the build info gauge and the Go runtime and process collectors on
// it; the caller registers its own metrics there.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(buildinfo.Gauge(buildinfo.Read()), collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// MetricsHandler serves reg's metrics in the Prometheus text format; a nil reg serves 404.
func MetricsHandler(reg *prometheus.Registry) http.Handler {
	if reg == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}

// Handler serves the status endpoint: /healthz (200 "ok" while the process serves), /metrics
// (reg's; none, so 404, when reg is nil) and Go's /debug/pprof/.
func Handler(reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	})
	if reg != nil {
		mux.Handle("GET /metrics", MetricsHandler(reg))
	}
	HandlePprof(mux)
	return mux
}

// HandlePprof adds Go's /debug/pprof/ pages to mux (net/http/pprof registers them only on
// http.DefaultServeMux, which the status endpoints do not serve).
func HandlePprof(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", pprof.Index) // and the named profiles: heap, goroutine, ...
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}
