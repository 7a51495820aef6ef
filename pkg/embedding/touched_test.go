package embedding

import (
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/monolith-go/monolith/internal/leakcheck"
)

// taken is what TakeTouched handed: each id's embedding, and the batch sizes.
type taken struct {
	embs    map[int64][]float32
	batches []int
	dups    int
}

func takeAll(t *testing.T, tb *Table, max int) taken {
	t.Helper()
	got := taken{embs: map[int64][]float32{}}
	n, err := tb.TakeTouched(max, func(ids []int64, embs []float32) error {
		got.batches = append(got.batches, len(ids))
		for k, id := range ids {
			if _, ok := got.embs[id]; ok {
				got.dups++
			}
			got.embs[id] = slices.Clone(embs[k*tb.Dim() : (k+1)*tb.Dim()])
		}
		return nil
	})
	if err != nil {
		t.Fatalf("TakeTouched: %v", err)
	}
	if sum := sumInts(got.batches); n != sum {
		t.Fatalf("TakeTouched returned %d, handed %d", n, sum)
	}
	return got
}

func sumInts(v []int) int {
	s := 0
	for _, x := range v {
		s += x
	}
	return s
}

func grads(n, dim int, v float32) []float32 {
	g := make([]float32, n*dim)
	for i := range g {
		g[i] = v
	}
	return g
}

func seq(lo, hi int64) []int64 {
	var ids []int64
	for id := lo; id < hi; id++ {
		ids = append(ids, id)
	}
	return ids
}

// TestTakeTouched: the entries applied or assigned since the last take are handed once each, with
// the embedding the table holds, in batches of at most max ids; nothing when tracking is off.
func TestTakeTouched(t *testing.T) {
	const dim = 3
	tests := []struct {
		name  string
		track bool
		max   int
		// update runs the updates; want are the ids expected.
		update func(t *testing.T, tb *Table)
		want   []int64
	}{
		{"off", false, 10, func(t *testing.T, tb *Table) {
			mustApply(t, tb, []int64{1, 2, 3})
		}, nil},
		{"applied with duplicates", true, 10, func(t *testing.T, tb *Table) {
			mustApply(t, tb, []int64{5, 1, 5, 2, 5, 1})
			mustApply(t, tb, []int64{2, 7})
		}, []int64{1, 2, 5, 7}},
		{"assigned", true, 10, func(t *testing.T, tb *Table) {
			if err := tb.Assign([]int64{4, 9}, grads(2, dim, 0.5), 10); err != nil {
				t.Fatal(err)
			}
		}, []int64{4, 9}},
		{"batches bounded", true, 7, func(t *testing.T, tb *Table) {
			mustApply(t, tb, seq(0, 100))
		}, seq(0, 100)},
		{"batch of one", true, 1, func(t *testing.T, tb *Table) {
			mustApply(t, tb, seq(0, 5))
		}, seq(0, 5)},
		{"more than a lock hold", true, 5000, func(t *testing.T, tb *Table) {
			mustApply(t, tb, seq(0, 3*takeChunk))
		}, seq(0, 3*takeChunk)},
		{"kept through growth", true, 1000, func(t *testing.T, tb *Table) {
			mustApply(t, tb, []int64{11, 12})
			tb.TrackTouched(false)
			mustApply(t, tb, seq(1000, 5000)) // rehashes every stripe several times
			tb.TrackTouched(true)
		}, []int64{11, 12}},
		{"removed entry dropped", true, 10, func(t *testing.T, tb *Table) {
			mustApply(t, tb, []int64{1, 2, 3})
			// SkipZeroEmbedding: assigning zeros erases the entry.
			if err := tb.Assign([]int64{2}, make([]float32, dim), 10); err != nil {
				t.Fatal(err)
			}
		}, []int64{1, 3}},
		{"removed and created again", true, 10, func(t *testing.T, tb *Table) {
			mustApply(t, tb, []int64{1, 2})
			if err := tb.Assign([]int64{2}, make([]float32, dim), 10); err != nil {
				t.Fatal(err)
			}
			mustApply(t, tb, []int64{2})
		}, []int64{1, 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tb := newTable(t, Config{Dim: dim, Optimizer: testSGD{dim: dim}, Initializer: constInit(1), Stripes: 4, SkipZeroEmbedding: true})
			tb.TrackTouched(tc.track)
			tc.update(t, tb)
			if p := tb.TouchedPending(); p < len(tc.want) {
				t.Errorf("TouchedPending = %d, want at least %d", p, len(tc.want))
			}
			got := takeAll(t, tb, tc.max)
			if ids := slices.Sorted(maps.Keys(got.embs)); !slices.Equal(ids, tc.want) {
				t.Fatalf("taken ids %v, want %v", ids, tc.want)
			}
			if got.dups != 0 {
				t.Errorf("%d ids handed twice", got.dups)
			}
			for _, b := range got.batches {
				if b > tc.max || b == 0 {
					t.Errorf("batch of %d ids, want 1..%d (batches %v)", b, tc.max, got.batches)
				}
			}
			for id, emb := range got.embs {
				if want, _ := mustLookup(t, tb, []int64{id}); !slices.Equal(emb, want) {
					t.Errorf("id %d handed %v, the table holds %v", id, emb, want)
				}
			}
			if again := takeAll(t, tb, tc.max); len(again.embs) != 0 {
				t.Errorf("second take handed %d ids, want none", len(again.embs))
			}
			if tb.TouchedPending() != 0 {
				t.Errorf("TouchedPending = %d after taking, want 0", tb.TouchedPending())
			}
			// An update after the take marks the entry again.
			if tc.track && len(tc.want) > 0 {
				mustApply(t, tb, tc.want[:1])
				if again := takeAll(t, tb, tc.max); len(again.embs) != 1 {
					t.Errorf("take after an update handed %d ids, want 1", len(again.embs))
				}
			}
		})
	}
}

