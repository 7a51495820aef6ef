package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	cputrainingspec "github.com/monolith-go/monolith/gen/spec/native_training/cpu_training"
	"github.com/monolith-go/monolith/internal/cli"
	"github.com/monolith-go/monolith/pkg/dataset"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
	"github.com/monolith-go/monolith/pkg/trainer/job"
	"github.com/monolith-go/monolith/pkg/trainer/synth"
)

// input is what the run trains and evaluates on: the job's sources of the input files.
type input struct {
	train, eval job.Files
	schema      batch.Schema
	// best is the generator's best AUC on eval (the demo only).
	best *job.Best
}

// files are the job's sources of the training and evaluation files.
func files(f cputrainingspec.TrainFlags, train, eval []string, opts dataset.Options, schema batch.Schema) (job.Files, job.Files) {
	return job.Files{Name: "--train_data", Paths: train, Epochs: f.Epochs, BatchSize: f.BatchSize, Schema: schema, Options: opts},
		job.Files{Name: "--eval_data", Paths: eval, Epochs: 1, BatchSize: f.BatchSize, Schema: schema, Options: opts}
}

// modelWords describes a model in the output.
func modelWords(model string) string {
	if model == job.ModelLogreg {
		return "a logistic regression"
	}
	return "a sparse + dense recommendation model (embedding tables on parameter servers, an MLP)"
}

// demoConfig is the demo's ground truth of model: for logreg the generator's default features
// (a logistic ground truth its per-id weights can learn), for dnn a click log whose ids also have
// latent factors (their cross-slot dot products add to the logit, so that only embeddings do
// well); both with a vocabulary small enough for the demo's examples to show every id many times.
func demoConfig(seed int, model string) synth.Config {
	if model == job.ModelLogreg {
		return synth.Config{Seed: uint64(seed), Vocab: 100}
	}
	return synth.Config{Seed: uint64(seed), NumDense: 4, NumSlots: 4, Vocab: 100, LatentDim: 4}
}

// demoFiles is how many files the demo's training set is spread over (at least one per worker).
const demoFiles = 4

// demoData writes the demo's click log into dir (training set: stream 1, evaluation set: stream 2,
// a quarter as many examples), prints what it wrote, and measures the generator's best AUC on the
// evaluation set (the job prints it with its result).
func demoData(ctx context.Context, dir string, f cputrainingspec.TrainFlags, workers int, c dataset.Compression, stdout io.Writer) (input, error) {
	g, err := synth.New(demoConfig(f.DemoSeed, f.Model))
	if err != nil {
		return input{}, cli.Usage(err)
	}
	opts := dataset.Options{Compression: c}
	train, err := g.Write(synth.WriteOptions{Dir: dir, Name: "train", Files: max(demoFiles, workers), Examples: f.DemoExamples, Stream: 1, Compression: c})
	if err != nil {
		return input{}, fmt.Errorf("demo data: %w", err)
	}
	nEval := f.DemoExamples / 4
	eval, err := g.Write(synth.WriteOptions{Dir: dir, Name: "eval", Files: 1, Examples: nEval, Stream: 2, Compression: c})
	if err != nil {
		return input{}, fmt.Errorf("demo data: %w", err)
	}
	auc, loss, err := g.BestAUC(ctx, eval, opts)
	if err != nil {
		return input{}, fmt.Errorf("demo data: best AUC: %w", err)
	}
	cfg := g.Config()
	fmt.Fprintf(stdout, "Monolith train demo: %s on a generated click log (nothing to install).\n", modelWords(f.Model))
	fmt.Fprintf(stdout, "  train data   %d examples in %s (%d files), %d epochs in batches of %d\n",
		f.DemoExamples, filepath.Join(dir, "train-*.tfrecord"), len(train), f.Epochs, f.BatchSize)
	latent := ""
	if cfg.LatentDim > 0 {
		latent = fmt.Sprintf(", %d-dimensional latent factors", cfg.LatentDim)
	}
	fmt.Fprintf(stdout, "  eval data    %d examples in %s (another stream of the same ground truth: %d dense values, %d slots of %d ids%s, seed %d)\n",
		nEval, filepath.Join(dir, "eval-*.tfrecord"), cfg.NumDense, cfg.NumSlots, cfg.Vocab, latent, cfg.Seed)
	in := input{schema: g.Schema(), best: &job.Best{AUC: auc, Loss: loss}}
	in.train, in.eval = files(f, train, eval, opts, in.schema)
	return in, nil
}

