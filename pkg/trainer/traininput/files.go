// Package traininput builds a training job's input (pkg/trainer/job's sources) from cmd/train's
// flags: TFRecord files read through the feature schema, the demo's generated click log, or a
// Kafka stream (with an in-process broker when no servers are given); Check reads the first
// records of the files before anything is written.
package traininput

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	cputrainingspec "github.com/monolith-go/monolith/gen/spec/native_training/cpu_training"
	"github.com/monolith-go/monolith/internal/cli"
	"github.com/monolith-go/monolith/pkg/dataset"
	"github.com/monolith-go/monolith/pkg/featureschema"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
	"github.com/monolith-go/monolith/pkg/trainer/job"
	"github.com/monolith-go/monolith/pkg/trainer/synth"
)

// Input is what the run trains and evaluates on: the job's sources of the input files.
type Input struct {
	Train job.Sharded
	Eval  job.Source
	// Files are the training and evaluation files, when the input is files (check reads them).
	Files []job.Files
	// Features is the feature schema the records are read with; schema is the model's view of
	// it.
	Features *featureschema.Schema
	Schema   batch.Schema
	// Best is the generator's best AUC on eval (the demo only).
	Best *job.Best
}

// files are the job's sources of the training and evaluation files, their records read as the
// feature schema fs says (format: --input_format). loose is the shorthand flags' (and the
// demo's) reading of Monolith Examples: the fids are taken with the slots they carry and an
// example may lack a sparse feature.
func files(f cputrainingspec.TrainFlags, train, eval []string, opts dataset.Options, fs *featureschema.Schema, loose bool) (Input, error) {
	in, err := recordInputs(f, fs, loose)
	if err != nil {
		return Input{}, err
	}
	tr := job.Files{Name: "--train_data", Paths: train, Epochs: f.Epochs, BatchSize: f.BatchSize, Inputs: &in, Options: opts,
		ShuffleBuffer: f.ShuffleBuffer, Seed: uint64(f.Seed)}
	ev := job.Files{Name: "--eval_data", Paths: eval, Epochs: 1, BatchSize: f.BatchSize, Inputs: &in, Options: opts}
	schema, err := fs.BatchSchema()
	if err != nil {
		return Input{}, cli.Usage(err)
	}
	return Input{Train: tr, Eval: ev, Files: []job.Files{tr, ev}, Features: fs, Schema: schema}, nil
}

// recordInputs are how the records of --input_format are decoded through the feature schema fs
// (loose: see files).
func recordInputs(f cputrainingspec.TrainFlags, fs *featureschema.Schema, loose bool) (batch.Inputs, error) {
	format, err := batch.ParseFormat(f.InputFormat)
	if err != nil {
		return batch.Inputs{}, cli.Usage(fmt.Errorf("--input_format: %w", err))
	}
	in, err := fs.Inputs(format)
	if err != nil {
		return batch.Inputs{}, cli.Usage(err)
	}
	if loose {
		for i := range in.Sparse {
			in.Sparse[i].Optional = true
			if format == batch.Monolith {
				in.Sparse[i].Slot = batch.AnySlot
			}
		}
	}
	return in, nil
}

// Check reads the first records of the training and evaluation files (every file's first,
// and the first checkRecordsOf of each input) before the model dir is touched: unreadable or
// empty input, records that do not fit the schema, and features the records never have fail the
// run before anything is written.
func (in Input) Check(ctx context.Context) error {
	for _, f := range in.Files {
		if err := f.Check(ctx, checkRecordsOf, featureschema.Suggest); err != nil {
			return cli.Usage(fmt.Errorf("%s: %w", f.Name, err))
		}
	}
	return nil
}

// checkRecordsOf is how many records of each input check reads at most.
const checkRecordsOf = 1000

// DNNSparse are the dnn's settings of the schema's sparse features: their slots, and their
// pooling and buckets (the schema's, else --pooling and --embedding_buckets).
func DNNSparse(f cputrainingspec.TrainFlags, fs *featureschema.Schema) []job.SparseFeature {
	var out []job.SparseFeature
	for _, sf := range fs.Sparse() {
		out = append(out, job.SparseFeature{Slot: sf.FidSlot(), Pooling: string(sf.PoolingOr(featureschema.Pooling(f.Pooling))),
			Buckets: uint64(sf.BucketsOr(f.EmbeddingBuckets))})
	}
	return out
}

// modelWords describes a model in the output.
func modelWords(model string) string {
	if model == job.ModelLogreg {
		return "a logistic regression"
	}
	return "a sparse + dense recommendation model (embedding tables on parameter servers, an MLP)"
}

// DemoConfig is the demo's ground truth of model: for logreg the generator's default features
// (a logistic ground truth its per-id weights can learn), for dnn a click log whose ids also have
// latent factors (their cross-slot dot products add to the logit, so that only embeddings do
// well); both with a vocabulary small enough for the demo's examples to show every id many times.
func DemoConfig(seed int, model string) synth.Config {
	if model == job.ModelLogreg {
		return synth.Config{Seed: uint64(seed), Vocab: 100}
	}
	return synth.Config{Seed: uint64(seed), NumDense: 4, NumSlots: 4, Vocab: 100, LatentDim: 4}
}

