// Command collisions is the Monolith paper's comparison of a collisionless embedding table with
// hashed ones (its experiment on the effect of embedding collisions): it draws one click log of
// Zipf-distributed user and item ids with latent factors (a user's click on an item depends on
// the dot product of their latent vectors, so a model must learn an embedding per id), and trains
// pkg/trainer/dnn on it in process (pkg/embedding tables through dnn.TableStore, cmd/train's
// table config) in three configurations:
//
//   - collisionless: every id has its own embedding;
//   - paper: ids hashed into as many buckets as make 7.73 % of the distinct user ids and 2.86 %
//     of the distinct item ids share a bucket, the paper's rates on MovieLens-25M;
//   - quarter: 25 % of both colliding.
//
// The model hashes the ids itself (dnn.Feature.Buckets, pkg/trainer/hashbucket's mapping), the
// code path that cmd/train --embedding_buckets trains and serving serves with. Bucket counts are
// found by hashbucket.BucketsForRate on the distinct ids of the data (train and eval), and their
// measured collision rates are printed beside the results. Each configuration is trained with
// --seeds seeds; a seed changes the model's initial dense parameters and embeddings
// and the order of the training examples in each epoch, while the data set (--data_seed) stays
// the same for every run, so that the configurations differ in their tables alone. After each
// epoch the model is evaluated on a held-out set of the same click log; the table gives, per
// configuration and epoch, the mean and standard deviation over the seeds of the eval AUC (the
// trainer's streaming AUC, 200 thresholds), the mean eval log loss, and the mean paired
// difference of AUC to the collisionless run of the same seed (paired, the seeds' shared noise
// cancels). The best AUC is that of the true click probabilities on the eval set.
//
//	go run ./bench/collisions
//	go run ./bench/collisions --examples=2000000 --epochs=5 --seeds=5
//
// Not a test: nothing here asserts a figure.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"text/tabwriter"
	"time"

	benchcollisionsspec "github.com/monolith-go/monolith/gen/spec/go/bench_collisions"
	"github.com/monolith-go/monolith/internal/cli"
	"github.com/monolith-go/monolith/pkg/embedding"
	"github.com/monolith-go/monolith/pkg/embedding/initializer"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
	"github.com/monolith-go/monolith/pkg/trainer/dnn"
	"github.com/monolith-go/monolith/pkg/trainer/hashbucket"
	"github.com/monolith-go/monolith/pkg/trainer/inprocess"
	"github.com/monolith-go/monolith/pkg/trainer/metrics"
)

const name = "bench_collisions"

const description = "Train the dnn on one Zipf click log with a collisionless embedding table and with hashed ones " +
	"at the Monolith paper's collision rates (7.73 % of user ids, 2.86 % of item ids) and at 25 %, " +
	"and print each configuration's eval AUC per epoch (mean and deviation over seeds)."

// benchFlags is the command line besides --version and --log_format (cli.Common), declared by
// specs/go/bench_collisions.yaml.
type benchFlags = benchcollisionsspec.BenchCollisionsFlags

type cmdFlags struct {
	cli.Common
	benchcollisionsspec.BenchCollisionsFlags
}

func main() { cli.Main(cli.IgnoreSecondSignal, run) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var c cmdFlags
	return cli.Run(name, description, &c, nil, args, stdout, stderr, func(log *slog.Logger) error {
		return bench(ctx, c.BenchCollisionsFlags, stdout, log)
	})
}

// setup is a configuration's target collision rates (0: collisionless).
type setup struct {
	name               string
	userRate, itemRate float64
}

// setups are the configurations compared, collisionless first (the others' baseline).
var setups = []setup{
	{"collisionless", 0, 0},
	{"paper", 0.0773, 0.0286},
	{"quarter", 0.25, 0.25},
}

// tables of a setup: its bucket counts and their measured collision rates on the data's ids.
type tables struct {
	setup
	userBuckets, itemBuckets uint64
	userCollide, itemCollide float64
	aucs, losses             [][]float64 // [seed][epoch]
	// examplesPerSec is the training speed over all the setup's runs.
	examplesPerSec float64
}

