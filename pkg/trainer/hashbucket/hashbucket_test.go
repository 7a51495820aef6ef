package hashbucket

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/monolith-go/monolith/pkg/errkind"
)

func fid(slot int, id uint64) uint64 { return uint64(slot)<<idBits | id&idMask }

func TestNew(t *testing.T) {
	tests := []struct {
		name    string
		buckets map[int]uint64
		wantErr bool
		want    map[int]uint64 // Buckets(slot) for these slots
	}{
		{"none", nil, false, map[int]uint64{0: 0, 1: 0}},
		{"zero is collisionless", map[int]uint64{3: 0}, false, map[int]uint64{3: 0}},
		{"some slots", map[int]uint64{1: 100, 7: 5, 2: 0}, false, map[int]uint64{1: 100, 7: 5, 2: 0, 3: 0, 8: 0, -1: 0}},
		{"2^48 buckets fit", map[int]uint64{MaxSlot: MaxBuckets}, false, map[int]uint64{MaxSlot: MaxBuckets}},
		{"more than 2^48", map[int]uint64{1: MaxBuckets + 1}, true, nil},
		{"negative slot", map[int]uint64{-1: 10}, true, nil},
		{"slot past 15 bits", map[int]uint64{MaxSlot + 1: 10}, true, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := New(tc.buckets)
			if tc.wantErr {
				if errkind.Of(err) != errkind.Value {
					t.Fatalf("New(%v): %v, want an error of kind Value", tc.buckets, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for slot, n := range tc.want {
				if got := b.Buckets(slot); got != n {
					t.Errorf("Buckets(%d) = %d, want %d", slot, got, n)
				}
			}
		})
	}
}

// Apply buckets the configured slots' ids, keeps their slot, passes other slots (and fids whose
// top bit puts them past every slot) through, and is a pure function of (id, N).
func TestApply(t *testing.T) {
	b, err := New(map[int]uint64{1: 10, 2: 1, 4: MaxBuckets, 5: 0})
	if err != nil {
		t.Fatal(err)
	}
	in := []uint64{fid(1, 0), fid(1, 12345), fid(1, idMask), fid(2, 99), fid(3, 7), fid(4, 42), fid(5, 8), fid(0, 9), 1<<63 | 5}
	got := slices.Clone(in)
	b.Apply(got)
	tests := []struct {
		name string
		i    int
		want uint64
	}{
		{"slot 1, id 0", 0, fid(1, Bucket(0, 10))},
		{"slot 1", 1, fid(1, Bucket(12345, 10))},
		{"slot 1, largest id", 2, fid(1, Bucket(idMask, 10))},
		{"one bucket", 3, fid(2, 0)},
		{"unconfigured slot", 4, fid(3, 7)},
		{"2^48 buckets", 5, fid(4, Mix(42)>>16)},
		{"zero buckets", 6, fid(5, 8)},
		{"slot 0, unconfigured", 7, fid(0, 9)},
		{"top bit set", 8, 1<<63 | 5},
	}
	for _, tc := range tests {
		if got[tc.i] != tc.want {
			t.Errorf("%s: Apply(%#x) = %#x, want %#x", tc.name, in[tc.i], got[tc.i], tc.want)
		}
	}
	for _, f := range got[:3] {
		if f>>idBits != 1 || f&idMask >= 10 {
			t.Errorf("fid %#x: want slot 1 and a bucket under 10", f)
		}
	}
	again := slices.Clone(in)
	b.Apply(again)
	if !slices.Equal(got, again) {
		t.Errorf("a second Apply gave %#x, want %#x", again, got)
	}
	if n := testing.AllocsPerRun(100, func() { b.Apply(again) }); n != 0 {
		t.Errorf("Apply allocates %v times", n)
	}
}

// Bucket's values are fixed (other processes and checkpoints rely on them) and spread evenly.
func TestBucket(t *testing.T) {
	tests := []struct {
		id, n, want uint64
	}{
		{0, 1, 0},
		{1, 1, 0},
		{0, 1000, 0}, // Mix(0) = 0
		{12345, MaxBuckets, Mix(12345) >> 16},
		{1<<48 | 7, 100, Bucket(7, 100)}, // slot bits are ignored
	}
	for _, tc := range tests {
		if got := Bucket(tc.id, tc.n); got != tc.want {
			t.Errorf("Bucket(%d, %d) = %d, want %d", tc.id, tc.n, got, tc.want)
		}
	}
	// floor(Mix(id) * n / 2^64), by floating point with a margin.
	for id := uint64(0); id < 1000; id++ {
		n := uint64(1000)
		want := math.Floor(float64(Mix(id)) / (1 << 64) * float64(n))
		if got := float64(Bucket(id, n)); math.Abs(got-want) > 1 {
			t.Errorf("Bucket(%d, %d) = %v, want about %v", id, n, got, want)
		}
	}
	// splitmix64 seeded with 0 first outputs the finalizer of its increment.
	if got, want := Mix(0x9e3779b97f4a7c15), uint64(0xe220a8397b1dcdaf); got != want {
		t.Errorf("Mix(golden gamma) = %#x, want splitmix64's first output %#x", got, want)
	}
	// Consecutive ids spread over 16 buckets within 10% of even.
	counts := make([]int, 16)
	for id := uint64(1); id <= 160000; id++ {
		counts[Bucket(id, 16)]++
	}
	for i, c := range counts {
		if c < 9000 || c > 11000 {
			t.Errorf("bucket %d of 16 holds %d of 160000 consecutive ids, want about 10000", i, c)
		}
	}
}

func TestCollisionRate(t *testing.T) {
	// Find a few ids whose buckets among 4 are known.
	byBucket := map[uint64][]uint64{}
	for id := uint64(1); len(byBucket[0]) < 3 || len(byBucket[1]) < 1 || len(byBucket[2]) < 1; id++ {
		b := Bucket(id, 4)
		byBucket[b] = append(byBucket[b], id)
	}
	a0, b0, c0, a1, a2 := byBucket[0][0], byBucket[0][1], byBucket[0][2], byBucket[1][0], byBucket[2][0]
	tests := []struct {
		name string
		ids  []uint64
		n    uint64
		want float64
	}{
		{"no ids", nil, 4, 0},
		{"zero buckets: no hashing", []uint64{a0, b0, c0}, 0, 0},
		{"one id", []uint64{a0}, 4, 0},
		{"two apart", []uint64{a0, a1}, 4, 0},
		{"two together", []uint64{a0, b0}, 4, 1},
		{"repeats are one id", []uint64{a0, a0, a0, a1}, 4, 0},
		{"three in a bucket, two alone", []uint64{a0, b0, c0, a1, a2}, 4, 3.0 / 5},
		{"one bucket", []uint64{a0, a1, a2}, 1, 1},
		{"slot bits ignored", []uint64{fid(1, a0), fid(2, a1)}, 4, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := CollisionRate(tc.ids, tc.n); got != tc.want {
				t.Errorf("CollisionRate(%v, %d) = %v, want %v", tc.ids, tc.n, got, tc.want)
			}
		})
	}
	// Many random ids follow uniform hashing's 1 - (1-1/n)^(d-1).
	ids := randomIDs(20000, 1)
	for _, n := range []uint64{5000, 20000, 200000} {
		want := 1 - math.Pow(1-1/float64(n), float64(len(ids)-1))
		if got := CollisionRate(ids, n); math.Abs(got-want) > 0.01 {
			t.Errorf("%d random ids in %d buckets: rate %v, want about %v", len(ids), n, got, want)
		}
	}
}

func randomIDs(n int, seed uint64) []uint64 {
	r := rand.New(rand.NewPCG(seed, 0))
	seen := map[uint64]bool{}
	var ids []uint64
	for len(ids) < n {
		id := r.Uint64() & idMask
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return ids
}

// BucketsForRate lands within a few ids of the target, for the Monolith paper's rates and others,
// and no count near the one it picks comes closer.
func TestBucketsForRate(t *testing.T) {
	ids := randomIDs(5000, 2)
	zipfIDs := func() []uint64 { // repeated ids, as a click log's are
		r := rand.New(rand.NewPCG(3, 0))
		z := rand.NewZipf(r, 1.1, 1, 100000)
		out := make([]uint64, 50000)
		for i := range out {
			out[i] = 1 + z.Uint64()
		}
		return out
	}()
	tests := []struct {
		name string
		ids  []uint64
		rate float64
		tol  float64 // how far the measured rate may be from the target
	}{
		{"paper: users", ids, 0.0773, 0.001},
		{"paper: items", ids, 0.0286, 0.001},
		{"a quarter", ids, 0.25, 0.001},
		{"half", ids, 0.5, 0.001},
		{"a quarter of few ids", ids[:1000], 0.25, 0.003},
		{"zipf ids, users' rate", zipfIDs, 0.0773, 0.001},
		{"all collide", ids, 1, 0},
		{"none collide", ids[:100], 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, err := BucketsForRate(tc.ids, tc.rate)
			if err != nil {
				t.Fatal(err)
			}
			got := CollisionRate(tc.ids, n)
			t.Logf("rate %v: %d buckets, measured %v", tc.rate, n, got)
			if math.Abs(got-tc.rate) > tc.tol {
				t.Errorf("BucketsForRate(%v) = %d, rate %v, want within %v of the target", tc.rate, n, got, tc.tol)
			}
			for _, m := range []uint64{n - 1, n + 1, n - Window/2, n + Window/2} {
				if m >= 1 && math.Abs(CollisionRate(tc.ids, m)-tc.rate) < math.Abs(got-tc.rate) {
					t.Errorf("BucketsForRate(%v) = %d (rate %v), but %d buckets come closer (%v)", tc.rate, n, got, m, CollisionRate(tc.ids, m))
				}
			}
		})
	}
	if n, err := BucketsForRate(ids, 1); err != nil || n != 1 {
		t.Errorf("BucketsForRate(ids, 1) = %d, %v; want 1", n, err)
	}
	for _, few := range [][]uint64{nil, {7}, {7, 7, 7}} {
		if n, err := BucketsForRate(few, 0.1); err != nil || n != 1 {
			t.Errorf("BucketsForRate(%v, 0.1) = %d, %v; want 1", few, n, err)
		}
	}
	for _, bad := range []float64{-0.1, 1.5, math.NaN()} {
		if _, err := BucketsForRate(ids, bad); errkind.Of(err) != errkind.Value {
			t.Errorf("BucketsForRate(ids, %v): %v, want an error of kind Value", bad, err)
		}
	}
}

// BenchmarkApply buckets a batch of fids over a few slots, half of them configured.
func BenchmarkApply(b *testing.B) {
	bk, err := New(map[int]uint64{1: 1 << 20, 2: 50000, 3: 0, 5: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 1))
	src := make([]uint64, 4096)
	for i := range src {
		src[i] = fid(1+i%6, r.Uint64())
	}
	fids := make([]uint64, len(src))
	b.SetBytes(int64(8 * len(src)))
	b.ResetTimer()
	for range b.N {
		copy(fids, src)
		bk.Apply(fids)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(src)), "ns/fid")
}
