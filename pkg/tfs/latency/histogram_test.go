package latency

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestBuckets(t *testing.T) {
	// Every value falls in the bucket whose range holds it, buckets are contiguous and at most
	// 1/128 of their values wide.
	prevMax := int64(-1)
	for i := range bucketOf(math.MaxInt64) + 1 {
		lo, hi := prevMax+1, bucketMax(i)
		if hi < lo {
			t.Fatalf("bucket %d: [%d, %d]", i, lo, hi)
		}
		if bucketOf(lo) != i || bucketOf(hi) != i {
			t.Fatalf("bucket %d = [%d, %d], but bucketOf gives %d and %d", i, lo, hi, bucketOf(lo), bucketOf(hi))
		}
		if lo >= exactBelow && float64(hi-lo) > float64(lo)/subBuckets {
			t.Fatalf("bucket %d = [%d, %d] is wider than 1/128 of its values", i, lo, hi)
		}
		prevMax = hi
	}
	if prevMax != math.MaxInt64 {
		t.Fatalf("buckets end at %d", prevMax)
	}
}

// exactQuantile is the reference's: sorted[int(round((n - 1) * q))].
func exactQuantile(sorted []time.Duration, q float64) time.Duration {
	return sorted[int(math.Round(float64(len(sorted)-1)*q))]
}

func TestHistogramQuantiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name string
		gen  func() time.Duration
		n    int
	}{
		{"exact small values", func() time.Duration { return time.Duration(rng.IntN(256)) }, 1000},
		{"uniform ms", func() time.Duration { return time.Duration(rng.Int64N(int64(50 * time.Millisecond))) }, 10000},
		{"log-normal", func() time.Duration { return time.Duration(math.Exp(rng.NormFloat64()*2+13)) + time.Microsecond }, 20000},
		{"one value", func() time.Duration { return 1234567 * time.Nanosecond }, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Recorded in three histograms merged into one, as the workers' are.
			parts := []*Histogram{{}, {}, {}}
			var all []time.Duration
			var sum float64
			for i := range tc.n {
				d := tc.gen()
				parts[i%3].Record(d)
				all = append(all, d)
				sum += float64(d)
			}
			h := &Histogram{}
			for _, p := range parts {
				h.Merge(p)
			}
			slices.Sort(all)
			if h.n != uint64(tc.n) || h.min != all[0] || h.max != all[len(all)-1] || h.Mean() != time.Duration(sum/float64(tc.n)) {
				t.Fatalf("n %d min %v max %v mean %v; want %d %v %v %v", h.n, h.min, h.max, h.Mean(), tc.n, all[0], all[len(all)-1], time.Duration(sum/float64(tc.n)))
			}
			for _, q := range []float64{0, 0.5, 0.9, 0.99, 0.999, 1} {
				got, want := h.Quantile(q), exactQuantile(all, q)
				// Never below the true value, at most 1/128 above it.
				if got < want || float64(got-want) > float64(want)/subBuckets {
					t.Errorf("q %v: %v, exact %v", q, got, want)
				}
			}
			var inBands uint64
			bands := h.Bands()
			for i, b := range bands {
				inBands += b.Count
				if i > 0 && b.Upper != 2*bands[i-1].Upper {
					t.Errorf("Band %d: upper %v after %v", i, b.Upper, bands[i-1].Upper)
				}
			}
			if inBands != h.n || bands[len(bands)-1].Upper < h.max || (bands[0].Upper > time.Microsecond && bands[0].Upper/2 >= h.min) {
				t.Errorf("bands %v: %d values, want %d from %v to %v", bands, inBands, h.n, h.min, h.max)
			}
		})
	}
	empty := &Histogram{}
	if empty.Quantile(0.99) != 0 || empty.Mean() != 0 || empty.Bands() != nil {
		t.Error("empty Histogram")
	}
}
