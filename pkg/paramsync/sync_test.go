package paramsync

import (
	"context"
	"math"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	examplepb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/example"
	tfframework "github.com/monolith-go/monolith/gen/pb/tensorflow/core/framework"
	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/embedding"
	"github.com/monolith-go/monolith/pkg/export"
	"github.com/monolith-go/monolith/pkg/modelserver"
	"github.com/monolith-go/monolith/pkg/modelserver/entry"
	"github.com/monolith-go/monolith/pkg/modelserver/exporttest"
	"github.com/monolith-go/monolith/pkg/modelserver/psshard"
	"github.com/monolith-go/monolith/pkg/modelserver/tensors"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
	"github.com/monolith-go/monolith/pkg/trainer/synth"
)

// countingSource counts the pushes that started (each lists the tables first).
type countingSource struct {
	Source
	mu     sync.Mutex
	starts int
}

func (c *countingSource) SyncTables() map[string]int {
	c.mu.Lock()
	c.starts++
	c.mu.Unlock()
	return c.Source.SyncTables()
}

func (c *countingSource) started() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.starts
}

// servedScores is the served entry's predictions of examples.
func servedScores(ctx context.Context, client servingapis.PredictionServiceClient, examples []*examplepb.Example) ([]float32, error) {
	raw := make([][]byte, len(examples))
	for i, ex := range examples {
		b, err := proto.Marshal(ex)
		if err != nil {
			return nil, err
		}
		raw[i] = b
	}
	resp, err := client.Predict(ctx, &servingapis.PredictRequest{
		ModelSpec: &servingapis.ModelSpec{Name: "demo:entry"},
		Inputs:    map[string]*tfframework.TensorProto{entry.InputExamples: tensors.FromStrings(raw, int64(len(raw)))},
	})
	if err != nil {
		return nil, err
	}
	return tensors.Float32s(resp.GetOutputs()[entry.OutputScores])
}

