package synth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/pkg/dataset"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
)

var small = Config{Seed: 7, NumDense: 3, NumSlots: 2, Vocab: 50}

func write(t *testing.T, cfg Config, o WriteOptions) []string {
	t.Helper()
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	paths, err := g.Write(o)
	if err != nil {
		t.Fatal(err)
	}
	return paths
}

func readAll(t *testing.T, paths []string) []byte {
	t.Helper()
	var all []byte
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}

func TestDeterminism(t *testing.T) {
	base := WriteOptions{Name: "train", Files: 3, Examples: 200, Stream: 1}
	ref := readAll(t, write(t, small, base))
	tests := []struct {
		name string
		cfg  Config
		o    WriteOptions
		same bool
	}{
		{"same seed and stream", small, base, true},
		{"other seed", Config{Seed: 8, NumDense: 3, NumSlots: 2, Vocab: 50}, base, false},
		{"other stream", small, WriteOptions{Name: "train", Files: 3, Examples: 200, Stream: 2}, false},
		// The examples are one sequence, whatever the number of files they are spread over (and
		// TFRecord files have no header: the files concatenated are the one file).
		{"one file", small, WriteOptions{Name: "train", Files: 1, Examples: 200, Stream: 1}, true},
		{"fewer examples", small, WriteOptions{Name: "train", Files: 3, Examples: 199, Stream: 1}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := readAll(t, write(t, tc.cfg, tc.o))
			if tc.same != bytes.Equal(got, ref) {
				t.Errorf("files equal to the reference run: %v, want %v", !tc.same, tc.same)
			}
		})
	}
}

// The written examples read back through pkg/trainer/batch: the schema's features, fids in each
// slot's vocabulary, and the true probability of each example as Next drew it.
func TestExamplesReadBack(t *testing.T) {
	ctx := context.Background()
	cfg := Config{Seed: 3, NumDense: 4, NumSlots: 3, Vocab: 20, IDsPerSlot: 2}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	paths, err := g.Write(WriteOptions{Dir: dir, Name: "eval", Files: 2, Examples: 301, Stream: 9, Compression: dataset.GZIP})
	if err != nil {
		t.Fatal(err)
	}
	want := g.Stream(9)
	r, err := batch.Open(paths, dataset.Options{Compression: dataset.GZIP}, g.Schema(), 64)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n := 0
	for {
		b, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for i := range b.Size() {
			ex, p := want.Next()
			got, err := g.Prob(ex)
			if err != nil || got != p {
				t.Fatalf("example %d: Prob %v, %v; Next said %v", n, got, err, p)
			}
			if b.Labels[i] != ex.Label[0] || len(b.Fids[i]) != 3*2 || len(b.Row(i)) != 4 {
				t.Fatalf("example %d read back as label %v, %d fids, %d dense values", n, b.Labels[i], len(b.Fids[i]), len(b.Row(i)))
			}
			for k, fid := range b.Fids[i] {
				slot, id := SlotOf(fid), fid&(1<<48-1)
				if slot != 1+k/2 || id < 1 || id > 20 {
					t.Fatalf("example %d fid %d: slot %d id %d", n, k, slot, id)
				}
			}
			n++
		}
	}
	if n != 301 {
		t.Errorf("read %d examples, want 301", n)
	}
}

