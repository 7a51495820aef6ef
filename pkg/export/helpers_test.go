package export

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	hashtablepb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table"
	"github.com/monolith-go/monolith/pkg/embedding"
	"github.com/monolith-go/monolith/pkg/estimator"
	"github.com/monolith-go/monolith/pkg/estimator/ckptdir"
	"github.com/monolith-go/monolith/pkg/fileops"
	"github.com/monolith-go/monolith/pkg/ps"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
	"github.com/monolith-go/monolith/pkg/trainer/dnn"
	"github.com/monolith-go/monolith/pkg/trainer/inprocess"
	"github.com/monolith-go/monolith/pkg/trainer/synth"
)

var quiet = slog.New(slog.DiscardHandler)

func tctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// clickLog is the generator of the tests' data: 3 slots of latent-factor ids and 4 dense values.
var clickLog = synth.Config{Seed: 7, NumDense: 4, NumSlots: 3, Vocab: 60, LatentDim: 2}

// job is a dnn model training on parameter servers of this process over loopback gRPC, as
// cmd/train's demo runs it, with its checkpoints saved as cmd/train's chief saves them.
type job struct {
	t        testing.TB
	gen      *synth.Generator
	spec     ModelSpec
	model    *dnn.Model
	router   *ps.Router
	modelDir string
	cp       *ckptdir.Checkpointer
	input    *synth.Stream
}

// newJob starts numPS parameter servers and a model of hidden layers over them; everything stops
// when the test ends.
func newJob(t testing.TB, numPS int, hidden []int) *job {
	t.Helper()
	modelDir := t.TempDir() // removed after the servers stop (cleanups run last first)
	ij, err := inprocess.Start(inprocess.Config{Data: clickLog, Dim: 4, NumPS: numPS, Hidden: hidden,
		Now: inprocess.TickingClock(time.Unix(1700000000, 0)), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ij.Close)
	j := &job{t: t, gen: ij.Gen, model: ij.Model, router: ij.Router, modelDir: modelDir, input: ij.Gen.Stream(1)}
	j.spec = SpecFromDNN(j.model.Config(), j.gen.Schema())
	if j.cp, err = ckptdir.Open(ckptdir.Options{Dir: j.modelDir, MaxToKeep: 100, Log: quiet}); err != nil {
		t.Fatal(err)
	}
	return j
}

// batches draws count batches of size examples from stream n.
func (j *job) batches(n uint64, count, size int) []*batch.Batch {
	s := j.gen.Stream(n)
	return drawBatches(j.t, j.gen.Schema(), s, count, size)
}

func drawBatches(t testing.TB, schema batch.Schema, s *synth.Stream, count, size int) []*batch.Batch {
	t.Helper()
	var out []*batch.Batch
	for range count {
		b := &batch.Batch{}
		for range size {
			ex, _ := s.Next()
			if err := schema.Append(b, ex); err != nil {
				t.Fatal(err)
			}
		}
		out = append(out, b)
	}
	return out
}

// train takes steps training steps on the job's training stream.
func (j *job) train(ctx context.Context, steps int) {
	j.t.Helper()
	for _, b := range drawBatches(j.t, j.gen.Schema(), j.input, steps, 64) {
		if _, err := j.model.Step(ctx, b); err != nil {
			j.t.Fatal(err)
		}
	}
}

// save writes the checkpoint of the model's step as cmd/train's chief does: the parameter
// servers dump the tables into <prefix>.embeddings, then the dense checkpoint is saved.
func (j *job) save(ctx context.Context) string {
	j.t.Helper()
	step := j.model.GlobalStep()
	prefix := filepath.Join(j.modelDir, "model.ckpt-"+strconv.FormatInt(step, 10))
	if _, err := j.router.Save(ctx, prefix+EmbeddingsSuffix); err != nil {
		j.t.Fatal(err)
	}
	path, err := j.cp.Save(ctx, step, j.model.Tensors())
	if err != nil || path != prefix {
		j.t.Fatalf("save: %s, %v; want %s", path, err, prefix)
	}
	return prefix
}

// dumpEntries reads every entry of table in the checkpoint's dump, by id.
func dumpEntries(t testing.TB, prefix, table string) map[int64]*hashtablepb.EntryDump {
	t.Helper()
	out := map[int64]*hashtablepb.EntryDump{}
	files, err := filepath.Glob(filepath.Join(prefix+EmbeddingsSuffix, table, "ps_*_of_*-*-of-*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("dump of %s: %v %v", table, files, err)
	}
	for _, file := range files {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		ds, err := fileops.ReadEntryDumps(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			out[d.GetId()] = d
		}
	}
	return out
}

// shardStore is the embedding store of loaded PS shards, routed as the export says.
type shardStore struct{ shards []*PSShard }

func (s shardStore) Lookup(_ context.Context, table string, ids []int64, out []float32) error {
	dim := len(out) / max(len(ids), 1)
	for i, id := range ids {
		if _, err := s.shards[embedding.Shard(id, len(s.shards))].Lookup(table, []int64{id}, out[i*dim:(i+1)*dim]); err != nil {
			return err
		}
	}
	return nil
}

func (shardStore) Apply(context.Context, string, []int64, []float32, int64, []float32) error {
	return io.ErrUnexpectedEOF
}

var _ dnn.EmbeddingStore = shardStore{}

// sliceInput is an estimator input over batches.
type sliceInput struct{ bs []*batch.Batch }

func (s *sliceInput) Next(context.Context) (*batch.Batch, error) {
	if len(s.bs) == 0 {
		return nil, io.EOF
	}
	b := s.bs[0]
	s.bs = s.bs[1:]
	return b, nil
}

func (s *sliceInput) Close() error { return nil }

// tablesCheckpointer is cmd/train's chief checkpointer: the tables' dump, then the dense
// checkpoint.
type tablesCheckpointer struct {
	*ckptdir.Checkpointer
	router *ps.Router
}

func (c tablesCheckpointer) Save(ctx context.Context, step int64, tensors []estimator.Tensor) (string, error) {
	prefix := filepath.Join(c.Dir(), "model.ckpt-"+strconv.FormatInt(step, 10))
	if _, err := c.router.Save(ctx, prefix+EmbeddingsSuffix); err != nil {
		return "", err
	}
	return c.Checkpointer.Save(ctx, step, tensors)
}
