// Command predict scores examples with an export in this process: the entry's model
// (export.LoadEntry: the trainer's dnn forward pass, Entry.NewModel) over the PS sub-graphs' tables
// (export.LoadPSShard, each id in shard floormod(id, num_ps)), with no server, no agent and no
// network. It gives the scores the model server must answer for the same examples, so a served
// model can be checked against them (cmd/serve_e2e_test.sh does), or checked here
// (--compare_target).
//
//	predict --export_base=/tmp/exported/ctr --random=64 --write_input=batch.pbtxt > scores.txt
//	tfs_client --model_name=ctr:entry --target=127.0.0.1:8500 --input_type=example_batch \
//	    --file_type=pbtxt --input_file=batch.pbtxt
//
// The examples are an ExampleBatch (--input_file, what tfs_client sends with
// --input_type=example_batch) or a random batch of the model's features (--random, tfs_client
// --model_spec's generator); the examples are read as the trainer reads its Examples
// (batch.Schema.Append), each example taking feature i of each list (feature 0 of a SHARED one).
// stdout gets one score a line, in the examples' order.
//
// With --training_ps the tables are those of a job's training parameter servers (cmd/ps, looked up
// over gRPC, ids routed as the trainer routes them) instead of the export's PS sub-graphs: the
// export's dense part over the trainer's current embeddings, which is what a served model answers
// once parameter sync (cmd/ps --sync_model_name) has pushed the trainer's updates to its PS
// replicas (the dense part changes only with the next export).
//
// With --compare_target=host:port it checks a served model itself: the same examples go to Predict
// on <model>:entry at that model server (the export's model name, or --model_name), as tfs_client
// --input_type=example_batch sends them (ExampleBatches of at most CompareBatch examples, each call
// under --compare_timeout; TLS with --tls_ca, --tls_cert, --tls_key, plaintext by default), and
// stdout gets, instead of the scores, one line: the examples compared, the most |served - local|,
// the example where it is (the first such) and both its scores, e.g.
//
//	compared=40 max_abs_diff=1.4719982455169145e-08 worst_example=8 served=0.46776578 local=0.4677657930231288 tolerance=1e-06 within_tolerance=true model=ctr:entry target=127.0.0.1:8500
//
// The exit status is then 1 when that difference exceeds --tolerance (default 1e-6: a served
// score is this process's to about one float32 ulp, 6e-8 below 1, while a served model of another
// export, a few training steps away, is off by orders of magnitude more), with a line on stderr
// naming the example. The served model's newest version is compared: serve this export's version.
//
// --random is at most MaxRandom (102400) examples. SIGTERM or SIGINT stops the command within a
// second, whatever it is doing, with nothing on stdout unless every score is.
//
// Exit status: 0 after scoring (or a comparison within --tolerance), 2 for a bad command line or
// bad input (a missing or corrupt export, an ExampleBatch without the model's features, --random
// past MaxRandom, a --compare_target that is not host:port, a negative --tolerance, a missing TLS
// file), 1 for a failure at run time (a compare target that does not answer Predict, or answers
// scores past --tolerance) or a stop by a signal before the scores are out.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/prototext"

	examplepb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/example"
	predictspec "github.com/monolith-go/monolith/gen/spec/go/predict"
	"github.com/monolith-go/monolith/internal/cli"
	"github.com/monolith-go/monolith/pkg/embedding"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/export"
	"github.com/monolith-go/monolith/pkg/instance"
	"github.com/monolith-go/monolith/pkg/modelconfig"
	"github.com/monolith-go/monolith/pkg/ps"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
	"github.com/monolith-go/monolith/pkg/trainer/dnn"
)

const name = "predict"

const description = "Score an ExampleBatch with an export loaded in this process (entry + PS shards): the scores the model server must answer."

// MaxRandom is the most examples --random may ask for: a hundred times the 1024 examples of a
// served model's batch (the agent's TF Serving max_batch_size). An example takes about 3.5 kB
// here (the ExampleBatch, the model's batch, the text of --write_input), so the largest batch is
// about 350 MB; --random=100000000 grew to GBs.
const MaxRandom = 100 * 1024

type cmdFlags struct {
	cli.Common
	predictspec.PredictFlags
}

func main() { cli.Main(cli.IgnoreSecondSignal, run) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var c cmdFlags
	return cli.Run(name, description, &c, &c.LogLevel, args, stdout, stderr, func(log *slog.Logger) error {
		return predict(ctx, c.PredictFlags, stdout, log)
	})
}