// The labels follow the true probabilities: over many examples, the click rate is their mean, and
// examples with high probability click more often than those with low.
func TestLabelsFollowProbabilities(t *testing.T) {
	g, err := New(Config{Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	s := g.Stream(1)
	const n = 20000
	var clicks, psum float64
	var hiClicks, hiN, loClicks, loN float64
	for range n {
		ex, p := s.Next()
		y := float64(ex.Label[0])
		clicks += y
		psum += p
		if p > 0.5 {
			hiClicks, hiN = hiClicks+y, hiN+1
		} else if p < 0.1 {
			loClicks, loN = loClicks+y, loN+1
		}
	}
	// The click count is a sum of Bernoulli draws: its standard deviation is below sqrt(n)/2.
	if math.Abs(clicks-psum) > 4*math.Sqrt(n)/2 {
		t.Errorf("%v clicks, expected %v", clicks, psum)
	}
	if hiN == 0 || loN == 0 || hiClicks/hiN < 0.5 || loClicks/loN > 0.1 {
		t.Errorf("click rate %v where p > 0.5 (%v examples), %v where p < 0.1 (%v examples)", hiClicks/hiN, hiN, loClicks/loN, loN)
	}
}

func TestBestAUC(t *testing.T) {
	ctx := context.Background()
	g, err := New(small)
	if err != nil {
		t.Fatal(err)
	}
	paths, err := g.Write(WriteOptions{Dir: t.TempDir(), Name: "eval", Examples: 5000, Stream: 2})
	if err != nil {
		t.Fatal(err)
	}
	best, loss, err := g.BestAUC(ctx, paths, dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The ground truth separates clicks well but not perfectly; a constant prediction has AUC 0.5.
	if best < 0.7 || best > 0.99 {
		t.Errorf("best AUC %v, want a learnable task (0.7 to 0.99)", best)
	}
	if loss <= 0 || loss > math.Log(2) {
		t.Errorf("best log loss %v, want in (0, ln 2]", loss)
	}
	// An other generator's probabilities do worse on these labels.
	other, err := New(Config{Seed: 99, NumDense: 3, NumSlots: 2, Vocab: 50})
	if err != nil {
		t.Fatal(err)
	}
	worse, _, err := other.BestAUC(ctx, paths, dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if worse >= best-0.1 {
		t.Errorf("AUC of the wrong ground truth %v, of the right one %v", worse, best)
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"zipf exponent", Config{ZipfS: 1}, "ZipfS"},
		{"vocab", Config{Vocab: -3}, "Vocab"},
		{"slots", Config{NumSlots: 1 << 16}, "do not fit"},
		{"negative deviation", Config{IDStd: -1}, "deviations"},
		{"negative latent deviation", Config{LatentDim: 2, LatentStd: -1}, "deviations"},
		{"negative latent dim", Config{LatentDim: -2}, "LatentDim"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) || errkind.Of(err) != errkind.Value {
				t.Fatalf("err = %v, want a Value error containing %q", err, tc.want)
			}
		})
	}
	g, err := New(small)
	if err != nil {
		t.Fatal(err)
	}
	ex, _ := g.Stream(1).Next()
	ex.NamedFeature[1].Feature.GetFidV2List().Value[0] = FID(1, 51) // beyond the vocabulary
	if _, err := g.Prob(ex); err == nil || !strings.Contains(err.Error(), "id 51") {
		t.Errorf("Prob of an unknown id: %v", err)
	}
	if _, err := g.Write(WriteOptions{Dir: t.TempDir() + "/missing", Name: "x", Examples: 1}); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("Write into a missing directory: %v", err)
	}
}

// Configs without latent factors write the bytes they wrote before LatentDim existed (sha256 of
// the files recorded then): the option adds to the generator without changing its data sets.
func TestNoLatentUnchanged(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"small", small, "1b3a33b7fa94cb5b82478ac3b76ebd3bf503f7609bae4c8e6480bae2db98e50e"},
		{"two ids per slot", Config{Seed: 3, NumDense: 4, NumSlots: 3, Vocab: 20, IDsPerSlot: 2}, "5099bc0c2d22eaab01b251527c238ae06901916e53f0f378ddafa8fea314e8bc"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sum := sha256.Sum256(readAll(t, write(t, tc.cfg, WriteOptions{Name: "train", Files: 2, Examples: 300, Stream: 1})))
			if got := hex.EncodeToString(sum[:]); got != tc.want {
				t.Errorf("sha256 %s, want %s", got, tc.want)
			}
		})
	}
}

