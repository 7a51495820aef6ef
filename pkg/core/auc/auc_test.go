package auc

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/monolith-go/monolith/pkg/errkind"
)

func newAUC(t *testing.T) *Streaming {
	t.Helper()
	a, err := New(DefaultThresholds)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestThresholds(t *testing.T) {
	a := newAUC(t)
	if s := a.String(); s != "auc(200 thresholds, value 0)" {
		t.Errorf("string %s", s)
	}
	th := a.Thresholds()
	if len(th) != 200 || th[0] != float32(-1e-7) || th[199] != float32(1+1e-7) || th[1] != float32(1.0/199) || th[198] != float32(198.0/199) {
		t.Fatalf("thresholds %v ... %v", th[:2], th[198:])
	}
	if _, err := New(1); errkind.Of(err) != errkind.Value {
		t.Errorf("one threshold: %v", err)
	}
}

func TestSeparated(t *testing.T) {
	for _, c := range []struct {
		name          string
		labels, preds []float32
		want          float64
	}{
		// The false-positive rate drops from 1/(1+1e-6) to 0 where the recall is 1 (or 1e-6).
		{"perfect", []float32{1, 0}, []float32{0.9, 0.1}, 1 / (1 + 1e-6)},
		{"inverse", []float32{1, 0}, []float32{0.1, 0.9}, 1e-6 / (1 + 1e-6) / (1 + 1e-6)},
		// No negatives: the x axis never moves.
		{"only positives", []float32{1, 1}, []float32{0.2, 0.7}, 0},
		// Labels are cast to bool: any non-zero value is positive.
		{"non-binary labels", []float32{0.5, 0}, []float32{0.9, 0.1}, 1 / (1 + 1e-6)},
	} {
		a := newAUC(t)
		if err := a.Update(c.labels, c.preds); err != nil {
			t.Fatal(err)
		}
		if got := float64(a.Value()); math.Abs(got-c.want) > 1e-6 {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if v := newAUC(t).Value(); v != 0 {
		t.Errorf("empty metric: %v", v)
	}
}

// exactAUC is the Mann-Whitney statistic (ties count half).
func exactAUC(labels, preds []float32) float64 {
	type ex struct {
		p   float32
		pos bool
	}
	var xs []ex
	var npos, nneg float64
	for i, l := range labels {
		xs = append(xs, ex{preds[i], l != 0})
		if l != 0 {
			npos++
		} else {
			nneg++
		}
	}
	sort.Slice(xs, func(i, j int) bool { return xs[i].p < xs[j].p })
	var sum float64
	for i, a := range xs {
		if !a.pos {
			continue
		}
		for _, b := range xs[:i] {
			if !b.pos {
				if b.p < a.p {
					sum++
				} else {
					sum += 0.5
				}
			}
		}
	}
	return sum / (npos * nneg)
}

func TestStreamingMatchesExactAUC(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var labels, preds []float32
	a := newAUC(t)
	for batch := range 5 {
		var l, p []float32
		for range 400 {
			pos := rng.Float64() < 0.3
			// Positives score higher on average.
			score := rng.Float64() * 0.8
			if pos {
				score += 0.2
				l = append(l, 1)
			} else {
				l = append(l, 0)
			}
			p = append(p, float32(score))
		}
		if err := a.Update(l, p); err != nil {
			t.Fatal(err)
		}
		labels, preds = append(labels, l...), append(preds, p...)
		// 200 thresholds approximate the exact AUC to well within 1%.
		if got, want := float64(a.Value()), exactAUC(labels, preds); math.Abs(got-want) > 0.01 {
			t.Errorf("batch %d: streaming %v, exact %v", batch, got, want)
		}
	}
	one := newAUC(t)
	if err := one.Update(labels, preds); err != nil {
		t.Fatal(err)
	}
	if one.Value() != a.Value() {
		t.Errorf("one update %v, five updates %v", one.Value(), a.Value())
	}
	tp, fn, tn, fp := a.Counts()
	if tp[0]+fn[0]+tn[0]+fp[0] != 2000 {
		t.Errorf("counts at the lowest threshold add up to %v", tp[0]+fn[0]+tn[0]+fp[0])
	}
	a.Reset()
	if tp, _, _, _ := a.Counts(); tp[0] != 0 || a.Value() != 0 {
		t.Error("reset kept counts")
	}
}

func TestUpdateErrors(t *testing.T) {
	a := newAUC(t)
	for _, c := range []struct {
		name          string
		labels, preds []float32
	}{
		{"length", []float32{1}, []float32{0.5, 0.5}},
		{"above 1", []float32{1}, []float32{1.5}},
		{"below 0", []float32{1}, []float32{-0.1}},
		{"NaN", []float32{1}, []float32{float32(math.NaN())}},
	} {
		if err := a.Update(c.labels, c.preds); errkind.Of(err) != errkind.Value {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	if tp, _, _, _ := a.Counts(); tp[0] != 0 {
		t.Error("a rejected batch was counted")
	}
}

// The counting by threshold position gives exactly the counts of comparing every prediction with
// every threshold (predictions on a threshold count as not above it).
func TestCountsMatchBruteForce(t *testing.T) {
	a := newAUC(t)
	th := a.Thresholds()
	rng := rand.New(rand.NewPCG(5, 6))
	var labels, preds []float32
	for range 3000 {
		labels = append(labels, float32(rng.IntN(2)))
		switch rng.IntN(4) {
		case 0:
			preds = append(preds, th[1+rng.IntN(198)]) // exactly on a threshold
		case 1:
			preds = append(preds, float32(rng.IntN(2))) // 0 or 1
		default:
			preds = append(preds, rng.Float32())
		}
	}
	if err := a.Update(labels, preds); err != nil {
		t.Fatal(err)
	}
	tp, fn, tn, fp := a.Counts()
	for j, th := range th {
		var wtp, wfn, wtn, wfp float32
		for i, p := range preds {
			switch pos, above := labels[i] != 0, p > th; {
			case pos && above:
				wtp++
			case pos:
				wfn++
			case above:
				wfp++
			default:
				wtn++
			}
		}
		if tp[j] != wtp || fn[j] != wfn || tn[j] != wtn || fp[j] != wfp {
			t.Fatalf("threshold %d (%v): got %v %v %v %v, want %v %v %v %v", j, th, tp[j], fn[j], tn[j], fp[j], wtp, wfn, wtn, wfp)
		}
	}
}