func check(f benchFlags) error {
	switch {
	case f.Examples < 1 || f.EvalExamples < 1:
		return fmt.Errorf("--examples %d and --eval_examples %d must be positive", f.Examples, f.EvalExamples)
	case f.Epochs < 1 || f.Seeds < 1:
		return fmt.Errorf("--epochs %d and --seeds %d must be positive", f.Epochs, f.Seeds)
	case f.Dim < 1 || f.BatchSize < 1:
		return fmt.Errorf("--dim %d and --batch_size %d must be positive", f.Dim, f.BatchSize)
	case !(f.LearningRate > 0) || !(f.EmbeddingLR > 0):
		return fmt.Errorf("--learning_rate %v and --embedding_learning_rate %v must be positive", f.LearningRate, f.EmbeddingLR)
	case float32(f.EmbeddingLR) == 0 || math.IsInf(float64(float32(f.EmbeddingLR)), 0):
		// The tables' learning rate is a float32.
		return fmt.Errorf("--embedding_learning_rate %v is out of a float32's range", f.EmbeddingLR)
	}
	return nil
}

// The example streams of the click log.
const (
	trainStream = 1
	evalStream  = 2
	// orderStream is the PCG stream of a run's training order (with the run's seed).
	orderStream = 0x0de7
)

func bench(ctx context.Context, f benchFlags, stdout io.Writer, log *slog.Logger) error {
	if err := check(f); err != nil {
		return cli.Usage(err)
	}
	start := time.Now()
	g, err := newClickLog(logConfig{Seed: f.DataSeed, Users: f.Users, Items: f.Items, ZipfS: f.ZipfS,
		LatentDim: f.LatentDim, IDStd: 0.5, LatentStd: 0.7, Bias: -1.5})
	if err != nil {
		return cli.Usage(err)
	}
	train, eval := g.draw(f.Examples, trainStream), g.draw(f.EvalExamples, evalStream)
	users, items := distinctIDs(train, eval)
	best, bestLoss, err := bestAUC(eval)
	if err != nil {
		return err
	}
	var runs []*tables
	for _, s := range setups {
		t := &tables{setup: s}
		if t.userBuckets, t.userCollide, err = bucketsFor(users, s.userRate); err != nil {
			return fmt.Errorf("%s: user buckets: %w", s.name, err)
		}
		if t.itemBuckets, t.itemCollide, err = bucketsFor(items, s.itemRate); err != nil {
			return fmt.Errorf("%s: item buckets: %w", s.name, err)
		}
		runs = append(runs, t)
	}
	total := len(runs) * f.Seeds
	for i, t := range runs {
		var examples int
		var secs float64
		for seed := 1; seed <= f.Seeds; seed++ {
			n := i*f.Seeds + seed
			log.Info("run", "run", fmt.Sprintf("%d/%d", n, total), "config", t.name, "seed", seed,
				"user_buckets", t.userBuckets, "item_buckets", t.itemBuckets)
			r, err := trainRun(ctx, f, t.buckets(), uint64(seed), train, eval, func(epoch int, auc float64, took time.Duration) {
				log.Info("epoch", "run", fmt.Sprintf("%d/%d", n, total), "config", t.name, "seed", seed,
					"epoch", fmt.Sprintf("%d/%d", epoch, f.Epochs), "eval_auc", fmt.Sprintf("%.4f", auc),
					"examples_per_s", fmt.Sprintf("%.0f", float64(len(train))/took.Seconds()))
			})
			if err != nil {
				return fmt.Errorf("%s, seed %d: %w", t.name, seed, err)
			}
			t.aucs, t.losses = append(t.aucs, r.aucs), append(t.losses, r.losses)
			examples += f.Epochs * len(train)
			secs += r.trainTime.Seconds()
		}
		t.examplesPerSec = float64(examples) / secs
	}
	fmt.Fprintf(stdout, "click log: %d train + %d eval examples (data seed %d, the same for every run); users: vocabulary %d, %d distinct; items: vocabulary %d, %d distinct; Zipf exponent %v, latent dim %d\n",
		len(train), len(eval), f.DataSeed, f.Users, len(users), f.Items, len(items), f.ZipfS, f.LatentDim)
	fmt.Fprintf(stdout, "model: dnn, embedding dim %d, batch %d, %d epochs, seeds 1..%d (initial parameters and training order)\n",
		f.Dim, f.BatchSize, f.Epochs, f.Seeds)
	fmt.Fprintf(stdout, "best eval AUC (true probabilities): %.4f, log loss %.4f\n\n", best, bestLoss)
	if err := writeTable(stdout, runs, f.Epochs); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nwall time %.1fs\n", time.Since(start).Seconds())
	return nil
}

