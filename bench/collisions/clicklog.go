package main

import (
	"math"
	"math/rand/v2"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/trainer/synth"
)

// The click log's slots, as v2 fid slots (synth.FID).
const (
	userSlot = 1
	itemSlot = 2
)

// logConfig is the ground truth of the bench's click log. It is pkg/trainer/synth's latent-factor
// model cut down to a user and an item slot, with a vocabulary each: synth gives every slot one
// vocabulary, and the paper's data (MovieLens) has many more users than items, so each slot needs
// its own for its collision rate to mean what the paper's does.
type logConfig struct {
	Seed uint64
	// Users and Items are the slots' vocabularies: ids 1..Users and 1..Items, each drawn from a
	// Zipf law of exponent ZipfS (> 1) over its vocabulary.
	Users, Items int
	ZipfS        float64
	// LatentDim is the dimension of the ids' latent vectors (components N(0, LatentStd^2)), whose
	// dot product <v_user, v_item> is the logit's interaction term; IDStd the deviation of the
	// per-id weights; Bias the logit's intercept.
	LatentDim        int
	IDStd, LatentStd float64
	Bias             float64
}

// clickLog draws examples of a logConfig: logit = Bias + w_user + w_item + <v_user, v_item>.
type clickLog struct {
	cfg          logConfig
	userW, itemW []float64 // [id-1]
	userV, itemV []float64 // [(id-1)*LatentDim : id*LatentDim]
}

// example is one impression: the user's and the item's fids, the click label and its true
// probability.
type example struct {
	user, item uint64
	label      float32
	prob       float64
}

// The PCG streams of the ground truth (the examples' streams are the callers' choice, kept apart
// from these).
const (
	weightStream = 0xc0_111de_5eed
	latentStream = 0xc0_111de_1a7e
)

func newClickLog(cfg logConfig) (*clickLog, error) {
	switch {
	case cfg.Users < 2 || cfg.Items < 2:
		return nil, errkind.New(errkind.Value, "click log: %d users and %d items, want 2 or more of each", cfg.Users, cfg.Items)
	case cfg.Users > 1<<47 || cfg.Items > 1<<47:
		return nil, errkind.New(errkind.Value, "click log: %d users and %d items do not fit 48-bit ids", cfg.Users, cfg.Items)
	case !(cfg.ZipfS > 1):
		return nil, errkind.New(errkind.Value, "click log: Zipf exponent %v, want > 1", cfg.ZipfS)
	case cfg.LatentDim < 1:
		return nil, errkind.New(errkind.Value, "click log: latent dimension %d, want 1 or more", cfg.LatentDim)
	case cfg.IDStd < 0 || cfg.LatentStd < 0:
		return nil, errkind.New(errkind.Value, "click log: deviations %v and %v must not be negative", cfg.IDStd, cfg.LatentStd)
	}
	g := &clickLog{cfg: cfg}
	r := rand.New(rand.NewPCG(cfg.Seed, weightStream))
	normals := func(r *rand.Rand, n int, std float64) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = r.NormFloat64() * std
		}
		return v
	}
	g.userW, g.itemW = normals(r, cfg.Users, cfg.IDStd), normals(r, cfg.Items, cfg.IDStd)
	r = rand.New(rand.NewPCG(cfg.Seed, latentStream))
	g.userV, g.itemV = normals(r, cfg.Users*cfg.LatentDim, cfg.LatentStd), normals(r, cfg.Items*cfg.LatentDim, cfg.LatentStd)
	return g, nil
}

// prob is the true click probability of user u and item i (ids from 1).
func (g *clickLog) prob(u, i uint64) float64 {
	k := g.cfg.LatentDim
	logit := g.cfg.Bias + g.userW[u-1] + g.itemW[i-1]
	vu, vi := g.userV[int(u-1)*k:int(u)*k], g.itemV[int(i-1)*k:int(i)*k]
	for j := range vu {
		logit += vu[j] * vi[j]
	}
	return 1 / (1 + math.Exp(-logit))
}

// draw returns n examples of PCG stream `stream`: the same arguments give the same examples.
func (g *clickLog) draw(n int, stream uint64) []example {
	r := rand.New(rand.NewPCG(g.cfg.Seed, stream))
	users := rand.NewZipf(r, g.cfg.ZipfS, 1, uint64(g.cfg.Users-1))
	items := rand.NewZipf(r, g.cfg.ZipfS, 1, uint64(g.cfg.Items-1))
	out := make([]example, n)
	for e := range out {
		u, i := 1+users.Uint64(), 1+items.Uint64()
		p := g.prob(u, i)
		label := float32(0)
		if r.Float64() < p {
			label = 1
		}
		out[e] = example{user: synth.FID(userSlot, u), item: synth.FID(itemSlot, i), label: label, prob: p}
	}
	return out
}

// distinctIDs are the distinct ids (48-bit, slot bits dropped) of the user and item slots in sets.
func distinctIDs(sets ...[]example) (users, items []uint64) {
	seenU, seenI := map[uint64]bool{}, map[uint64]bool{}
	for _, set := range sets {
		for _, ex := range set {
			u, i := ex.user&(1<<48-1), ex.item&(1<<48-1)
			if !seenU[u] {
				seenU[u] = true
				users = append(users, u)
			}
			if !seenI[i] {
				seenI[i] = true
				items = append(items, i)
			}
		}
	}
	return users, items
}
