// Package synth generates a deterministic synthetic click log: examples whose click label is drawn
// from a known logistic model over dense features and categorical ids, written as TFRecord files of
// Monolith Examples (what pkg/dataset and pkg/trainer/batch read). Because the true click
// probability of every example is known (Generator.Prob), so is the best AUC any model can reach on
// a data set (BestAUC), which makes the generator a yardstick for a trainer.
//
// The ground truth: logit = Bias + sum_j w_j x_j + sum over the example's ids of w_{slot,id}, with
// x ~ N(0,1) and the weights drawn once from the seed. With Config.LatentDim > 0 every id also has
// a latent vector v_{slot,id}, and the logit adds the dot products <v_a, v_b> of every two ids a, b
// of the example in different slots (a factorization machine's pairwise terms): then a model needs
// embeddings (per-id vectors that interact) to do well, and per-id weights alone fall short. Each categorical feature is a slot whose ids
// follow a Zipf law over [1, Vocab], as real click logs do, and appear as fids
// (slot << 48 | id, Monolith's v2 fids) in the Example's fid_v2_list feature "slot_<slot>". The
// dense values are the float_list feature "dense". Everything is a function of the seed and the
// stream number: the same Config and stream give the same bytes.
package synth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"path/filepath"

	"google.golang.org/protobuf/proto"

	examplepb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/example"
	"github.com/monolith-go/monolith/pkg/core/auc"
	"github.com/monolith-go/monolith/pkg/dataset"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
)

// DenseFeature is the name of the dense values' float_list feature.
const DenseFeature = "dense"

// fidBits is where a v2 fid's slot starts.
const fidBits = 48

// FID is the v2 fid of id in slot.
func FID(slot int, id uint64) uint64 { return uint64(slot)<<fidBits | id&(1<<fidBits-1) }

// SlotOf is the slot of a v2 fid.
func SlotOf(fid uint64) int { return int(fid >> fidBits) }

// SlotFeature is the name of slot's fid_v2_list feature.
func SlotFeature(slot int) string { return fmt.Sprintf("slot_%d", slot) }

// Config describes the ground truth. Zero fields take the defaults noted.
type Config struct {
	Seed uint64
	// NumDense is the number of dense features (default 8; -1 for none).
	NumDense int
	// NumSlots is the number of categorical slots, numbered 1..NumSlots (default 4; -1 for none).
	NumSlots int
	// Vocab is the number of ids of each slot (default 1000).
	Vocab int
	// IDsPerSlot is how many ids (drawn independently) each example has in each slot (default 1).
	IDsPerSlot int
	// ZipfS is the exponent of the ids' Zipf law, > 1 (default 1.2).
	ZipfS float64
	// DenseStd and IDStd are the standard deviations of the dense and id weights (defaults 0.5
	// and 1).
	DenseStd, IDStd float64
	// Bias is the logit's intercept (default -1.5: about one click in four).
	Bias float64
	// LatentDim is the dimension of the ids' latent vectors; 0 (the default) means none, and the
	// ground truth is the plain logistic model.
	LatentDim int
	// LatentStd is the standard deviation of each latent component (default 0.7: with LatentDim 4
	// a pair's dot product has standard deviation about 1).
	LatentStd float64
}

func (c Config) withDefaults() Config {
	def := func(v *int, d int) {
		switch *v {
		case 0:
			*v = d
		case -1:
			*v = 0
		}
	}
	def(&c.NumDense, 8)
	def(&c.NumSlots, 4)
	if c.Vocab == 0 {
		c.Vocab = 1000
	}
	if c.IDsPerSlot == 0 {
		c.IDsPerSlot = 1
	}
	if c.ZipfS == 0 {
		c.ZipfS = 1.2
	}
	if c.DenseStd == 0 {
		c.DenseStd = 0.5
	}
	if c.IDStd == 0 {
		c.IDStd = 1
	}
	if c.Bias == 0 {
		c.Bias = -1.5
	}
	if c.LatentStd == 0 {
		c.LatentStd = 0.7
	}
	return c
}

// Generator draws examples of one ground truth.
type Generator struct {
	cfg   Config
	dense []float64
	ids   [][]float64 // ids[slot-1][id-1]
	// latent[slot-1][(id-1)*LatentDim:id*LatentDim] is the latent vector of id in slot.
	latent [][]float64
}

