// Package exporttest makes exports for the tests of the model server (pkg/modelserver and
// cmd/model_server) the way a user makes them: a dnn model trained on parameter servers of this
// process (pkg/trainer/inprocess), checkpointed as cmd/train's chief checkpoints it, and exported
// with pkg/export. The trained model stays, so a test can compare the served predictions with the
// trainer's. It also serves them: model servers of this process on loopback, and their clients.
package exporttest

import (
	"context"
	"log/slog"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	examplepb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/example"
	"github.com/monolith-go/monolith/pkg/estimator/ckptdir"
	"github.com/monolith-go/monolith/pkg/export"
	"github.com/monolith-go/monolith/pkg/ps"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
	"github.com/monolith-go/monolith/pkg/trainer/dnn"
	"github.com/monolith-go/monolith/pkg/trainer/inprocess"
	"github.com/monolith-go/monolith/pkg/trainer/synth"
)

var quiet = slog.New(slog.DiscardHandler)

// ClickLog is the generator of the tests' data: 3 slots of latent-factor ids and 4 dense values.
var ClickLog = synth.Config{Seed: 7, NumDense: 4, NumSlots: 3, Vocab: 60, LatentDim: 2}

// Dim is the embedding dimension of every table.
const Dim = 4

// Job is a dnn model training on parameter servers of this process.
type Job struct {
	t     testing.TB
	Gen   *synth.Generator
	Spec  export.ModelSpec
	Model *dnn.Model
	// PS are the parameter servers, by index (parameter sync's sources).
	PS       []*ps.Server
	router   *ps.Router
	modelDir string
	cp       *ckptdir.Checkpointer
	input    *synth.Stream
}

// NewJob starts numPS parameter servers and a model with hidden layers over them; everything
// stops when the test ends.
func NewJob(t testing.TB, numPS int, hidden []int) *Job {
	t.Helper()
	modelDir := t.TempDir() // removed after the servers stop (cleanups run last first)
	// The tables' update times tick one second per update.
	ij, err := inprocess.Start(inprocess.Config{Data: ClickLog, Dim: Dim, NumPS: numPS, Hidden: hidden,
		Now: inprocess.TickingClock(time.Unix(1700000000, 0)), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ij.Close)
	j := &Job{t: t, Gen: ij.Gen, Model: ij.Model, router: ij.Router, modelDir: modelDir, input: ij.Gen.Stream(1)}
	for _, r := range ij.Servers {
		j.PS = append(j.PS, r.Server)
	}
	j.Spec = export.SpecFromDNN(j.Model.Config(), j.Gen.Schema())
	if j.cp, err = ckptdir.Open(ckptdir.Options{Dir: j.modelDir, MaxToKeep: 100, Log: quiet}); err != nil {
		t.Fatal(err)
	}
	return j
}

// Examples draws n examples of stream s (stream 1 is the training stream's: use another).
func (j *Job) Examples(s uint64, n int) []*examplepb.Example {
	st := j.Gen.Stream(s)
	out := make([]*examplepb.Example, n)
	for i := range out {
		out[i], _ = st.Next()
	}
	return out
}

// Batch is the examples as the trainer reads them.
func (j *Job) Batch(examples []*examplepb.Example) *batch.Batch {
	j.t.Helper()
	b := &batch.Batch{}
	for _, ex := range examples {
		if err := j.Gen.Schema().Append(b, ex); err != nil {
			j.t.Fatal(err)
		}
	}
	return b
}

// Train takes steps training steps of batch 64 on the training stream.
func (j *Job) Train(ctx context.Context, steps int) {
	j.t.Helper()
	for range steps {
		if _, err := j.Model.Step(ctx, j.Batch(j.nextExamples(64))); err != nil {
			j.t.Fatal(err)
		}
	}
}

func (j *Job) nextExamples(n int) []*examplepb.Example {
	out := make([]*examplepb.Example, n)
	for i := range out {
		out[i], _ = j.input.Next()
	}
	return out
}

// Export checkpoints the model's step as cmd/train's chief does (the parameter servers dump the
// tables, then the dense checkpoint is saved) and exports it into base (model name: base's name)
// with numPS PS sub-graphs (0: the trainer's).
func (j *Job) Export(ctx context.Context, base string, numPS int) *export.Result {
	j.t.Helper()
	step := j.Model.GlobalStep()
	prefix := filepath.Join(j.modelDir, "model.ckpt-"+strconv.FormatInt(step, 10))
	if _, err := j.router.Save(ctx, prefix+export.EmbeddingsSuffix); err != nil {
		j.t.Fatal(err)
	}
	if _, err := j.cp.Save(ctx, step, j.Model.Tensors()); err != nil {
		j.t.Fatal(err)
	}
	res, err := export.Export(ctx, export.Options{ModelDir: j.modelDir, ExportBase: base, Spec: j.Spec, NumPS: numPS, Keep: 0, Log: quiet})
	if err != nil {
		j.t.Fatal(err)
	}
	return res
}

// Predict is the trainer's prediction of examples.
func (j *Job) Predict(ctx context.Context, examples []*examplepb.Example) []float64 {
	j.t.Helper()
	p, err := j.Model.Predict(ctx, j.Batch(examples))
	if err != nil {
		j.t.Fatal(err)
	}
	return p
}

// Store is the trainer's embeddings as a model's embedding store (a model of the exported dense
// part over them predicts what a served model whose PS sub-graphs are in sync with the trainer
// predicts).
func (j *Job) Store() dnn.EmbeddingStore { return ps.RouterStore{Router: j.router} }

// Lookup is the trainer's embeddings of ids in table (zeros for ids without an entry).
func (j *Job) Lookup(ctx context.Context, table string, ids []int64) []float32 {
	j.t.Helper()
	out := make([]float32, len(ids)*Dim)
	if err := (ps.RouterStore{Router: j.router}).Lookup(ctx, table, ids, out); err != nil {
		j.t.Fatal(err)
	}
	return out
}