// servedEmbeddings is what the serving PS sub-graphs hold for ids of table (all shards).
func servedEmbeddings(ctx context.Context, client servingapis.PredictionServiceClient, table string, ids []int64, numPS int) ([]float32, error) {
	out := make([]float32, len(ids)*exporttest.Dim)
	for k, id := range ids {
		resp, err := client.Predict(ctx, &servingapis.PredictRequest{
			ModelSpec: &servingapis.ModelSpec{Name: "demo:" + export.PSSubGraph(embedding.Shard(id, numPS)), SignatureName: psshard.Signature},
			Inputs:    psshard.Request(table, []int64{id})})
		if err != nil {
			return nil, err
		}
		if err := psshard.LookupResult(resp.GetOutputs(), 1, out[k*exporttest.Dim:(k+1)*exporttest.Dim]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// meanAbs is the mean absolute difference of a and b.
func meanAbs[A, B float32 | float64](a []A, b []B) float64 {
	s := 0.0
	for i := range a {
		s += math.Abs(float64(a[i]) - float64(b[i]))
	}
	return s / float64(len(a))
}

func maxAbs[A, B float32 | float64](a []A, b []B) float64 {
	m := 0.0
	for i := range a {
		m = max(m, math.Abs(float64(a[i])-float64(b[i])))
	}
	return m
}

// TestTrainServeSync is the loop of real-time training: a model trained on parameter servers is
// exported and served (entry + PS sub-graphs over gRPC), then keeps training on a shifted data
// distribution with parameter sync on. While it trains the served predictions follow the
// trainer's; once it pauses and a push has completed they equal them. "The trainer's" predictions
// are those of the exported dense part over the trainer's current embeddings: sync moves the
// embeddings, the dense part changes with the next export (as in Monolith, whose dense parameters
// are synced less often than the sparse ones).
func TestTrainServeSync(t *testing.T) {
	leakcheck.Check(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const interval = 2 * time.Second
	j := exporttest.NewJob(t, 2, []int{8})
	for _, s := range j.PS {
		s.SetTrackTouched(true)
	}
	j.Train(ctx, 20)
	base := filepath.Join(t.TempDir(), "demo")
	res := j.Export(ctx, base, 2)

	psServer := exporttest.StartModelServer(t, modelserver.Loaders{modelserver.KindPS: psshard.Load},
		exporttest.ModelConfig(t, "demo:ps_0", filepath.Join(base, "ps_0")), exporttest.ModelConfig(t, "demo:ps_1", filepath.Join(base, "ps_1")))
	loader := entry.NewLoader(entry.Config{Replicas: entry.StaticReplicas{"demo:ps_0": {psServer.Addr()}, "demo:ps_1": {psServer.Addr()}}})
	t.Cleanup(loader.Close)
	entryServer := exporttest.StartModelServer(t, modelserver.Loaders{modelserver.KindPS: psshard.Load, modelserver.KindEntry: loader.Load},
		exporttest.ModelConfig(t, "demo:entry", filepath.Join(base, export.EntrySubGraph)))
	entryClient, psClient := exporttest.PredictionClient(t, entryServer.Addr()), exporttest.PredictionClient(t, psServer.Addr())

	exported, err := export.LoadEntry(res.Dirs[export.EntrySubGraph])
	if err != nil {
		t.Fatal(err)
	}
	ref, err := exported.NewModel(j.Store())
	if err != nil {
		t.Fatal(err)
	}
	shiftedCfg := exporttest.ClickLog
	shiftedCfg.Seed, shiftedCfg.Bias = 99, 0.5
	shifted, err := synth.New(shiftedCfg)
	if err != nil {
		t.Fatal(err)
	}
	eval := append(j.Examples(5, 32), examplesOf(shifted.Stream(5), 32)...)
	trainerScores := func() []float64 {
		t.Helper()
		p, err := ref.Predict(ctx, j.Batch(eval))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	served := func() []float32 {
		t.Helper()
		s, err := servedScores(ctx, entryClient, eval)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	atExport := served()
	if d := maxAbs(atExport, trainerScores()); d > 1e-6 {
		t.Fatalf("at the export the served predictions differ from the trainer's by %g", d)
	}

	// Parameter sync, one pusher per training PS.
	var pushers sync.WaitGroup
	pushCtx, stopPushing := context.WithCancel(ctx)
	defer func() {
		stopPushing()
		pushers.Wait()
	}()
	sources := make([]*countingSource, len(j.PS))
	for i, s := range j.PS {
		sources[i] = &countingSource{Source: s}
		p := newPusher(t, Config{Source: sources[i], Targets: StaticTargets{psServer.Addr()}, Model: "demo", Shard: i, Interval: interval})
		pushers.Add(1)
		go func() {
			defer pushers.Done()
			p.Run(pushCtx)
		}()
	}

	// Training goes on, on the shifted data.
	trainCtx, pause := context.WithCancel(ctx)
	defer pause()
	trained := make(chan error, 1)
	var steps int
	go func() {
		stream := shifted.Stream(1)
		for trainCtx.Err() == nil {
			b := &batch.Batch{}
			for _, ex := range examplesOf(stream, 64) {
				if err := j.Gen.Schema().Append(b, ex); err != nil {
					trained <- err
					return
				}
			}
			if _, err := j.Model.Step(ctx, b); err != nil {
				trained <- err
				return
			}
			steps++
		}
		trained <- nil
	}()
	// While it trains: after a few intervals, the served predictions are much nearer the
	// trainer's than the exported ones are (they lag by about a push, the export by all the
	// training since).
	// At 2 intervals (a push has run on updates of the shifted training) the served predictions
	// are nearer the trainer's than the export's; from 3 on, they lag by an interval or so while the
	// export lags by 3 or more: less than half as far.
	for k := 1; k <= 4; k++ {
		time.Sleep(interval)
		s := served()
		now := trainerScores()
		gapServed, gapExported := meanAbs(s, now), meanAbs(atExport, now)
		t.Logf("training, %v: served predictions %.5f from the trainer's, the export's %.5f", time.Duration(k)*interval, gapServed, gapExported)
		bound := gapExported
		if k >= 3 {
			bound /= 2
		}
		if k >= 2 && !(gapExported > 1e-3 && gapServed < bound) {
			t.Errorf("training, %v: the served predictions are %.5f from the trainer's, the exported %.5f: not following", time.Duration(k)*interval, gapServed, gapExported)
		}
	}

	// Training pauses: once a push that started after the pause has completed, the served
	// predictions and embeddings are the trainer's (the delay is logged: at most an interval to
	// the next push plus the push; BenchmarkSyncDelay measures it).
	pause()
	if err := <-trained; err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	want := trainerScores()
	started := make([]int, len(sources))
	for i, s := range sources {
		started[i] = s.started()
	}
	var equalAfter time.Duration
	for {
		if d := maxAbs(served(), want); d <= 1e-6 && equalAfter == 0 {
			equalAfter = time.Since(paused)
		}
		done := equalAfter > 0
		for i, s := range sources {
			done = done && s.started() >= started[i]+2 // the push started after the pause has ended
		}
		if done {
			break
		}
		if time.Since(paused) > 2*interval+time.Minute {
			t.Fatalf("no push completed or the served predictions are not the trainer's %v after the pause", time.Since(paused))
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("%d steps on the shifted data; the served predictions equal the trainer's %v after the pause", steps, equalAfter)
	if d := maxAbs(served(), want); d > 1e-6 {
		t.Errorf("after a whole push the served predictions differ from the trainer's by %g", d)
	}
	for slot := 1; slot <= exporttest.ClickLog.NumSlots; slot++ {
		table := synth.SlotFeature(slot)
		var ids []int64
		for id := uint64(1); id <= uint64(exporttest.ClickLog.Vocab); id++ {
			ids = append(ids, int64(synth.FID(slot, id)))
		}
		got, err := servedEmbeddings(ctx, psClient, table, ids, 2)
		if err != nil {
			t.Fatal(err)
		}
		trainer := j.Lookup(ctx, table, ids)
		for k := range got {
			if math.Float32bits(got[k]) != math.Float32bits(trainer[k]) {
				t.Fatalf("%s: id %d value %d: served %v, trainer %v", table, ids[k/exporttest.Dim], k%exporttest.Dim, got[k], trainer[k])
			}
		}
	}
	if d := meanAbs(atExport, want); d < 1e-3 {
		t.Errorf("the shifted training moved the predictions by %g only: the test shows nothing", d)
	}
}

func examplesOf(s *synth.Stream, n int) []*examplepb.Example {
	out := make([]*examplepb.Example, n)
	for i := range out {
		out[i], _ = s.Next()
	}
	return out
}