func mustApply(t *testing.T, tb *Table, ids []int64) {
	t.Helper()
	if err := tb.Apply(ids, grads(len(ids), tb.Dim(), -0.25), lr(1), 1, 100); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

// TestTakeTouchedError: an error of fn ends the walk; the failed batch and the ids not handed yet
// stay touched, so the next take hands them.
func TestTakeTouchedError(t *testing.T) {
	tests := []struct {
		name    string
		failAt  int // the failing call of fn (0-based)
		max     int
		entries int64
	}{
		{"first batch", 0, 10, 100},
		{"middle batch", 3, 10, 100},
		{"last batch", 9, 10, 100},
		{"several chunks", 1, 700, 3 * takeChunk},
	}
	boom := errors.New("boom")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tb := newTable(t, Config{Dim: 2, Optimizer: testSGD{dim: 2}, Initializer: constInit(1), Stripes: 2})
			tb.TrackTouched(true)
			mustApply(t, tb, seq(0, tc.entries))
			handed := map[int64]bool{}
			calls := 0
			n, err := tb.TakeTouched(tc.max, func(ids []int64, _ []float32) error {
				defer func() { calls++ }()
				if calls == tc.failAt {
					return boom
				}
				for _, id := range ids {
					handed[id] = true
				}
				return nil
			})
			if !errors.Is(err, boom) {
				t.Fatalf("TakeTouched error %v, want %v", err, boom)
			}
			if n != len(handed) || n != tc.failAt*tc.max {
				t.Errorf("TakeTouched = %d, handed %d, want %d", n, len(handed), tc.failAt*tc.max)
			}
			rest := takeAll(t, tb, tc.max)
			for id := range rest.embs {
				if handed[id] {
					t.Errorf("id %d handed again after a successful batch", id)
				}
				handed[id] = true
			}
			if int64(len(handed)) != tc.entries {
				t.Errorf("%d ids handed in all, want %d (lost some)", len(handed), tc.entries)
			}
		})
	}
}

// TestTakeTouchedConcurrent takes while appliers update (run with -race): no update is lost, so
// once the appliers stop and a last take ran, the last embedding handed for each id is the one the
// table holds.
func TestTakeTouchedConcurrent(t *testing.T) {
	leakcheck.Check(t)
	const (
		appliers = 3
		rounds   = 200
		dim      = 2
	)
	tb := newTable(t, Config{Dim: dim, Optimizer: testSGD{dim: dim}, Initializer: constInit(0), Workers: 2})
	tb.TrackTouched(true)
	last := map[int64][]float32{}
	take := func() {
		if _, err := tb.TakeTouched(97, func(ids []int64, embs []float32) error {
			for k, id := range ids {
				last[id] = slices.Clone(embs[k*dim : (k+1)*dim])
			}
			return nil
		}); err != nil {
			t.Error(err)
		}
	}
	var wg sync.WaitGroup
	for a := range appliers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				ids := make([]int64, 300)
				for i := range ids {
					ids[i] = int64((r*7 + i*13 + a) % 5000)
				}
				if err := tb.Apply(ids, grads(len(ids), dim, -1), lr(1), 1, 100); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
			take()
		}
	}
	take()
	if tb.Size() != len(last) {
		t.Errorf("%d entries, %d ids handed", tb.Size(), len(last))
	}
	for id, emb := range last {
		if want, _ := mustLookup(t, tb, []int64{id}); !slices.Equal(emb, want) {
			t.Fatalf("id %d: last handed %v, the table holds %v (an update was lost)", id, emb, want)
		}
	}
}
