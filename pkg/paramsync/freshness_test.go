package paramsync

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/eventtime"
	"github.com/monolith-go/monolith/pkg/modelserver"
	"github.com/monolith-go/monolith/pkg/modelserver/exporttest"
	"github.com/monolith-go/monolith/pkg/modelserver/psshard"
)

// TestFreshness follows a batch's newest event time from the training step through the PS
// client's ApplyGradients, the training PS's watermark and a push's gRPC metadata to the serving
// replica's metrics: the model server knows, per PS sub-graph, the newest event its parameters
// include, and observes event -> served.
func TestFreshness(t *testing.T) {
	leakcheck.Check(t)
	ctx := tctx(t)
	j := exporttest.NewJob(t, 2, []int{8})
	for _, s := range j.PS {
		s.SetTrackTouched(true)
	}
	j.Train(ctx, 2) // no event time: files
	base := filepath.Join(t.TempDir(), "demo")
	j.Export(ctx, base, 2)
	served := modelserver.NewMetrics()
	srv := exporttest.StartModelServer(t, modelserver.Loaders{modelserver.KindPS: psshard.NewLoader(served.Fresh)},
		exporttest.ModelConfig(t, "demo:ps_0", filepath.Join(base, "ps_0")), exporttest.ModelConfig(t, "demo:ps_1", filepath.Join(base, "ps_1")))
	reg := prometheus.NewRegistry()
	pm, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	pushers := make([]*Pusher, len(j.PS))
	for i, s := range j.PS {
		pushers[i] = newPusher(t, Config{Source: s, Targets: StaticTargets{srv.Addr()}, Model: "demo", Shard: i, Metrics: pm})
	}
	pushAll := func(want int64) {
		t.Helper()
		for i, p := range pushers {
			res, err := p.PushOnce(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if res.NewestEventTime != want {
				t.Errorf("ps_%d pushed newest event time %d, want %d", i, res.NewestEventTime, want)
			}
			if res.Taken == 0 {
				t.Errorf("ps_%d pushed nothing", i)
			}
		}
	}
	pushAll(0)
	if got := gather(t, served.Registry()); got[`monolith_model_server_freshness_seconds_count{model="demo:ps_0"}`] != 0 {
		t.Errorf("a push without an event time was observed: %v", got)
	}

	step := func(at time.Time) {
		t.Helper()
		b := j.Batch(j.Examples(7, 64))
		if _, err := j.Model.Step(eventtime.With(ctx, at), b); err != nil {
			t.Fatal(err)
		}
	}
	newest := time.Now().Add(-1500 * time.Millisecond).Truncate(time.Millisecond)
	step(newest.Add(-time.Second))
	step(newest)
	step(newest.Add(-3 * time.Second)) // an older batch does not move the watermark back
	for i, s := range j.PS {
		if got := s.NewestEventTime(); got != newest.UnixMilli() {
			t.Errorf("ps_%d newest event time %d, want %d", i, got, newest.UnixMilli())
		}
	}
	pushAll(newest.UnixMilli())
	got := gather(t, served.Registry())
	for _, sub := range []string{"demo:ps_0", "demo:ps_1"} {
		if v := got[`monolith_model_server_newest_event_timestamp_seconds{model="`+sub+`"}`]; v != float64(newest.UnixMilli())/1e3 {
			t.Errorf("%s: served newest event %v, want %v", sub, v, float64(newest.UnixMilli())/1e3)
		}
		if n := got[`monolith_model_server_freshness_seconds_count{model="`+sub+`"}`]; n != 1 {
			t.Errorf("%s: %v freshness observations, want 1", sub, n)
		}
		// The event was 1.5 s old when pushed: event -> served is at least that.
		if s := got[`monolith_model_server_freshness_seconds_sum{model="`+sub+`"}`]; s < 1.5 || s > 60 {
			t.Errorf("%s: freshness %v s, want about 1.5", sub, s)
		}
	}
	if n := gather(t, reg)[`monolith_parameter_sync_freshness_seconds_count`]; n != 2 {
		t.Errorf("the pushers observed freshness %v times, want 2 (one per shard)", n)
	}
}
