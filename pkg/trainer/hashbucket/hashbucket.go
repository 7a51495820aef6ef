// Package hashbucket hashes the ids of chosen slots into a fixed number of buckets before they
// reach the embedding tables, so that one model can be trained with id collisions (a hashed
// embedding table of N rows, --embedding_buckets=N) or without (the collisionless table the
// Monolith paper argues for, N = 0, the default). Collisions are what a bounded table costs: ids
// that share a bucket share one embedding, and the Monolith paper measures the AUC that loses.
//
// The bucket of an id is a pure function of (id, N), the same in every process and run:
//
//	Bucket(id, N) = floor(Mix(id) * N / 2^64)
//
// where Mix is splitmix64's finalizer (a bijection of 64-bit words whose output bits each depend
// on every input bit). The multiply-high maps a uniform 64-bit hash uniformly onto [0, N), as
// Mix(id) mod N would, for a multiply instead of a division; and because it is monotone in the
// hash, ids sorted by Mix(id) have non-decreasing buckets for every N, which lets CollisionRate
// and BucketsForRate count collisions with one pass over neighbours.
package hashbucket

import (
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/monolith-go/monolith/pkg/errkind"
)

const (
	// idBits is the width of a v2 fid's id (the slot sits above it, slot<<48 | id).
	idBits = 48
	idMask = 1<<idBits - 1
	// MaxBuckets is the most buckets a slot may have: a bucket must fit the fid's 48-bit id.
	MaxBuckets = 1 << idBits
	// MaxSlot is the largest v2 fid slot (bits 48 to 62, as pkg/trainer/dnn reads them).
	MaxSlot = 1<<15 - 1
)

// Mix is splitmix64's finalizer: the well-mixing 64-bit hash buckets are drawn from.
func Mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Bucket is the bucket in [0, n) of id (its low 48 bits), for n > 0.
func Bucket(id, n uint64) uint64 {
	hi, _ := bits.Mul64(Mix(id&idMask), n)
	return hi
}

// Bucketer maps a v2 fid (slot<<48 | id) to slot<<48 | Bucket(id, N) for the slots configured
// with N > 0; the fids of other slots pass through unchanged.
type Bucketer struct {
	// n[slot] is the slot's bucket count, 0 for none; slots at or past len(n) have none.
	n []uint64
}

// New returns the Bucketer of buckets (slot -> N; N = 0 leaves the slot collisionless). A slot
// outside [0, MaxSlot] or an N above MaxBuckets is an error of kind Value.
func New(buckets map[int]uint64) (*Bucketer, error) {
	top := -1
	for slot, n := range buckets {
		switch {
		case slot < 0 || slot > MaxSlot:
			return nil, errkind.New(errkind.Value, "hashbucket: slot %d is not a v2 fid slot (0 to %d)", slot, MaxSlot)
		case n > MaxBuckets:
			return nil, errkind.New(errkind.Value, "hashbucket: slot %d: %d buckets do not fit a 48-bit id (at most 2^48)", slot, n)
		}
		if n > 0 {
			top = max(top, slot)
		}
	}
	b := &Bucketer{n: make([]uint64, top+1)}
	for slot, n := range buckets {
		if n > 0 {
			b.n[slot] = n
		}
	}
	return b, nil
}

// Buckets is slot's bucket count, 0 when its ids pass through.
func (b *Bucketer) Buckets(slot int) uint64 {
	if slot < 0 || slot >= len(b.n) {
		return 0
	}
	return b.n[slot]
}

// Apply replaces, in place, each fid of a configured slot by its bucket's fid. It allocates
// nothing, so that it can sit in the input path of every training and serving batch.
func (b *Bucketer) Apply(fids []uint64) {
	n := b.n
	if len(n) == 0 {
		return
	}
	for i, fid := range fids {
		slot := fid >> idBits
		if slot >= uint64(len(n)) || n[slot] == 0 {
			continue
		}
		hi, _ := bits.Mul64(Mix(fid&idMask), n[slot])
		fids[i] = fid&^idMask | hi
	}
}