// fileData matches the input patterns; patterns that match nothing, or are malformed, are usage
// errors.
func fileData(f cputrainingspec.TrainFlags, c dataset.Compression, stdout io.Writer) (input, error) {
	schema, err := parseSchema(f.DenseFeatures, f.SparseFeatures, f.Model)
	if err != nil {
		return input{}, cli.Usage(err)
	}
	train, err := dataset.ExpandPatterns(f.TrainData)
	if err != nil {
		return input{}, cli.Usage(fmt.Errorf("--train_data %q: %w", f.TrainData, err))
	}
	eval, err := dataset.ExpandPatterns(f.EvalData)
	if err != nil {
		return input{}, cli.Usage(fmt.Errorf("--eval_data %q: %w", f.EvalData, err))
	}
	fmt.Fprintf(stdout, "Monolith train: %s on TFRecord files of Monolith Examples.\n", modelWords(f.Model))
	fmt.Fprintf(stdout, "  train data   %d files (%s), %d epochs in batches of %d\n", len(train), f.TrainData, f.Epochs, f.BatchSize)
	fmt.Fprintf(stdout, "  eval data    %d files (%s)\n", len(eval), f.EvalData)
	in := input{schema: schema}
	in.train, in.eval = files(f, train, eval, dataset.Options{Compression: c}, schema)
	return in, nil
}

// parseSchema reads --dense_features (name:dim, ...) and --sparse_features (name or name:slot,
// ...); an empty flag takes the demo generator's features of model. The slots are read by
// sparseSlots.
func parseSchema(dense, sparse, model string) (batch.Schema, error) {
	g, err := synth.New(demoConfig(0, model))
	if err != nil {
		return batch.Schema{}, err
	}
	s := g.Schema()
	if strings.TrimSpace(dense) != "" {
		s.Dense = nil
		for _, item := range strings.Split(dense, ",") {
			name, dim, ok := strings.Cut(strings.TrimSpace(item), ":")
			n, err := strconv.Atoi(dim)
			if !ok || name == "" || err != nil || n <= 0 {
				return batch.Schema{}, fmt.Errorf("--dense_features %q: want name:dim items (dim > 0), got %q", dense, item)
			}
			s.Dense = append(s.Dense, batch.DenseFeature{Name: name, Dim: n})
		}
	}
	if strings.TrimSpace(sparse) != "" {
		s.Sparse = nil
		for _, item := range strings.Split(sparse, ",") {
			name, _, _ := strings.Cut(strings.TrimSpace(item), ":")
			if name == "" {
				return batch.Schema{}, fmt.Errorf("--sparse_features %q: empty feature name", sparse)
			}
			s.Sparse = append(s.Sparse, name)
		}
	}
	return s, nil
}

// sparseSlots are the fid slots of --sparse_features (empty: the demo's slot_<n>, slot n): an
// item's slot is given as name:slot, or by a name slot_<n>.
func sparseSlots(sparse string, schema batch.Schema) ([]int, error) {
	items := schema.Sparse
	if strings.TrimSpace(sparse) != "" {
		items = strings.Split(sparse, ",")
	}
	slots := make([]int, 0, len(items))
	for _, item := range items {
		name, slot, given := strings.Cut(strings.TrimSpace(item), ":")
		if !given {
			if slot, given = strings.CutPrefix(name, "slot_"); !given {
				return nil, fmt.Errorf("--sparse_features: feature %q: dnn needs its fid slot (give %s:<slot>)", name, name)
			}
		}
		n, err := strconv.Atoi(slot)
		if err != nil || n < 0 || n > maxFidSlot {
			return nil, fmt.Errorf("--sparse_features: feature %q: slot %q is not a fid slot (0 to %d)", name, slot, maxFidSlot)
		}
		slots = append(slots, n)
	}
	return slots, nil
}

// maxFidSlot is the largest v2 fid slot (15 bits).
const maxFidSlot = 1<<15 - 1

// parseHidden reads --hidden: widths, a comma list ("" for none).
func parseHidden(s string) ([]int, error) {
	out := []int{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, item := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(item))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("--hidden %q: want positive widths, a comma list", s)
		}
		out = append(out, n)
	}
	return out, nil
}