// buckets is the setup's bucket count per slot (0: collisionless).
func (t *tables) buckets() map[int]uint64 {
	return map[int]uint64{userSlot: t.userBuckets, itemSlot: t.itemBuckets}
}

// bucketsFor is the bucket count at which ids collide at rate (0 for rate 0: collisionless) and
// the rate measured there.
func bucketsFor(ids []uint64, rate float64) (uint64, float64, error) {
	if rate == 0 {
		return 0, 0, nil
	}
	n, err := hashbucket.BucketsForRate(ids, rate)
	if err != nil {
		return 0, 0, err
	}
	return n, hashbucket.CollisionRate(ids, n), nil
}

// bestAUC is the trainer's AUC metric and log loss of the true probabilities.
func bestAUC(eval []example) (float64, float64, error) {
	m, loss := metrics.NewAUC(), &metrics.LogLoss{}
	labels, probs := make([]float32, len(eval)), make([]float32, len(eval))
	for i, ex := range eval {
		labels[i], probs[i] = ex.label, float32(ex.prob)
	}
	if err := m.Update(labels, probs); err != nil {
		return 0, 0, fmt.Errorf("best AUC: %w", err)
	}
	if err := loss.Update(labels, probs); err != nil {
		return 0, 0, fmt.Errorf("best log loss: %w", err)
	}
	return m.Value(), loss.Value(), nil
}

// runResult is one run's eval AUC and log loss after each epoch, and its training time.
type runResult struct {
	aucs, losses []float64
	trainTime    time.Duration
}

// The model's features, one table each.
var features = []struct {
	name string
	slot int
}{{"user", userSlot}, {"item", itemSlot}}

// modelFeatures are the model's features of dimension dim, the ids of each hashed by the model into
// buckets[slot] buckets (dnn.Feature.Buckets, as cmd/train --embedding_buckets sets it; 0 or
// absent: collisionless).
func modelFeatures(dim int, buckets map[int]uint64) []dnn.Feature {
	var feats []dnn.Feature
	for _, feat := range features {
		feats = append(feats, dnn.Feature{Name: feat.name, Slot: feat.slot, Dim: dim, Buckets: buckets[feat.slot]})
	}
	return feats
}

// newStore is a table per feature, cmd/train's (inprocess.TableConfig: Adagrad, random uniform
// entries) built in process, one worker each so that entries are created in the same order every
// run; the initial entries are drawn from seed.
func newStore(f benchFlags, seed uint64) (*dnn.TableStore, error) {
	ts := map[string]*embedding.Table{}
	for i, feat := range features {
		c := inprocess.TableConfig(feat.name, f.Dim, float32(f.EmbeddingLR))
		cfg, _, err := embedding.FromProtoWithGenerator(c.GetConfig(), initializer.NewGenerator(uint32(seed)*uint32(len(features))+uint32(i)))
		if err != nil {
			return nil, fmt.Errorf("table %q: %w", feat.name, err)
		}
		cfg.Workers = 1
		if ts[feat.name], err = embedding.New(cfg); err != nil {
			return nil, fmt.Errorf("table %q: %w", feat.name, err)
		}
	}
	return dnn.NewTableStore(ts)
}

// batcher builds batches of examples, their fids as drawn (the model buckets them), in buffers
// reused from batch to batch.
type batcher struct {
	b    batch.Batch
	fids []uint64
}

func (bt *batcher) build(exs []example) *batch.Batch {
	n := len(exs)
	b := &bt.b
	b.Labels, b.Dense, b.DenseDim = b.Labels[:0], b.Dense[:0], 0
	if cap(bt.fids) < 2*n {
		bt.fids, b.Fids = make([]uint64, 2*n), make([][]uint64, n)
	}
	fids := bt.fids[:2*n]
	b.Fids = b.Fids[:n]
	for i, ex := range exs {
		b.Labels = append(b.Labels, ex.label)
		fids[2*i], fids[2*i+1] = ex.user, ex.item
		b.Fids[i] = fids[2*i : 2*i+2 : 2*i+2]
	}
	return b
}