// sortedHashes are the hashes of the distinct ids (low 48 bits) of ids, sorted: Mix is a
// bijection, so distinct ids have distinct hashes, and their buckets are non-decreasing in this
// order for every n.
func sortedHashes(ids []uint64) []uint64 {
	h := make([]uint64, len(ids))
	for i, id := range ids {
		h[i] = Mix(id & idMask)
	}
	slices.Sort(h)
	return slices.Compact(h)
}

// colliding counts the hashes (sorted, distinct) whose bucket among n is another's too.
func colliding(sorted []uint64, n uint64) int {
	count := 0
	prev, _ := bits.Mul64(sorted[0], n)
	run := 1
	for _, h := range sorted[1:] {
		b, _ := bits.Mul64(h, n)
		if b == prev {
			run++
			continue
		}
		if run > 1 {
			count += run
		}
		prev, run = b, 1
	}
	if run > 1 {
		count += run
	}
	return count
}

// CollisionRate is, of the distinct ids given (ids of one slot; their low 48 bits), the fraction
// that share their bucket among n with another distinct id: the Monolith paper's "% of ids
// colliding". n = 0 means no hashing, and no collisions.
func CollisionRate(ids []uint64, n uint64) float64 {
	if n == 0 || len(ids) == 0 {
		return 0
	}
	h := sortedHashes(ids)
	return float64(colliding(h, n)) / float64(len(h))
}

// BucketsForRate is the bucket count at which the distinct ids given (of one slot) collide at
// about rate (in [0, 1]). The rate falls with the bucket count on average but not strictly: one
// bucket more moves every bucket boundary, so neighbouring counts give rates scattered around
// their mean (by a few percent of it for thousands of ids). So bisection first finds a crossing of
// the target (a count whose rate is at most rate, the count below it above rate), and the answer
// is the count within Window of it whose rate is closest to rate (the smallest on a tie). Fewer
// than two distinct ids never collide (1 bucket). A rate out of range, or one no count up to
// MaxBuckets reaches, is an error of kind Value.
func BucketsForRate(ids []uint64, rate float64) (uint64, error) {
	if !(rate >= 0 && rate <= 1) {
		return 0, errkind.New(errkind.Value, "hashbucket: collision rate %v is not in [0, 1]", rate)
	}
	h := sortedHashes(ids)
	if len(h) < 2 {
		return 1, nil
	}
	within := func(n uint64) bool { return float64(colliding(h, n)) <= rate*float64(len(h)) }
	// Bracket from the expected rate of uniform buckets, 1 - (1-1/n)^(d-1) ~ 1 - exp(-d/n).
	d := float64(len(h))
	guess := uint64(1)
	if rate < 1 {
		guess = uint64(min(float64(MaxBuckets), max(1, d/-math.Log1p(-rate))))
	}
	lo, hi := uint64(0), guess // within(lo) is false (0 buckets: not a count), within(hi) is sought
	for !within(hi) {
		if hi == MaxBuckets {
			return 0, errkind.New(errkind.Value, "hashbucket: %d distinct ids collide at more than %v even in 2^48 buckets", len(h), rate)
		}
		lo, hi = hi, min(MaxBuckets, 2*hi)
	}
	if lo == 0 && hi > 1 {
		// Look below the guess: halve until the rate is above the target.
		for lo = hi / 2; lo >= 1 && within(lo); lo /= 2 {
			hi = lo
		}
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if within(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	target := rate * d
	best, bestOff := hi, math.Inf(1)
	for n := max(1, hi-min(hi, Window)); n <= min(MaxBuckets, hi+Window); n++ {
		if off := math.Abs(float64(colliding(h, n)) - target); off < bestOff {
			best, bestOff = n, off
		}
	}
	return best, nil
}

// Window is how far from the bisection's crossing BucketsForRate looks for the bucket count of
// rate closest to the target: enough counts that one lands within a few ids of it, few enough
// that the search stays a few thousand passes over the ids.
const Window = 256

// String describes the configured slots.
func (b *Bucketer) String() string {
	s := "hashbucket{"
	first := true
	for slot, n := range b.n {
		if n == 0 {
			continue
		}
		if !first {
			s += ", "
		}
		s += fmt.Sprintf("slot %d: %d", slot, n)
		first = false
	}
	return s + "}"
}