// weightStream is the PCG stream of the ground truth's weights; example streams are others. The
// latent vectors come from a stream of their own, so that the weights of a config without them
// stay what they were.
const (
	weightStream = 0x5eed_0f_3e1675
	latentStream = 0x1a7e_0f_3e1675
)

// New draws the ground truth of cfg.
func New(cfg Config) (*Generator, error) {
	cfg = cfg.withDefaults()
	switch {
	case cfg.NumDense < 0 || cfg.NumSlots < 0:
		return nil, errkind.New(errkind.Value, "synth: NumDense %d and NumSlots %d must be -1 or more", cfg.NumDense, cfg.NumSlots)
	case cfg.NumSlots >= 1<<(64-fidBits):
		return nil, errkind.New(errkind.Value, "synth: %d slots do not fit a v2 fid", cfg.NumSlots)
	case cfg.Vocab < 1 || cfg.IDsPerSlot < 1:
		return nil, errkind.New(errkind.Value, "synth: Vocab %d and IDsPerSlot %d must be positive", cfg.Vocab, cfg.IDsPerSlot)
	case !(cfg.ZipfS > 1):
		return nil, errkind.New(errkind.Value, "synth: ZipfS %v must be > 1", cfg.ZipfS)
	case cfg.DenseStd < 0 || cfg.IDStd < 0 || cfg.LatentStd < 0:
		return nil, errkind.New(errkind.Value, "synth: weight deviations must not be negative")
	case cfg.LatentDim < 0:
		return nil, errkind.New(errkind.Value, "synth: LatentDim %d must not be negative", cfg.LatentDim)
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, weightStream))
	g := &Generator{cfg: cfg, dense: make([]float64, cfg.NumDense), ids: make([][]float64, cfg.NumSlots)}
	for j := range g.dense {
		g.dense[j] = rng.NormFloat64() * cfg.DenseStd
	}
	for s := range g.ids {
		g.ids[s] = make([]float64, cfg.Vocab)
		for i := range g.ids[s] {
			g.ids[s][i] = rng.NormFloat64() * cfg.IDStd
		}
	}
	if cfg.LatentDim > 0 {
		rng := rand.New(rand.NewPCG(cfg.Seed, latentStream))
		g.latent = make([][]float64, cfg.NumSlots)
		for s := range g.latent {
			g.latent[s] = make([]float64, cfg.Vocab*cfg.LatentDim)
			for i := range g.latent[s] {
				g.latent[s][i] = rng.NormFloat64() * cfg.LatentStd
			}
		}
	}
	return g, nil
}

// driftStream is the PCG stream of a drifted ground truth's id weights.
const driftStream = 0xd21f_70_3e1675

// Drifted is the ground truth after a drift: the same features and dense weights, the ids'
// weights (and latent vectors) redrawn from seed. What was learned about the ids is stale; a model
// that follows the stream (online training, its embeddings pushed to serving) recovers, one frozen
// before the drift does not.
func (g *Generator) Drifted(seed uint64) *Generator {
	d := &Generator{cfg: g.cfg, dense: g.dense, ids: make([][]float64, len(g.ids))}
	rng := rand.New(rand.NewPCG(seed, driftStream))
	for s := range d.ids {
		d.ids[s] = make([]float64, len(g.ids[s]))
		for i := range d.ids[s] {
			d.ids[s][i] = rng.NormFloat64() * g.cfg.IDStd
		}
	}
	if g.latent != nil {
		d.latent = make([][]float64, len(g.latent))
		for s := range d.latent {
			d.latent[s] = make([]float64, len(g.latent[s]))
			for i := range d.latent[s] {
				d.latent[s][i] = rng.NormFloat64() * g.cfg.LatentStd
			}
		}
	}
	return d
}

// Config is the generator's configuration, defaults filled in.
func (g *Generator) Config() Config { return g.cfg }

// Schema is the features of the generator's examples, as pkg/trainer/batch reads them.
func (g *Generator) Schema() batch.Schema {
	var s batch.Schema
	if g.cfg.NumDense > 0 {
		s.Dense = []batch.DenseFeature{{Name: DenseFeature, Dim: g.cfg.NumDense}}
	}
	for slot := 1; slot <= g.cfg.NumSlots; slot++ {
		s.Sparse = append(s.Sparse, SlotFeature(slot))
	}
	return s
}