func predict(ctx context.Context, f predictspec.PredictFlags, stdout io.Writer, log *slog.Logger) error {
	switch {
	case f.ExportBase == "":
		return cli.Usage(errors.New("--export_base is required: the export's base directory"))
	case f.InputFile == "" && f.Random <= 0:
		return cli.Usage(errors.New("give the examples: --input_file (an ExampleBatch) or --random=N"))
	case f.InputFile != "" && f.Random != 0:
		return cli.Usage(errors.New("--input_file and --random: give one"))
	case f.Random > MaxRandom:
		return cli.Usage(fmt.Errorf("--random %d: at most %d examples (MaxRandom, a hundred times a served model's batch of 1024)", f.Random, MaxRandom))
	case f.ExportVersion < 0:
		return cli.Usage(fmt.Errorf("--export_version %d is negative", f.ExportVersion))
	case f.TrainingPSTimeout <= 0:
		return cli.Usage(fmt.Errorf("--training_ps_timeout %v is not positive", f.TrainingPSTimeout))
	}
	trainingPS, err := parseAddrs(f.TrainingPS)
	if err != nil {
		return cli.Usage(err)
	}
	compareCreds, err := compareFlags(f)
	if err != nil {
		return err
	}
	start := time.Now()
	m, err := load(ctx, f.ExportBase, int64(f.ExportVersion), len(trainingPS) == 0)
	if err != nil {
		return classify(err)
	}
	log.Info("export loaded", "entry", m.entry.Dir, "model", m.entry.Manifest.ModelName, "global_step", m.entry.Manifest.GlobalStep,
		"num_ps", m.entry.Manifest.NumPS, "seconds", time.Since(start).Seconds())
	var store dnn.EmbeddingStore = shardStore{m.shards}
	if len(trainingPS) > 0 {
		r, err := ps.NewRouter(ps.RouterConfig{Addrs: trainingPS, CallTimeout: f.TrainingPSTimeout})
		if err != nil {
			return fmt.Errorf("--training_ps: %w", err)
		}
		defer r.Close()
		store = ps.RouterStore{Router: r}
		log.Info("embeddings from the training parameter servers", "training_ps", trainingPS)
	}
	var eb *examplepb.ExampleBatch
	if f.InputFile != "" {
		format, err := instance.ParseFormat(f.FileType)
		if err != nil {
			return cli.Usage(err)
		}
		if err := interruptible(ctx, func() (err error) {
			eb, err = instance.ReadExampleBatch(f.InputFile, format, instance.Header{})
			return err
		}); err != nil {
			return usageUnlessStopped(ctx, fmt.Errorf("--input_file: %w", err))
		}
	} else {
		mf, err := instance.ReadModelFeatures(m.entry.Dir)
		if err != nil {
			return cli.Usage(err)
		}
		rng := rand.New(rand.NewPCG(uint64(f.Seed), 0))
		if err := interruptible(ctx, func() (err error) {
			eb, err = instance.RandomModelBatch(rng, mf, f.Random, time.Now())
			return err
		}); err != nil {
			return usageUnlessStopped(ctx, err)
		}
	}
	if f.WriteInput != "" {
		if err := interruptible(ctx, func() error {
			text, err := prototext.MarshalOptions{Multiline: true}.Marshal(eb)
			if err != nil {
				return err
			}
			if err := os.WriteFile(f.WriteInput, text, 0o644); err != nil {
				return cli.Usage(fmt.Errorf("--write_input: %w", err))
			}
			return nil
		}); err != nil {
			return err
		}
	}
	b, err := toBatch(ctx, m.entry.Manifest.Model.Schema(), eb)
	if err != nil {
		return usageUnlessStopped(ctx, err)
	}
	scores, err := m.predict(ctx, store, b)
	if err != nil {
		if ctx.Err() != nil {
			return stopped(ctx)
		}
		return err
	}
	if f.CompareTarget != "" {
		model := f.ModelName
		if model == "" {
			model = m.entry.Manifest.ModelName
		}
		if err := compareServed(ctx, f, compareCreds, model, eb, scores, stdout); err != nil {
			return err
		}
		log.Info("compared", "examples", len(scores), "target", f.CompareTarget, "model", model+":entry", "seconds", time.Since(start).Seconds())
		return nil
	}
	// The scores go out in one write once they are all formatted: a stop before leaves stdout
	// empty, not cut.
	var out []byte
	for i, s := range scores {
		if i%4096 == 0 && ctx.Err() != nil {
			return stopped(ctx)
		}
		out = strconv.AppendFloat(out, s, 'g', 9, 64)
		out = append(out, '\n')
	}
	if _, err := stdout.Write(out); err != nil {
		return err
	}
	log.Info("scored", "examples", len(scores), "seconds", time.Since(start).Seconds())
	return nil
}

// interruptible runs fn, one call of a library that does not look at a context (generating,
// parsing or printing a batch), and returns its error, or stopped(ctx) as soon as ctx ends first:
// the command then exits without waiting for fn.
func interruptible(ctx context.Context, fn func() error) error {
	if ctx.Err() != nil {
		return stopped(ctx)
	}
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return stopped(ctx)
	}
}

// stopped is the error of a run that ctx (a signal) ended before the scores were out.
func stopped(ctx context.Context) error {
	return fmt.Errorf("stopped before scoring: %v", context.Cause(ctx))
}

// usageUnlessStopped is err as a usage error (bad input), or stopped(ctx) once ctx ended.
func usageUnlessStopped(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return stopped(ctx)
	}
	return cli.Usage(err)
}