// With latent factors the logit is the plain model's (same weights) plus <v_a, v_b> for every two
// ids in different slots, computed here pair by pair (ids of one slot do not interact).
func TestLatentPairwiseTerms(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"one id per slot", Config{Seed: 5, NumDense: 2, NumSlots: 4, Vocab: 30, LatentDim: 3}},
		{"two ids per slot", Config{Seed: 6, NumDense: 0, NumSlots: 3, Vocab: 10, IDsPerSlot: 2, LatentDim: 4, LatentStd: 0.8}},
		{"one slot", Config{Seed: 7, NumSlots: 1, Vocab: 10, IDsPerSlot: 3, LatentDim: 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, err := New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			plainCfg := tc.cfg
			plainCfg.LatentDim = 0
			plain, err := New(plainCfg)
			if err != nil {
				t.Fatal(err)
			}
			logit := func(p float64) float64 { return math.Log(p / (1 - p)) }
			s := g.Stream(3)
			var spread float64
			for n := range 200 {
				ex, p := s.Next()
				base, err := plain.Prob(ex)
				if err != nil {
					t.Fatal(err)
				}
				var fids []uint64
				for _, nf := range ex.NamedFeature {
					fids = append(fids, nf.Feature.GetFidV2List().GetValue()...)
				}
				var want float64
				for i, a := range fids {
					for _, b := range fids[i+1:] {
						if SlotOf(a) == SlotOf(b) {
							continue
						}
						va := g.latent[SlotOf(a)-1][int(a&(1<<48-1)-1)*g.cfg.LatentDim:]
						vb := g.latent[SlotOf(b)-1][int(b&(1<<48-1)-1)*g.cfg.LatentDim:]
						for j := range g.cfg.LatentDim {
							want += va[j] * vb[j]
						}
					}
				}
				if got := logit(p) - logit(base); math.Abs(got-want) > 1e-9*(1+math.Abs(want)) {
					t.Fatalf("example %d: latent terms %v, want %v", n, got, want)
				}
				spread += want * want
			}
			if tc.cfg.NumSlots > 1 && spread == 0 {
				t.Error("no latent term in 200 examples")
			}
		})
	}
}

// On data with latent factors the plain model's true probabilities (the same per-id weights, no
// interactions) rank clicks clearly worse than the full ground truth: the interactions carry much
// of the signal, so a model needs them to come near the best AUC.
func TestLatentFactorsMatter(t *testing.T) {
	ctx := context.Background()
	cfg := Config{Seed: 21, NumDense: 4, NumSlots: 4, Vocab: 100, LatentDim: 4}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	paths, err := g.Write(WriteOptions{Dir: t.TempDir(), Name: "eval", Examples: 5000, Stream: 2})
	if err != nil {
		t.Fatal(err)
	}
	best, _, err := g.BestAUC(ctx, paths, dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.LatentDim = 0
	plain, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	firstOrder, _, err := plain.BestAUC(ctx, paths, dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("best AUC %.4f, first-order terms only %.4f", best, firstOrder)
	if best < 0.75 || firstOrder > best-0.05 {
		t.Errorf("best AUC %v, first-order terms only %v: want the latent terms to add at least 0.05", best, firstOrder)
	}
}

// TestDrifted: a drifted ground truth keeps the features and the dense weights, redraws the ids'
// weights (the same seed the same drift), and its labels are predicted worse by the old truth.
func TestDrifted(t *testing.T) {
	for _, cfg := range []Config{small, {Seed: 7, NumDense: 3, NumSlots: 2, Vocab: 50, LatentDim: 2}} {
		g, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		d, d2 := g.Drifted(1), g.Drifted(1)
		if d.Config() != g.Config() || !slices.Equal(d.dense, g.dense) {
			t.Fatalf("drift changed the config or the dense weights")
		}
		if !slices.Equal(d.ids[0], d2.ids[0]) || slices.Equal(d.ids[0], g.ids[0]) {
			t.Fatalf("drift: ids' weights not redrawn deterministically")
		}
		if (g.latent == nil) != (d.latent == nil) {
			t.Fatalf("drift: latent vectors %v, before %v", d.latent != nil, g.latent != nil)
		}
		// The old truth's probabilities rank the drifted stream's clicks worse.
		var oldP, newP, labels []float64
		st := d.Stream(3)
		for range 4000 {
			ex, p := st.Next()
			q, err := g.Prob(ex)
			if err != nil {
				t.Fatal(err)
			}
			oldP, newP, labels = append(oldP, q), append(newP, p), append(labels, float64(ex.Label[0]))
		}
		if o, n := aucOf(oldP, labels), aucOf(newP, labels); o >= n-0.05 {
			t.Errorf("latent %d: the old truth's AUC on drifted labels %.3f, the drifted truth's %.3f: no drift", cfg.LatentDim, o, n)
		}
	}
}

// aucOf is the AUC of scores against 0/1 labels (pairs counted, ties half).
func aucOf(scores, labels []float64) float64 {
	var pos, neg, wins float64
	for i := range scores {
		for j := range scores {
			if labels[i] == 1 && labels[j] == 0 {
				switch {
				case scores[i] > scores[j]:
					wins++
				case scores[i] == scores[j]:
					wins += 0.5
				}
			}
		}
		if labels[i] == 1 {
			pos++
		} else {
			neg++
		}
	}
	return wins / (pos * neg)
}
