package promstatus

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestHandler(t *testing.T) {
	reg := NewRegistry()
	own := prometheus.NewCounter(prometheus.CounterOpts{Name: "promstatus_test_total", Help: "A caller's own metric."})
	reg.MustRegister(own)
	own.Add(3)
	tests := []struct {
		name     string
		reg      *prometheus.Registry
		method   string
		path     string
		wantCode int
		wantBody []string // substrings
	}{
		{"healthz", reg, "GET", "/healthz", 200, []string{"ok\n"}},
		{"metrics: process metrics and the caller's", reg, "GET", "/metrics", 200,
			[]string{"monolith_build_info{", "go_goroutines ", "process_start_time_seconds ", "promstatus_test_total 3"}},
		{"metrics only by GET", reg, "POST", "/metrics", http.StatusMethodNotAllowed, nil},
		{"no metrics without a registry", nil, "GET", "/metrics", 404, nil},
		{"healthz without a registry", nil, "GET", "/healthz", 200, []string{"ok\n"}},
		{"pprof index", reg, "GET", "/debug/pprof/", 200, []string{"goroutine"}},
		{"pprof named profile", nil, "GET", "/debug/pprof/goroutine?debug=1", 200, []string{"goroutine profile:"}},
		{"pprof cmdline", reg, "GET", "/debug/pprof/cmdline", 200, nil},
		{"pprof symbol", reg, "GET", "/debug/pprof/symbol", 200, []string{"num_symbols"}},
		{"unknown path", reg, "GET", "/nope", 404, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			Handler(tt.reg).ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, nil))
			body, _ := io.ReadAll(rec.Result().Body)
			if rec.Code != tt.wantCode {
				t.Fatalf("%s %s = %d, want %d (%q)", tt.method, tt.path, rec.Code, tt.wantCode, body)
			}
			for _, want := range tt.wantBody {
				if !strings.Contains(string(body), want) {
					t.Errorf("%s %s lacks %q", tt.method, tt.path, want)
				}
			}
		})
	}
}

func TestMetricsHandler(t *testing.T) {
	tests := []struct {
		name     string
		reg      *prometheus.Registry
		wantCode int
		wantBody string
	}{
		{"registry", NewRegistry(), 200, "monolith_build_info{"},
		{"nil registry", nil, 404, "404 page not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			MetricsHandler(tt.reg).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
			if rec.Code != tt.wantCode || !strings.Contains(rec.Body.String(), tt.wantBody) {
				t.Errorf("= %d %q, want %d with %q", rec.Code, rec.Body.String(), tt.wantCode, tt.wantBody)
			}
		})
	}
}
