package embedding

import (
	"errors"
	"slices"
	"testing"
)

// TestEachEntry hands every entry once with its embedding, in bounded batches, and stops at fn's
// error.
func TestEachEntry(t *testing.T) {
	tb := newTable(t, Config{Dim: 3, Optimizer: testSGD{dim: 3}, Initializer: constInit(0.5)})
	ids := make([]int64, 2500)
	for i := range ids {
		ids[i] = int64(i*7 + 1)
	}
	grads := make([]float32, len(ids)*3)
	for i := range grads {
		grads[i] = float32(i%5) - 2
	}
	if err := tb.Apply(ids, grads, []float32{1}, 1, 100); err != nil {
		t.Fatal(err)
	}
	want := make([]float32, len(ids)*3)
	if _, err := tb.Lookup(ids, want); err != nil {
		t.Fatal(err)
	}
	got := map[int64][]float32{}
	n, err := tb.EachEntry(100, func(bids []int64, embs []float32) error {
		if len(bids) > 100 || len(embs) != 3*len(bids) {
			t.Fatalf("batch of %d ids, %d floats", len(bids), len(embs))
		}
		for k, id := range bids {
			if _, dup := got[id]; dup {
				t.Fatalf("id %d handed twice", id)
			}
			got[id] = slices.Clone(embs[3*k : 3*k+3])
		}
		return nil
	})
	if err != nil || n != len(ids) || len(got) != len(ids) {
		t.Fatalf("handed %d (%d distinct), err %v; want %d", n, len(got), err, len(ids))
	}
	for k, id := range ids {
		if !slices.Equal(got[id], want[3*k:3*k+3]) {
			t.Fatalf("id %d: %v, want %v", id, got[id], want[3*k:3*k+3])
		}
	}
	stop := errors.New("stop")
	if n, err := tb.EachEntry(10, func([]int64, []float32) error { return stop }); !errors.Is(err, stop) || n != 0 {
		t.Errorf("fn's error: %d, %v", n, err)
	}
	if _, err := tb.EachEntry(0, nil); err == nil {
		t.Error("batch of 0 accepted")
	}
}
