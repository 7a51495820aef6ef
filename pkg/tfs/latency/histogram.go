// Package latency records request latencies in a log-linear histogram and reads its
// percentiles, mean and power-of-two bands.
package latency

import (
	"math"
	"math/bits"
	"time"
)

// Histogram counts durations in log-linear buckets, as HdrHistogram does with two significant
// digits: exact below 256 ns, then 128 buckets per power of two, so a reported percentile is at
// most 1/128 (0.8%) above the true one. Count, min, max and the sum (for the mean) are exact.
// Memory grows with the largest value (about 1,900 buckets for a second), not with the count.
type Histogram struct {
	counts   []uint64
	n        uint64
	sum      float64 // nanoseconds
	min, max time.Duration
}

const (
	subBits    = 7
	subBuckets = 1 << subBits // buckets per power of two
	exactBelow = 2 * subBuckets
)

// bucketOf is the bucket index of a non-negative value.
func bucketOf(v int64) int {
	if v < exactBelow {
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - (subBits + 1) // v >> shift is in [128, 256)
	return exactBelow + (shift-1)*subBuckets + int(v>>shift) - subBuckets
}

// bucketMax is the largest value of bucket i.
func bucketMax(i int) int64 {
	if i < exactBelow {
		return int64(i)
	}
	j := i - exactBelow
	shift := j/subBuckets + 1
	m := uint64(j%subBuckets + subBuckets)
	return int64(min((m+1)<<shift-1, math.MaxInt64)) // the last bucket ends at 2^63-1
}

// Record adds one duration (negative ones count as 0).
func (h *Histogram) Record(d time.Duration) {
	d = max(d, 0)
	i := bucketOf(int64(d))
	if i >= len(h.counts) {
		h.counts = append(h.counts, make([]uint64, i+1-len(h.counts))...)
	}
	h.counts[i]++
	if h.n == 0 || d < h.min {
		h.min = d
	}
	h.max = max(h.max, d)
	h.n++
	h.sum += float64(d)
}

// Merge adds o's values to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.n == 0 {
		return
	}
	if len(o.counts) > len(h.counts) {
		h.counts = append(h.counts, make([]uint64, len(o.counts)-len(h.counts))...)
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
}

// Clone is a copy of h that shares nothing with it.
func (h *Histogram) Clone() *Histogram {
	c := *h
	c.counts = append([]uint64(nil), h.counts...)
	return &c
}

// Count is the number of recorded values.
func (h *Histogram) Count() uint64 { return h.n }

// Min is the smallest recorded value (0 when empty).
func (h *Histogram) Min() time.Duration { return h.min }

// Max is the largest recorded value (0 when empty).
func (h *Histogram) Max() time.Duration { return h.max }

// Mean is the exact mean of the recorded values (0 when empty).
func (h *Histogram) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sum / float64(h.n))
}

// Quantile is the value of rank round((n-1)*q) in sorted order, as the reference's p99 takes it
// (sorted[int(round((n - 1) * 0.99))]): the largest value of its bucket, within [min, max].
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Round(float64(h.n-1) * q))
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen > rank {
			return min(max(time.Duration(bucketMax(i)), h.min), h.max)
		}
	}
	return h.max
}

// Band is one line of a printed histogram: the values in (previous upper bound, Upper].
type Band struct {
	Upper time.Duration
	Count uint64
}

// Bands sums the buckets into powers of two of a microsecond, from the band of the smallest
// value to that of the largest.
func (h *Histogram) Bands() []Band {
	if h.n == 0 {
		return nil
	}
	var out []Band
	upper := time.Microsecond
	for upper < h.min {
		upper *= 2
	}
	i := 0
	for {
		b := Band{Upper: upper}
		for ; i < len(h.counts) && time.Duration(bucketMax(i)) <= upper; i++ {
			b.Count += h.counts[i]
		}
		out = append(out, b)
		if upper >= h.max || i >= len(h.counts) {
			// Buckets straddling upper go to the next Band; the last Band takes what is left.
			for ; i < len(h.counts); i++ {
				out[len(out)-1].Count += h.counts[i]
			}
			return out
		}
		upper *= 2
	}
}
