package promstatus

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestRPCMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := NewRPCMetrics(reg, "ns", "TestService", []float64{.1, 1})
	tests := []struct {
		name       string
		fullMethod string
		err        error
	}{
		{"ok", "/pkg.TestService/Lookup", nil},
		{"ok again", "/pkg.TestService/Lookup", nil},
		{"status error", "/pkg.TestService/Lookup", status.Error(codes.InvalidArgument, "bad")},
		{"plain error is Unknown", "/x.Other/Apply", errors.New("boom")},
		{"no slash", "Bare", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := r.UnaryServerInterceptor()(context.Background(), "req", &grpc.UnaryServerInfo{FullMethod: tt.fullMethod},
				func(_ context.Context, req any) (any, error) { return req.(string) + "-resp", tt.err })
			if resp != "req-resp" || !errors.Is(err, tt.err) {
				t.Errorf("interceptor changed the answer: %v, %v", resp, err)
			}
		})
	}
	got := map[string]uint64{} // "name method code" -> count
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += " " + l.GetName() + "=" + l.GetValue()
			}
			if c := m.GetCounter(); c != nil {
				got[key] = uint64(c.GetValue())
			} else {
				got[key] = m.GetHistogram().GetSampleCount()
			}
		}
	}
	want := map[string]uint64{
		"ns_rpc_requests_total code=OK method=Lookup":              2,
		"ns_rpc_requests_total code=InvalidArgument method=Lookup": 1,
		"ns_rpc_requests_total code=Unknown method=Apply":          1,
		"ns_rpc_requests_total code=OK method=Bare":                1,
		"ns_rpc_duration_seconds method=Lookup":                    3,
		"ns_rpc_duration_seconds method=Apply":                     1,
		"ns_rpc_duration_seconds method=Bare":                      1,
	}
	if !maps.Equal(got, want) {
		t.Errorf("metrics = %v, want %v", got, want)
	}
	for _, mf := range mfs {
		if want := "TestService RPC"; !strings.HasPrefix(mf.GetHelp(), want) {
			t.Errorf("%s help %q does not start with %q", mf.GetName(), mf.GetHelp(), want)
		}
	}
}

func TestNilRPCMetrics(t *testing.T) {
	var r *RPCMetrics
	resp, err := r.UnaryServerInterceptor()(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/a/B"},
		func(context.Context, any) (any, error) { return 1, nil })
	if resp != 1 || err != nil {
		t.Errorf("interceptor = %v, %v", resp, err)
	}
}
