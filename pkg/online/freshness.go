package online

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// freshness measures each event's time from production to the first moment the served model
// includes it: when every PS sub-graph of the served model has taken a parameter sync push whose
// updates include events up to its time (the newest event time the push carries). The topic has
// one partition and the producer stamps times in order, so a push that includes an event's time
// includes every event before it.
type freshness struct {
	model string // the served model whose sub-graphs count ("<model>:ps_<i>")
	numPS int

	mu       sync.Mutex
	newest   map[string]int64 // by sub-graph: the newest event time pushed (ms)
	pending  []int64          // event times produced and not yet served, in order
	samples  []float64        // seconds, per served event
	since    int              // samples before the current report window
	counting bool             // events are counted once sync has started
}

func newFreshness(model string, numPS int) *freshness {
	return &freshness{model: model, numPS: numPS, newest: map[string]int64{}}
}

// start counts the events produced from now on (parameter sync runs: an event produced before
// came to serving with the export).
func (f *freshness) start() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counting = true
}

// produced records an event produced at ms.
func (f *freshness) produced(ms int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.counting {
		f.pending = append(f.pending, ms)
	}
}

// pushed is the model server's observer (psshard.Observer): a push to model says its updates
// include events up to newestMs.
func (f *freshness) pushed(model string, newestMs int64) {
	if !strings.HasPrefix(model, f.model+":ps_") {
		return
	}
	if _, err := strconv.Atoi(strings.TrimPrefix(model, f.model+":ps_")); err != nil {
		return
	}
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.newest[model] = max(f.newest[model], newestMs)
	if len(f.newest) < f.numPS {
		return // a sub-graph has no push yet: nothing is served whole
	}
	// The served model includes an event once its every sub-graph does.
	served := slices.Min(slices.Collect(maps.Values(f.newest)))
	n := 0
	for n < len(f.pending) && f.pending[n] <= served {
		f.samples = append(f.samples, now.Sub(time.UnixMilli(f.pending[n])).Seconds())
		n++
	}
	f.pending = f.pending[n:]
}

// quantiles are the p50 and p99 of every event served so far (all: true) or of those since the
// last window (all: false, which starts a new window), with their count.
func (f *freshness) quantiles(all bool) (p50, p99 float64, n int) {
	f.mu.Lock()
	s := f.samples
	if !all {
		s = f.samples[f.since:]
		f.since = len(f.samples)
	}
	s = slices.Clone(s)
	f.mu.Unlock()
	if len(s) == 0 {
		return 0, 0, 0
	}
	slices.Sort(s)
	return quantile(s, 0.5), quantile(s, 0.99), len(s)
}

// quantile is the q-quantile of sorted s (nearest rank).
func quantile(s []float64, q float64) float64 {
	i := int(q*float64(len(s)) + 0.5)
	return s[min(max(i-1, 0), len(s)-1)]
}