// Stream draws the examples of one stream (a data set: train, eval, ...).
type Stream struct {
	g    *Generator
	rng  *rand.Rand
	zipf *rand.Zipf
}

// Stream returns the example stream n; streams are independent of each other and of the weights.
func (g *Generator) Stream(n uint64) *Stream {
	rng := rand.New(rand.NewPCG(g.cfg.Seed, n))
	return &Stream{g: g, rng: rng, zipf: rand.NewZipf(rng, g.cfg.ZipfS, 1, uint64(g.cfg.Vocab-1))}
}

// Next draws an example and returns it with its true click probability.
func (s *Stream) Next() (*examplepb.Example, float64) {
	g := s.g
	ex := &examplepb.Example{}
	if g.cfg.NumDense > 0 {
		x := make([]float32, g.cfg.NumDense)
		for j := range x {
			x[j] = float32(s.rng.NormFloat64())
		}
		ex.NamedFeature = append(ex.NamedFeature, &examplepb.NamedFeature{Name: DenseFeature,
			Feature: &examplepb.Feature{Type: &examplepb.Feature_FloatList{FloatList: &examplepb.FloatList{Value: x}}}})
	}
	for slot := 1; slot <= g.cfg.NumSlots; slot++ {
		fids := make([]uint64, g.cfg.IDsPerSlot)
		for k := range fids {
			fids[k] = FID(slot, 1+s.zipf.Uint64())
		}
		ex.NamedFeature = append(ex.NamedFeature, &examplepb.NamedFeature{Name: SlotFeature(slot),
			Feature: &examplepb.Feature{Type: &examplepb.Feature_FidV2List{FidV2List: &examplepb.FidList{Value: fids}}}})
	}
	p, err := g.Prob(ex)
	if err != nil {
		panic(fmt.Sprintf("synth: an example of its own is not valid: %v", err)) // a bug here, not bad input
	}
	label := float32(0)
	if s.rng.Float64() < p {
		label = 1
	}
	ex.Label = []float32{label}
	return ex, p
}

// Prob is the true click probability of an example with the generator's features (its dense
// values as stored, float32). Features it does not know, or ids outside a slot's vocabulary, are
// errors of kind Value.
func (g *Generator) Prob(ex *examplepb.Example) (float64, error) {
	logit := g.cfg.Bias
	// sums[slot-1] is the sum of the latent vectors of the example's ids in slot.
	k := g.cfg.LatentDim
	var sums []float64
	if k > 0 {
		sums = make([]float64, len(g.ids)*k)
	}
	for _, nf := range ex.GetNamedFeature() {
		f := nf.GetFeature()
		if nf.GetName() == DenseFeature {
			x := f.GetFloatList().GetValue()
			if len(x) != len(g.dense) {
				return 0, errkind.New(errkind.Value, "synth: %d dense values, want %d", len(x), len(g.dense))
			}
			for j, v := range x {
				logit += g.dense[j] * float64(v)
			}
			continue
		}
		for _, fid := range f.GetFidV2List().GetValue() {
			slot, id := SlotOf(fid), fid&(1<<fidBits-1)
			if nf.GetName() != SlotFeature(slot) || slot < 1 || slot > len(g.ids) || id < 1 || id > uint64(g.cfg.Vocab) {
				return 0, errkind.New(errkind.Value, "synth: feature %q: fid %#x (slot %d, id %d) is not one of the generator's", nf.GetName(), fid, slot, id)
			}
			logit += g.ids[slot-1][id-1]
			if k > 0 {
				v, sum := g.latent[slot-1][int(id-1)*k:int(id)*k], sums[(slot-1)*k:slot*k]
				for j := range v {
					sum[j] += v[j]
				}
			}
		}
	}
	if k > 0 {
		logit += crossSlotDots(sums, k)
	}
	return 1 / (1 + math.Exp(-logit)), nil
}

