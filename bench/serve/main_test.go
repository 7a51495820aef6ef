package main

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	benchservespec "github.com/monolith-go/monolith/gen/spec/go/bench_serve"
)

// TestSearchQPS: the search's steps and answer over a simulated server whose p99 grows with the
// rate (rate/100 ms: 10 ms at 1000 QPS), and its failures and unsent requests.
func TestSearchQPS(t *testing.T) {
	flags := benchservespec.BenchServeFlags{StartQPS: 50, QPSFactor: 2, P99Bound: 10 * time.Millisecond}
	// linear's p99 is rate/100 ms; it achieves 2000 QPS at most.
	linear := func(qps float64) summary {
		s := summary{OK: 100, QPS: min(qps, 2000)}
		s.LatencyMS.P99 = qps / 100
		return s
	}
	tests := []struct {
		name      string
		server    func(qps float64) summary
		wantSteps []float64
		wantQPS   float64
	}{
		{"grows until saturated, then bisects", linear, []float64{50, 100, 200, 400, 800, 1600, 3200, 1200, 1000}, 1000},
		{"over at a low rate, within at higher ones", func(qps float64) summary {
			s := linear(qps)
			if qps == 100 {
				s.LatencyMS.P99 = 30 // a late wakeup
			}
			return s
		}, []float64{50, 100, 200, 400, 800, 1600, 3200, 1200, 1000}, 1000},
		{"a rate under 90% achieved is over", func(qps float64) summary {
			s := linear(qps)
			s.QPS = min(qps, 500)
			return s
		}, []float64{50, 100, 200, 400, 800, 600, 500}, 500},
		{"failures are over the bound", func(qps float64) summary {
			s := linear(qps)
			if qps > 150 {
				s.Errors = map[string]uint64{"UNAVAILABLE": 1}
			}
			return s
		}, []float64{50, 100, 200, 150, 175}, 150},
		{"unsent requests are over the bound", func(qps float64) summary {
			s := linear(qps)
			if qps >= 100 {
				s.Unsent = 1
			}
			return s
		}, []float64{50, 100, 75, 87.5}, 87.5},
		{"none within", func(qps float64) summary {
			s := linear(qps)
			s.QPS = min(qps, 150)
			s.LatencyMS.P99 = 50
			return s
		}, []float64{50, 100, 200}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var asked []float64
			r, err := searchQPS(context.Background(), flags, 1, func(_ context.Context, qps float64) (summary, error) {
				asked = append(asked, qps)
				return tc.server(qps), nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(asked, tc.wantSteps) || r.QPS != tc.wantQPS || len(r.Steps) != len(asked) {
				t.Errorf("rates %v, answer %v (%d steps); want %v, %v", asked, r.QPS, len(r.Steps), tc.wantSteps, tc.wantQPS)
			}
		})
	}
	boom := errors.New("boom")
	if _, err := searchQPS(context.Background(), flags, 1, func(context.Context, float64) (summary, error) { return summary{}, boom }); !errors.Is(err, boom) {
		t.Errorf("a failed run: %v", err)
	}
}

func TestParseSizes(t *testing.T) {
	tests := []struct {
		in   string
		want []int
		bad  bool
	}{
		{"1,256", []int{1, 256}, false},
		{" 8 ", []int{8}, false},
		{"0", nil, true},
		{"1,x", nil, true},
		{"", nil, true},
	}
	for _, tc := range tests {
		got, err := parseSizes(tc.in)
		if (err != nil) != tc.bad || !slices.Equal(got, tc.want) {
			t.Errorf("parseSizes(%q) = %v, %v", tc.in, got, err)
		}
	}
}

// TestSearchQPSRepeats: with --repeats 3 one stalled run of a rate does not decide it (the median
// does), two do.
func TestSearchQPSRepeats(t *testing.T) {
	flags := benchservespec.BenchServeFlags{StartQPS: 50, QPSFactor: 2, P99Bound: 10 * time.Millisecond, Repeats: 3}
	for _, tc := range []struct {
		name    string
		stalls  int // runs of each rate stalled (p99 100 ms)
		wantQPS float64
	}{
		{"one stall of three", 1, 1000},
		{"two stalls of three", 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := map[float64]int{}
			r, err := searchQPS(context.Background(), flags, 1, func(_ context.Context, qps float64) (summary, error) {
				calls[qps]++
				s := summary{OK: 100, QPS: min(qps, 2000)}
				s.LatencyMS.P99 = qps / 100
				if calls[qps] <= tc.stalls {
					s.LatencyMS.P99 = 100
				}
				return s, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if r.QPS != tc.wantQPS {
				t.Errorf("answer %v, want %v (steps %+v)", r.QPS, tc.wantQPS, r.Steps)
			}
			for q, n := range calls {
				if n != 3 {
					t.Errorf("rate %v run %d times, want 3", q, n)
				}
			}
			if st := r.Steps[0]; st.P99MinMS != 0.5 || st.P99MaxMS != 100 {
				t.Errorf("first step's p99 range %v-%v, want 0.5-100", st.P99MinMS, st.P99MaxMS)
			}
		})
	}
}
