package profile

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	"github.com/monolith-go/monolith/pkg/tfs/latency"
)

// fakeClient answers Predict after a short wait, failing every third call.
type fakeClient struct {
	servingapis.PredictionServiceClient
	calls atomic.Int64
}

func (f *fakeClient) Predict(ctx context.Context, _ *servingapis.PredictRequest, _ ...grpc.CallOption) (*servingapis.PredictResponse, error) {
	n := f.calls.Add(1)
	time.Sleep(time.Millisecond)
	if n%3 == 0 {
		return nil, status.Error(codes.Unavailable, "no")
	}
	return &servingapis.PredictResponse{}, nil
}

func TestRunCountsRequests(t *testing.T) {
	for _, qps := range []float64{0, 200} {
		f := &fakeClient{}
		p := &Load{Clients: []servingapis.PredictionServiceClient{f}, Requests: []*servingapis.PredictRequest{{}},
			Workers: 2, Duration: 200 * time.Millisecond, QPS: qps, Timeout: time.Second, Progress: time.Hour,
			Seed: 1, Log: slog.New(slog.DiscardHandler)}
		res := p.Run(context.Background())
		if res.Sent == 0 || res.Sent != uint64(f.calls.Load()) || res.Latency.Count()+res.Failed() != res.Sent {
			t.Fatalf("qps %g: sent %d, calls %d, ok %d, failed %d", qps, res.Sent, f.calls.Load(), res.Latency.Count(), res.Failed())
		}
		if res.Errors[codes.Unavailable] == 0 || res.FirstErrors[codes.Unavailable] != "no" || res.Interrupted {
			t.Errorf("qps %g: errors %v %v, interrupted %v", qps, res.Errors, res.FirstErrors, res.Interrupted)
		}
		if s := NewSummary(p, res); s.OK != res.Latency.Count() || s.Errors["Unavailable"] != res.Errors[codes.Unavailable] {
			t.Errorf("qps %g: summary %+v", qps, s)
		}
	}
}

func TestRunInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	p := &Load{Clients: []servingapis.PredictionServiceClient{&fakeClient{}}, Requests: []*servingapis.PredictRequest{{}},
		Workers: 1, Duration: time.Minute, Timeout: time.Second, Progress: time.Hour, Log: slog.New(slog.DiscardHandler)}
	start := time.Now()
	if res := p.Run(ctx); !res.Interrupted || time.Since(start) > 10*time.Second {
		t.Errorf("interrupted %v after %v", res.Interrupted, time.Since(start))
	}
}

func TestWriteText(t *testing.T) {
	h := &latency.Histogram{}
	for _, d := range []time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond} {
		h.Record(d)
	}
	p := &Load{Workers: 2, Duration: time.Second, Timeout: time.Second}
	s := NewSummary(p, Result{Elapsed: time.Second, Latency: h, Service: h, Sent: 4,
		Errors: map[codes.Code]uint64{codes.Unavailable: 1}, FirstErrors: map[codes.Code]string{codes.Unavailable: "down"}})
	s.Model, s.Signature, s.Targets, s.Input, s.InputSource, s.Inputs = "m", "serving_default", []string{"a:1"}, "instances", "random, seed 1", 1
	var b strings.Builder
	if err := s.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := "profile: model m, signature serving_default, a:1; closed loop, 2 in flight for 1s\n" +
		"inputs: 1 instances (random, seed 1)\n" +
		"requests: 4 sent, 3 ok, 1 failed\n" +
		"  Unavailable: 1 (down)\n" +
		"QPS: 3.0 over 1.000s\n"
	if got := b.String(); !strings.HasPrefix(got, want) || !strings.HasSuffix(got, "[Profile] Count: 3, Avg Latency: 2.000, P99 Latency: 3.000, QPS: 3.0\n") {
		t.Errorf("text:\n%s\nwant it to start with\n%s", got, want)
	}
}