// crossSlotDots is the sum of <v_a, v_b> over the pairs of ids in different slots, given each
// slot's sum S_s of latent vectors: (|sum_s S_s|^2 - sum_s |S_s|^2) / 2, in O(slots * k) rather
// than a loop over pairs.
func crossSlotDots(sums []float64, k int) float64 {
	var total, self float64
	for j := range k {
		var t float64
		for s := j; s < len(sums); s += k {
			t += sums[s]
			self += sums[s] * sums[s]
		}
		total += t * t
	}
	return (total - self) / 2
}

// WriteOptions say what Write writes.
type WriteOptions struct {
	// Dir receives the files <Name>-<i>.tfrecord (the directory must exist).
	Dir  string
	Name string
	// Files is the number of files (default 1); Examples the total number of examples, spread in
	// order over the files (the first ones get one more when it does not divide).
	Files    int
	Examples int
	// Stream is the example stream (see Generator.Stream).
	Stream uint64
	// Compression is the files' compression.
	Compression dataset.Compression
}

// Write writes examples of stream o.Stream into files and returns their paths.
func (g *Generator) Write(o WriteOptions) ([]string, error) {
	if o.Files == 0 {
		o.Files = 1
	}
	if o.Files < 0 || o.Examples < 0 || o.Name == "" {
		return nil, errkind.New(errkind.Value, "synth: write needs a name and non-negative counts (files %d, examples %d)", o.Files, o.Examples)
	}
	s := g.Stream(o.Stream)
	marshal := proto.MarshalOptions{Deterministic: true}
	var paths []string
	for i := range o.Files {
		n := o.Examples / o.Files
		if i < o.Examples%o.Files {
			n++
		}
		path := filepath.Join(o.Dir, fmt.Sprintf("%s-%05d.tfrecord", o.Name, i))
		if err := writeFile(path, o.Compression, n, s, marshal); err != nil {
			return nil, err
		}
		paths = append(paths, path)
	}
	return paths, nil
}

func writeFile(path string, c dataset.Compression, n int, s *Stream, marshal proto.MarshalOptions) (err error) {
	w, err := dataset.CreateFile(path, c)
	if err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	defer func() {
		if cerr := w.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("synth: %w", cerr)
		}
	}()
	var buf []byte
	for range n {
		ex, _ := s.Next()
		if buf, err = marshal.MarshalAppend(buf[:0], ex); err != nil {
			return fmt.Errorf("synth: marshal an example: %w", err)
		}
		if err := w.Write(buf); err != nil {
			return fmt.Errorf("synth: %w", err)
		}
	}
	return nil
}

// BestAUC is the AUC of the true probabilities on the Examples of files (read with opts): the
// best AUC a model can expect there. It uses the same streaming AUC (pkg/core/auc, 200
// thresholds) as the trainer's metric, so the two compare like for like. It also returns the
// mean log loss of the true probabilities, the best expected loss.
func (g *Generator) BestAUC(ctx context.Context, files []string, opts dataset.Options) (aucValue, logLoss float64, err error) {
	r, err := dataset.OpenFiles(files, opts)
	if err != nil {
		return 0, 0, err
	}
	defer r.Close()
	m, err := auc.New(auc.DefaultThresholds)
	if err != nil {
		return 0, 0, err
	}
	msgs := dataset.Examples(r)
	var labels, probs []float32
	var lossSum float64
	n := 0
	for {
		ex, err := msgs.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, 0, err
		}
		p, err := g.Prob(ex)
		if err != nil {
			return 0, 0, err
		}
		y := ex.GetLabel()
		if len(y) == 0 {
			return 0, 0, errkind.New(errkind.Value, "synth: an example has no label")
		}
		labels, probs = append(labels, y[0]), append(probs, float32(p))
		if y[0] != 0 {
			lossSum -= math.Log(p)
		} else {
			lossSum -= math.Log1p(-p)
		}
		n++
		if len(labels) == 4096 {
			if err := m.Update(labels, probs); err != nil {
				return 0, 0, err
			}
			labels, probs = labels[:0], probs[:0]
		}
	}
	if err := m.Update(labels, probs); err != nil {
		return 0, 0, err
	}
	if n == 0 {
		return 0, 0, errkind.New(errkind.Value, "synth: no examples in %v", files)
	}
	return float64(m.Value()), lossSum / float64(n), nil
}
