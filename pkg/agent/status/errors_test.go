package agentstatus

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

func TestErrorRing(t *testing.T) {
	type rec struct{ level, msg, attrs string }
	tests := []struct {
		name string
		size int
		// nextLevel is the level of the handler the ring wraps.
		nextLevel slog.Level
		log       func(l *slog.Logger)
		want      []rec // the ring's records, oldest first
		total     uint64
		// passed are the lines the wrapped handler must get (substrings, in order).
		passed []string
	}{
		{
			name: "warn and error kept with attributes, info and debug not", size: 5, nextLevel: slog.LevelInfo,
			log: func(l *slog.Logger) {
				l.Debug("debug line")
				l.Info("info line", "k", 1)
				l.Warn("tfs reload failed, will retry", "models", 3, "err", errors.New("unavailable"))
				l.With("component", "agent_v3").WithGroup("zk").Error("session lost", "state", "LOST")
			},
			want: []rec{
				{"WARN", "tfs reload failed, will retry", "models=3 err=unavailable"},
				{"ERROR", "session lost", "component=agent_v3 zk.state=LOST"},
			},
			total:  2,
			passed: []string{"info line", "tfs reload failed", "component=agent_v3 zk.state=LOST"},
		},
		{
			name: "warnings kept although the log prints errors only", size: 5, nextLevel: slog.LevelError,
			log:    func(l *slog.Logger) { l.Warn("quiet warning", "a", "b") },
			want:   []rec{{"WARN", "quiet warning", "a=b"}},
			total:  1,
			passed: nil,
		},
		{
			name: "bounded: the newest size records", size: 3, nextLevel: slog.LevelInfo,
			log: func(l *slog.Logger) {
				for i := range 7 {
					l.Warn("w", "i", i)
				}
			},
			want:   []rec{{"WARN", "w", "i=4"}, {"WARN", "w", "i=5"}, {"WARN", "w", "i=6"}},
			total:  7,
			passed: []string{"i=0", "i=6"},
		},
		{
			name: "a huge value is cut", size: 2, nextLevel: slog.LevelInfo,
			log: func(l *slog.Logger) { l.Error(strings.Repeat("m", 3000), "layout", strings.Repeat("x", 1<<20)) },
			want: []rec{{"ERROR", strings.Repeat("m", maxRecordMessage) + "… (1976 more bytes)",
				"layout=" + strings.Repeat("x", maxRecordAttrs-len("layout=")) + fmt.Sprintf("… (%d more bytes)", 1<<20+len("layout=")-maxRecordAttrs)}},
			total:  1,
			passed: []string{strings.Repeat("x", 1<<20)}, // the log itself keeps everything
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			ring := NewErrorRing(tc.size)
			tc.log(slog.New(ring.Handler(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: tc.nextLevel}))))
			got := ring.Records()
			if len(got) != len(tc.want) {
				t.Fatalf("%d records, want %d: %+v", len(got), len(tc.want), got)
			}
			for i, w := range tc.want {
				g := got[i]
				if g.Level != w.level || g.Message != w.msg || g.Attrs != w.attrs || g.Time.IsZero() {
					t.Errorf("record %d = %s %q %q (time %v), want %s %q %q", i, g.Level, trim(g.Message), trim(g.Attrs), g.Time,
						w.level, trim(w.msg), trim(w.attrs))
				}
			}
			if ring.Total() != tc.total {
				t.Errorf("Total = %d, want %d", ring.Total(), tc.total)
			}
			rest := out.String()
			for _, p := range tc.passed {
				i := strings.Index(rest, p)
				if i < 0 {
					t.Fatalf("the wrapped handler lacks %q (in order):\n%s", trim(p), trim(out.String()))
				}
				rest = rest[i+len(p):]
			}
			if tc.passed == nil && out.Len() != 0 {
				t.Errorf("the wrapped handler got records below its level:\n%s", out.String())
			}
		})
	}
	var nilRing *ErrorRing
	if nilRing.Records() != nil || nilRing.Total() != 0 {
		t.Error("a nil ring has records")
	}
}

func trim(s string) string {
	if len(s) > 80 {
		return s[:40] + "..." + s[len(s)-40:]
	}
	return s
}

// TestErrorRingConcurrent: loggers derived from one ring log at once (go test -race checks the
// ring's locking); every record lands whole.
func TestErrorRingConcurrent(t *testing.T) {
	ring := NewErrorRing(50)
	base := slog.New(ring.Handler(slog.DiscardHandler))
	var wg sync.WaitGroup
	for g := range 8 {
		l := base.With("g", g)
		wg.Go(func() {
			for i := range 100 {
				l.Warn("w", "i", i)
			}
		})
	}
	wg.Wait()
	if ring.Total() != 800 || len(ring.Records()) != 50 {
		t.Fatalf("total %d, kept %d", ring.Total(), len(ring.Records()))
	}
	for _, r := range ring.Records() {
		if !strings.HasPrefix(r.Attrs, "g=") || !strings.Contains(r.Attrs, " i=") || strings.Count(r.Attrs, "=") != 2 {
			t.Errorf("mangled record %+v", r)
		}
	}
}
