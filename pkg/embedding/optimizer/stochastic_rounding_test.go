package optimizer

import (
	"bufio"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestStochasticRoundingMatchesReference replays testdata/stochastic_rounding.txt, written by the
// reference's own code (testdata/stochastic_rounding.cc with its half.hpp): per line a value, its
// float16 neighbours below and above, the generator's next draw, and the rounded value.
func TestStochasticRoundingMatchesReference(t *testing.T) {
	f, err := os.Open("testdata/stochastic_rounding.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := newStochasticRounding(&wrapped{s: &sgd{d: 1}})
	sc := bufio.NewScanner(f)
	lines := 0
	for sc.Scan() {
		var w [5]float32
		for i, h := range strings.Fields(sc.Text()) {
			u, err := strconv.ParseUint(h, 16, 32)
			if err != nil {
				t.Fatal(err)
			}
			w[i] = math.Float32frombits(uint32(u))
		}
		v, down, up, p, rounded := w[0], w[1], w[2], w[3], w[4]
		lines++
		gotDown, gotUp := float16Bounds(v)
		if !sameBits(gotDown, down) || !sameBits(gotUp, up) {
			t.Errorf("float16Bounds(%g) = %g, %g; reference %g, %g", v, gotDown, gotUp, down, up)
		}
		if got := s.rand(); !sameBits(got, p) {
			t.Fatalf("draw %d = %.9g, reference %.9g", lines, got, p)
		}
		if got := stochasticRound(v, p); !sameBits(got, rounded) {
			t.Errorf("stochasticRound(%g, %g) = %g, reference %g", v, p, got, rounded)
		}
	}
	if err := sc.Err(); err != nil || lines < 100 {
		t.Fatalf("read %d lines: %v", lines, err)
	}
}

func sameBits(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }

// TestStochasticRoundingDecorator: the decorated optimizer updates as the plain one, then leaves
// every value on a float16; it passes the global step through (the reference drops it).
func TestStochasticRoundingDecorator(t *testing.T) {
	plain := mustNew(t, "batch_softmax {}", 1)
	rounded := mustNew(t, "batch_softmax {} stochastic_rounding_float16: true", 1)
	if describe(rounded) != "BatchSoftmax(D=1)" || rounded.StateSize() != 2 {
		t.Fatalf("decorated optimizer is %s with %d floats of state", describe(rounded), rounded.StateSize())
	}
	ws, wr := []float32{0.3}, []float32{0.3}
	ss, sr := make([]float32, 2), make([]float32, 2)
	plain.Init(ss)
	rounded.Init(sr)
	for _, step := range []int64{10, 17, 1000} {
		plain.Apply(ws, ss, []float32{0}, []float32{0.25}, step)
		rounded.Apply(wr, sr, []float32{0}, []float32{0.25}, step)
		down, up := float16Bounds(ws[0])
		if wr[0] != down && wr[0] != up {
			t.Fatalf("step %d: rounded value %.9g is neither float16 neighbour of %.9g (%g, %g)", step, wr[0], ws[0], down, up)
		}
		wr[0] = ws[0] // continue from the exact value so both see the same inputs
	}
	if got := rounded.Dump(sr).GetDump()[0].GetBatchSoftmax().GetGlobalStep(); got != 1000 {
		t.Errorf("decorated BatchSoftmax saw global step %d, want 1000", got)
	}
}