// trainRun trains a fresh model on train for f.Epochs epochs, its features' ids hashed into
// buckets[slot] buckets (modelFeatures), and evaluates it on eval after each; progress gets each
// epoch's eval AUC and training time.
func trainRun(ctx context.Context, f benchFlags, buckets map[int]uint64, seed uint64, train, eval []example,
	progress func(epoch int, auc float64, took time.Duration)) (runResult, error) {
	store, err := newStore(f, seed)
	if err != nil {
		return runResult{}, err
	}
	m, err := dnn.New(dnn.Config{Features: modelFeatures(f.Dim, buckets), LearningRate: f.LearningRate,
		EmbeddingLearningRates: []float32{float32(f.EmbeddingLR)}, Seed: seed}, store)
	if err != nil {
		return runResult{}, fmt.Errorf("model: %w", err)
	}
	order := make([]example, len(train))
	copy(order, train)
	rng := rand.New(rand.NewPCG(seed, orderStream))
	bt := &batcher{}
	var res runResult
	for epoch := 1; epoch <= f.Epochs; epoch++ {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		start := time.Now()
		for lo := 0; lo < len(order); lo += f.BatchSize {
			if err := ctx.Err(); err != nil {
				return res, err
			}
			if _, err := m.Step(ctx, bt.build(order[lo:min(lo+f.BatchSize, len(order))])); err != nil {
				return res, fmt.Errorf("epoch %d: %w", epoch, err)
			}
		}
		took := time.Since(start)
		res.trainTime += took
		auc, loss, err := evaluate(ctx, m, bt, eval)
		if err != nil {
			return res, fmt.Errorf("epoch %d: eval: %w", epoch, err)
		}
		res.aucs, res.losses = append(res.aucs, auc), append(res.losses, loss)
		progress(epoch, auc, took)
	}
	return res, nil
}

// evalBatch is the batch size of evaluation (it changes nothing but speed).
const evalBatch = 1024

// evaluate is the model's AUC and log loss on eval, changing nothing.
func evaluate(ctx context.Context, m *dnn.Model, bt *batcher, eval []example) (float64, float64, error) {
	auc, loss := metrics.NewAUC(), &metrics.LogLoss{}
	var probs []float32
	for lo := 0; lo < len(eval); lo += evalBatch {
		b := bt.build(eval[lo:min(lo+evalBatch, len(eval))])
		p, err := m.Predict(ctx, b)
		if err != nil {
			return 0, 0, err
		}
		probs = probs[:0]
		for _, v := range p {
			probs = append(probs, float32(v))
		}
		if err := errors.Join(auc.Update(b.Labels, probs), loss.Update(b.Labels, probs)); err != nil {
			return 0, 0, err
		}
	}
	return auc.Value(), loss.Value(), nil
}

// meanStd is the mean and the sample standard deviation (0 for one value) of xs.
func meanStd(xs []float64) (float64, float64) {
	var sum float64
	for _, x := range xs {
		sum += x
	}
	mean := sum / float64(len(xs))
	if len(xs) < 2 {
		return mean, 0
	}
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(ss / float64(len(xs)-1))
}

// column reads value v of every seed at epoch e.
func column(v [][]float64, e int) []float64 {
	out := make([]float64, len(v))
	for s := range v {
		out[s] = v[s][e]
	}
	return out
}

// tableHeader are the columns of the results table.
var tableHeader = []string{"config", "epoch", "user_buckets", "item_buckets", "user_collide_%", "item_collide_%",
	"auc_mean", "auc_std", "d_auc_mean", "d_auc_std", "log_loss_mean", "examples_per_s"}

// writeTable prints a row per configuration and epoch. d_auc is the paired difference to the
// collisionless run of the same seed (runs[0]).
func writeTable(w io.Writer, runs []*tables, epochs int) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for i, h := range tableHeader {
		if i > 0 {
			fmt.Fprint(tw, "\t")
		}
		fmt.Fprint(tw, h)
	}
	fmt.Fprintln(tw)
	base := runs[0]
	for _, t := range runs {
		for e := range epochs {
			aucs := column(t.aucs, e)
			diffs := make([]float64, len(aucs))
			for s := range aucs {
				diffs[s] = aucs[s] - base.aucs[s][e]
			}
			am, as := meanStd(aucs)
			dm, ds := meanStd(diffs)
			lm, _ := meanStd(column(t.losses, e))
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.2f\t%.2f\t%.4f\t%.4f\t%+.4f\t%.4f\t%.4f\t%.0f\n", t.name, e+1, t.userBuckets, t.itemBuckets,
				100*t.userCollide, 100*t.itemCollide, am, as, dm, ds, lm, t.examplesPerSec)
		}
	}
	return tw.Flush()
}
