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
	"github.com/monolith-go/monolith/pkg/trainer/synth"
)

// demoConfig is the demo's ground truth: the generator's default features, a vocabulary small
// enough for the demo's examples to show every id many times.
func demoConfig(seed int) synth.Config {
	return synth.Config{Seed: uint64(seed), Vocab: 100}
}

// demoFiles is how many files the demo's training set is spread over.
const demoFiles = 4

// demoData writes the demo's click log into dir (training set: stream 1, evaluation set: stream 2,
// a quarter as many examples) and prints what it wrote and the generator's best AUC on the
// evaluation set.
func demoData(ctx context.Context, dir string, f cputrainingspec.TrainFlags, c dataset.Compression, stdout io.Writer) (data, error) {
	g, err := synth.New(demoConfig(f.DemoSeed))
	if err != nil {
		return data{}, cli.Usage(err)
	}
	opts := dataset.Options{Compression: c}
	train, err := g.Write(synth.WriteOptions{Dir: dir, Name: "train", Files: demoFiles, Examples: f.DemoExamples, Stream: 1, Compression: c})
	if err != nil {
		return data{}, fmt.Errorf("demo data: %w", err)
	}
	nEval := f.DemoExamples / 4
	eval, err := g.Write(synth.WriteOptions{Dir: dir, Name: "eval", Files: 1, Examples: nEval, Stream: 2, Compression: c})
	if err != nil {
		return data{}, fmt.Errorf("demo data: %w", err)
	}
	auc, loss, err := g.BestAUC(ctx, eval, opts)
	if err != nil {
		return data{}, fmt.Errorf("demo data: best AUC: %w", err)
	}
	cfg := g.Config()
	fmt.Fprintf(stdout, "Monolith train demo: a logistic regression on a generated click log (nothing to install).\n")
	fmt.Fprintf(stdout, "  train data   %d examples in %s (%d files), %d epochs in batches of %d\n",
		f.DemoExamples, filepath.Join(dir, "train-*.tfrecord"), len(train), f.Epochs, f.BatchSize)
	fmt.Fprintf(stdout, "  eval data    %d examples in %s (another stream of the same ground truth: %d dense values, %d slots of %d ids, seed %d)\n",
		nEval, filepath.Join(dir, "eval-*.tfrecord"), cfg.NumDense, cfg.NumSlots, cfg.Vocab, cfg.Seed)
	return data{train: train, eval: eval, opts: opts, schema: g.Schema(), best: &bestAUC{auc: auc, loss: loss}}, nil
}

// bestAUC is what the generator's true probabilities reach on the evaluation set.
type bestAUC struct{ auc, loss float64 }

// fileData matches the input patterns; patterns that match nothing, or are malformed, are usage
// errors.
func fileData(f cputrainingspec.TrainFlags, c dataset.Compression, stdout io.Writer) (data, error) {
	schema, err := parseSchema(f.DenseFeatures, f.SparseFeatures)
	if err != nil {
		return data{}, cli.Usage(err)
	}
	train, err := dataset.ExpandPatterns(f.TrainData)
	if err != nil {
		return data{}, cli.Usage(fmt.Errorf("--train_data %q: %w", f.TrainData, err))
	}
	eval, err := dataset.ExpandPatterns(f.EvalData)
	if err != nil {
		return data{}, cli.Usage(fmt.Errorf("--eval_data %q: %w", f.EvalData, err))
	}
	fmt.Fprintf(stdout, "Monolith train: a logistic regression on TFRecord files of Monolith Examples.\n")
	fmt.Fprintf(stdout, "  train data   %d files (%s), %d epochs in batches of %d\n", len(train), f.TrainData, f.Epochs, f.BatchSize)
	fmt.Fprintf(stdout, "  eval data    %d files (%s)\n", len(eval), f.EvalData)
	return data{train: train, eval: eval, opts: dataset.Options{Compression: c}, schema: schema}, nil
}

// parseSchema reads --dense_features (name:dim, ...) and --sparse_features (name, ...); an empty
// flag takes the demo generator's features.
func parseSchema(dense, sparse string) (batch.Schema, error) {
	g, err := synth.New(demoConfig(0))
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
			if item = strings.TrimSpace(item); item == "" {
				return batch.Schema{}, fmt.Errorf("--sparse_features %q: empty feature name", sparse)
			}
			s.Sparse = append(s.Sparse, item)
		}
	}
	return s, nil
}
