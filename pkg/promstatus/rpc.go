package promstatus

import (
	"context"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// RPCMetrics count and time a gRPC server's unary calls as <namespace>_rpc_requests_total (by
// method and status code) and <namespace>_rpc_duration_seconds (by method). The method is its
// short name: "HeartBeat" for "/monolith.serving.agent_service.AgentService/HeartBeat".
type RPCMetrics struct {
	calls   *prometheus.CounterVec
	seconds *prometheus.HistogramVec
}

// NewRPCMetrics registers the RPC metrics of service (the name their help gives: "AgentService")
// on reg, with the latency histogram's buckets.
func NewRPCMetrics(reg prometheus.Registerer, namespace, service string, buckets []float64) *RPCMetrics {
	r := &RPCMetrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "rpc_requests_total",
			Help: service + " RPCs handled, by method and gRPC status code."}, []string{"method", "code"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "rpc_duration_seconds",
			Help: service + " RPC latency, by method.", Buckets: buckets}, []string{"method"}),
	}
	reg.MustRegister(r.calls, r.seconds)
	return r
}

// UnaryServerInterceptor counts and times each call; on a nil *RPCMetrics it only passes the call
// on (a server built without metrics).
func (r *RPCMetrics) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if r == nil {
			return handler(ctx, req)
		}
		start := time.Now()
		resp, err := handler(ctx, req)
		method := info.FullMethod[strings.LastIndexByte(info.FullMethod, '/')+1:]
		r.seconds.WithLabelValues(method).Observe(time.Since(start).Seconds())
		r.calls.WithLabelValues(method, status.Code(err).String()).Inc()
		return resp, err
	}
}
