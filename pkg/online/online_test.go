package online

import (
	"bytes"
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/leakcheck"
)

// TestOnline runs the demo short: every event is trained, parameter sync makes the served model
// fresh within seconds, and after the drift the served model ranks the newest events better than
// the copy frozen before it.
func TestOnline(t *testing.T) {
	leakcheck.Check(t)
	cfg := DefaultConfig()
	cfg.Rate, cfg.Duration, cfg.Warmup, cfg.DriftAfter, cfg.ReportEvery = 2500, 24*time.Second, 4*time.Second, 8*time.Second, 2*time.Second
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sum, err := Run(ctx, cfg, &out)
	t.Logf("output:\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	if sum.Events < int64(0.8*cfg.Rate*cfg.Duration.Seconds()) || sum.Trained != sum.Events {
		t.Errorf("produced %d events, trained %d: want about %.0f, all trained", sum.Events, sum.Trained, cfg.Rate*cfg.Duration.Seconds())
	}
	if sum.Served < int(sum.Events/3) || sum.P50 <= 0 || sum.P50 > 2 || sum.P99 > 3 {
		t.Errorf("freshness of %d events: p50 %.2fs p99 %.2fs, want p50 <= 2s, p99 <= 3s", sum.Served, sum.P50, sum.P99)
	}
	if sum.ServedAUC < sum.FrozenAUC+0.02 {
		t.Errorf("after the drift the served model's AUC %.4f, the frozen copy's %.4f: want the served one better", sum.ServedAUC, sum.FrozenAUC)
	}
	if !regexp.MustCompile(`(?m)^online: events=\d+ freshness p50=\d+\.\d\ds p99=\d+\.\d\ds served auc=0\.\d{4} frozen auc=0\.\d{4}$`).MatchString(out.String()) {
		t.Errorf("no summary line")
	}
}
