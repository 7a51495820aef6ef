package batch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/pkg/dataset"
)

// writeIDs writes files of tf.train.Examples whose user_id is 0, 1, 2, ... (n in all, spread over
// the files in turn) and returns the files.
func writeIDs(t *testing.T, n, files int) []string {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	var ws []*dataset.FileWriter
	for f := range files {
		p := filepath.Join(dir, fmt.Sprintf("part-%d.tfrecord", f))
		w, err := dataset.CreateFile(p, dataset.NoCompression)
		if err != nil {
			t.Fatal(err)
		}
		paths, ws = append(paths, p), append(ws, w)
	}
	for i := range n {
		rec := tf{"label": tfInts(int64(i % 2)), "user_id": tfInts(int64(i))}.bytes(t)
		if err := ws[i%files].Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range ws {
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return paths
}

func idInputs() (*Decoder, error) {
	return NewDecoder(Inputs{Format: TFExample, Label: LabelInput{Source: "label"},
		Sparse: []SparseInput{{Name: "user", Source: "user_id", Slot: 1}}})
}

// streamed reads s to its end: each batch's ids, and the epochs the batches end.
func streamed(t *testing.T, s *Stream) (batches [][]uint64, ends []int) {
	t.Helper()
	for {
		b, err := s.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return batches, ends
		}
		if err != nil {
			t.Fatal(err)
		}
		var ids []uint64
		for _, f := range b.Fids {
			ids = append(ids, f[0]&fidV2IDMask)
		}
		batches, ends = append(batches, ids), append(ends, b.EndsEpoch)
	}
}

func flat(batches [][]uint64) []uint64 { return slices.Concat(batches...) }

func TestStreamEpochs(t *testing.T) {
	files := writeIDs(t, 10, 2) // file 0: 0 2 4 6 8, file 1: 1 3 5 7 9
	cases := []struct {
		name      string
		epochs    int
		size      int
		wantSizes []int
		wantEnds  []int
	}{
		{"batches across epochs", 2, 4, []int{4, 4, 4, 4, 4}, []int{0, 0, 1, 0, 2}},
		{"an epoch ends a batch", 2, 5, []int{5, 5, 5, 5}, []int{0, 1, 0, 2}},
		{"partial last batch", 1, 3, []int{3, 3, 3, 1}, []int{0, 0, 0, 1}},
		{"batch of the whole epoch", 3, 10, []int{10, 10, 10}, []int{1, 2, 3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := OpenStream(StreamConfig{Files: files, NewDecoder: idInputs, Epochs: c.epochs, BatchSize: c.size})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			batches, ends := streamed(t, s)
			var sizes []int
			for _, b := range batches {
				sizes = append(sizes, len(b))
			}
			if !slices.Equal(sizes, c.wantSizes) || !slices.Equal(ends, c.wantEnds) {
				t.Fatalf("sizes %v ends %v, want %v %v", sizes, ends, c.wantSizes, c.wantEnds)
			}
			one := []uint64{0, 2, 4, 6, 8, 1, 3, 5, 7, 9}
			if want := slices.Concat(slices.Repeat([][]uint64{one}, c.epochs)...); !slices.Equal(flat(batches), want) {
				t.Fatalf("ids %v, want %v", flat(batches), want)
			}
			if s.Position() != int64(10*c.epochs) {
				t.Fatalf("Position = %d", s.Position())
			}
		})
	}
}

// TestStreamShuffleResume: a shuffled stream is a permutation of each epoch, repeats for a seed,
// differs for another, and a stream of more epochs that skips what a shorter one returned goes on
// exactly where that one ended (the partial last batch included).
func TestStreamShuffleResume(t *testing.T) {
	files := writeIDs(t, 103, 3)
	open := func(seed uint64, epochs int, skip int64) *Stream {
		s, err := OpenStream(StreamConfig{Files: files, NewDecoder: idInputs, Epochs: epochs, BatchSize: 16, ShuffleBuffer: 20, Seed: seed, Skip: skip})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	b1, _ := streamed(t, open(7, 1, 0))
	one := flat(b1)
	sorted := slices.Sorted(slices.Values(one))
	for i, id := range sorted {
		if id != uint64(i) {
			t.Fatalf("epoch 1 is not a permutation of the ids: %v", sorted)
		}
	}
	inOrder := true
	for i := 1; i < len(one); i++ {
		inOrder = inOrder && one[i] > one[i-1]
	}
	if inOrder {
		t.Fatal("the shuffled epoch is in file order")
	}
	again, _ := streamed(t, open(7, 1, 0))
	if !slices.Equal(flat(again), one) {
		t.Fatal("the same seed gave another order")
	}
	other, _ := streamed(t, open(8, 1, 0))
	if slices.Equal(flat(other), one) {
		t.Fatal("another seed gave the same order")
	}
	three, _ := streamed(t, open(7, 3, 0))
	if !slices.Equal(flat(three)[:103], one) {
		t.Fatal("the first epoch of 3 differs from the epoch of a 1-epoch stream")
	}
	// Resume: the 1-epoch run returned 103 examples (its last batch partial); 3 epochs skipping
	// them return epochs 2 and 3 whole.
	resumed := open(7, 3, 103)
	rest, ends := streamed(t, resumed)
	if !slices.Equal(flat(rest), flat(three)[103:]) {
		t.Fatal("the resumed stream is not the rest of the uninterrupted one")
	}
	var marked []int
	for _, e := range ends {
		if e != 0 {
			marked = append(marked, e)
		}
	}
	if len(flat(rest)) != 206 || !slices.Equal(marked, []int{2, 3}) || ends[len(ends)-1] != 3 {
		t.Fatalf("resumed: %d examples, ends %v", len(flat(rest)), ends)
	}
}

func TestStreamErrors(t *testing.T) {
	empty := writeIDs(t, 0, 2)
	good := writeIDs(t, 4, 1)
	cases := []struct {
		name string
		cfg  StreamConfig
		want string
	}{
		{"epochs", StreamConfig{Files: good, Epochs: 0, BatchSize: 1}, "0 epochs"},
		{"batch", StreamConfig{Files: good, Epochs: 1, BatchSize: 0}, "batch size 0"},
		{"shuffle", StreamConfig{Files: good, Epochs: 1, BatchSize: 1, ShuffleBuffer: -1}, "shuffle buffer -1"},
		{"no files", StreamConfig{Epochs: 1, BatchSize: 1}, "no files"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.cfg.NewDecoder = idInputs
			if _, err := OpenStream(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
	s, err := OpenStream(StreamConfig{Files: empty, NewDecoder: idInputs, Epochs: 2, BatchSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Next(context.Background()); err == nil || !strings.Contains(err.Error(), "no records in 2 files") {
		t.Fatalf("empty input: err = %v", err)
	}
}