// classify makes a missing or bad export a usage error (exit 2).
func classify(err error) error {
	switch errkind.Of(err) {
	case errkind.NotFound, errkind.Value:
		return cli.Usage(err)
	}
	return err
}

// model is an export loaded in this process.
type model struct {
	entry  *export.Entry
	shards []*export.PSShard
}

// parseAddrs reads --training_ps, a comma list of host:port (none when empty).
func parseAddrs(list string) ([]string, error) {
	var out []string
	for _, a := range strings.Split(list, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if host, port, err := net.SplitHostPort(a); err != nil || host == "" || port == "" {
			return nil, fmt.Errorf("--training_ps: %q is not host:port", a)
		}
		out = append(out, a)
	}
	return out, nil
}

// load reads the entry of version (0: the newest) under base and, with shards, its PS shards of
// the same version.
func load(ctx context.Context, base string, version int64, shards bool) (*model, error) {
	entryBase := filepath.Join(base, export.EntrySubGraph)
	if version == 0 {
		v, err := newestVersion(entryBase)
		if err != nil {
			return nil, err
		}
		version = v
	}
	v := strconv.FormatInt(version, 10)
	e, err := export.LoadEntry(filepath.Join(entryBase, v))
	if err != nil {
		return nil, err
	}
	m := &model{entry: e}
	if !shards {
		return m, nil
	}
	for i := range e.Manifest.NumPS {
		s, err := export.LoadPSShard(ctx, filepath.Join(base, export.PSSubGraph(i), v))
		if err != nil {
			return nil, err
		}
		m.shards = append(m.shards, s)
	}
	return m, nil
}

// newestVersion is the greatest version directory under dir, as TF Serving reads them
// (modelconfig.VersionDirs).
func newestVersion(dir string) (int64, error) {
	vs, err := modelconfig.VersionDirs(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, errkind.New(errkind.NotFound, "%s does not exist: no export there", dir)
	}
	if err != nil {
		return 0, fmt.Errorf("versions of %s: %w", dir, err)
	}
	if len(vs) == 0 {
		return 0, errkind.New(errkind.NotFound, "%s has no version", dir)
	}
	return vs[len(vs)-1].Number, nil
}

// predict scores b with the entry's dense part over store's embeddings.
func (m *model) predict(ctx context.Context, store dnn.EmbeddingStore, b *batch.Batch) ([]float64, error) {
	dm, err := m.entry.NewModel(store)
	if err != nil {
		return nil, err
	}
	return dm.Predict(ctx, b)
}

// shardStore is a dnn.EmbeddingStore over the PS shards in this process: an id is looked up in
// shard floormod(id, num_ps), as the entry routes it to the PS sub-graphs.
type shardStore struct{ shards []*export.PSShard }

func (s shardStore) Lookup(ctx context.Context, table string, ids []int64, out []float32) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	dim := len(out) / max(len(ids), 1)
	for i, id := range ids {
		shard := s.shards[embedding.Shard(id, len(s.shards))]
		if _, err := shard.Lookup(table, ids[i:i+1], out[i*dim:(i+1)*dim]); err != nil {
			return err
		}
	}
	return nil
}

func (shardStore) Apply(context.Context, string, []int64, []float32, int64, []float32) error {
	return errkind.New(errkind.Precondition, "predict: an export is not trained")
}

// toBatch reads eb's examples as the trainer reads Examples: example i has feature i of each
// INDIVIDUAL list and feature 0 of each SHARED one, its label from __LABEL__ (0 without one).
// It stops when ctx ends.
func toBatch(ctx context.Context, schema batch.Schema, eb *examplepb.ExampleBatch) (*batch.Batch, error) {
	n := int(eb.GetBatchSize())
	if n <= 0 {
		return nil, errkind.New(errkind.Value, "the ExampleBatch has batch_size %d: no example to score", n)
	}
	b := &batch.Batch{}
	for i := range n {
		if i%1024 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		ex := &examplepb.Example{}
		for _, l := range eb.GetNamedFeatureList() {
			k := i
			if l.GetType() == examplepb.FeatureListType_SHARED {
				k = 0
			}
			if k >= len(l.GetFeature()) {
				return nil, errkind.New(errkind.Value, "ExampleBatch feature list %q has %d features, batch_size is %d", l.GetName(), len(l.GetFeature()), n)
			}
			feat := l.GetFeature()[k]
			switch l.GetName() {
			case instance.LabelFeature:
				ex.Label = slices.Clone(feat.GetFloatList().GetValue())
			case instance.LineIDFeature:
			default:
				ex.NamedFeature = append(ex.NamedFeature, &examplepb.NamedFeature{Name: l.GetName(), Feature: feat})
			}
		}
		if len(ex.Label) == 0 {
			ex.Label = []float32{0} // not needed to score, but the trainer's reader wants one
		}
		if err := schema.Append(b, ex); err != nil {
			return nil, fmt.Errorf("example %d: %w", i, err)
		}
	}
	return b, nil
}