// demoFiles is how many files the demo's training set is spread over (at least one per worker).
const demoFiles = 4

// FromDemo writes the demo's click log into dir (training set: stream 1, evaluation set: stream 2,
// a quarter as many examples), prints what it wrote, and measures the generator's best AUC on the
// evaluation set (the job prints it with its result).
func FromDemo(ctx context.Context, dir string, f cputrainingspec.TrainFlags, workers int, c dataset.Compression, stdout io.Writer) (Input, error) {
	g, err := synth.New(DemoConfig(f.DemoSeed, f.Model))
	if err != nil {
		return Input{}, cli.Usage(err)
	}
	opts := dataset.Options{Compression: c}
	train, err := g.Write(synth.WriteOptions{Dir: dir, Name: "train", Files: max(demoFiles, workers), Examples: f.DemoExamples, Stream: 1, Compression: c})
	if err != nil {
		return Input{}, fmt.Errorf("demo data: %w", err)
	}
	nEval := f.DemoExamples / 4
	eval, err := g.Write(synth.WriteOptions{Dir: dir, Name: "eval", Files: 1, Examples: nEval, Stream: 2, Compression: c})
	if err != nil {
		return Input{}, fmt.Errorf("demo data: %w", err)
	}
	auc, loss, err := g.BestAUC(ctx, eval, opts)
	if err != nil {
		return Input{}, fmt.Errorf("demo data: best AUC: %w", err)
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
	fs, err := schemaOf(g.Schema())
	if err != nil {
		return Input{}, err
	}
	in, err := files(f, train, eval, opts, fs, true)
	if err != nil {
		return Input{}, err
	}
	in.Best = &job.Best{AUC: auc, Loss: loss}
	return in, nil
}

// schemaOf is the feature schema of a generator's examples, as the shorthand flags would give
// it.
func schemaOf(s batch.Schema) (*featureschema.Schema, error) {
	var dense []string
	for _, d := range s.Dense {
		dense = append(dense, fmt.Sprintf("%s:%d", d.Name, d.Dim))
	}
	return featureschema.FromFlags(strings.Join(dense, ","), strings.Join(s.Sparse, ","))
}

// FromFiles matches the input patterns and reads the feature schema; patterns that match nothing,
// or are malformed, and a bad schema are usage errors.
func FromFiles(f cputrainingspec.TrainFlags, c dataset.Compression, stdout io.Writer) (Input, error) {
	fs, loose, err := FeaturesOf(f)
	if err != nil {
		return Input{}, cli.Usage(err)
	}
	train, err := dataset.ExpandPatterns(f.TrainData)
	if err != nil {
		return Input{}, cli.Usage(fmt.Errorf("--train_data %q: %w", f.TrainData, err))
	}
	eval, err := dataset.ExpandPatterns(f.EvalData)
	if err != nil {
		return Input{}, cli.Usage(fmt.Errorf("--eval_data %q: %w", f.EvalData, err))
	}
	in, err := files(f, train, eval, dataset.Options{Compression: c}, fs, loose)
	if err != nil {
		return Input{}, err
	}
	kind := "Monolith Examples"
	if f.InputFormat == string(batch.TFExample) {
		kind = "tf.train.Examples"
	}
	fmt.Fprintf(stdout, "Monolith train: %s on TFRecord files of %s.\n", modelWords(f.Model), kind)
	fmt.Fprintf(stdout, "  train data   %d files (%s), %d epochs in batches of %d\n", len(train), f.TrainData, f.Epochs, f.BatchSize)
	fmt.Fprintf(stdout, "  eval data    %d files (%s)\n", len(eval), f.EvalData)
	fmt.Fprintf(stdout, "  features     label <- %s (%s); %s\n", fs.Label.SourceName(), fs.Label.Rule(), in.Files[0].Inputs.Describe())
	return in, nil
}

// FeaturesOf is the run's feature schema: --schema's file, else the shorthand flags
// (--dense_features, --sparse_features: loose, see files), else the demo generator's features of
// the model.
func FeaturesOf(f cputrainingspec.TrainFlags) (fs *featureschema.Schema, loose bool, err error) {
	shorthand := strings.TrimSpace(f.DenseFeatures) != "" || strings.TrimSpace(f.SparseFeatures) != ""
	switch {
	case f.Schema != "" && shorthand:
		return nil, false, errors.New("--schema names the features: give it or --dense_features/--sparse_features, not both")
	case f.Schema != "":
		fs, err := featureschema.Load(f.Schema)
		if err != nil {
			return nil, false, fmt.Errorf("--schema: %w", err)
		}
		return fs, false, nil
	case shorthand:
		fs, err := featureschema.FromFlags(f.DenseFeatures, f.SparseFeatures)
		return fs, true, err
	}
	g, err := synth.New(DemoConfig(0, f.Model))
	if err != nil {
		return nil, false, err
	}
	fs, err = schemaOf(g.Schema())
	return fs, true, err
}

// ParseHidden reads --hidden: widths, a comma list ("" for none).
func ParseHidden(s string) ([]int, error) {
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
