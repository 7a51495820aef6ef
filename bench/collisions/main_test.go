package main

import (
	"bytes"
	"context"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/pkg/trainer/batch"
	"github.com/monolith-go/monolith/pkg/trainer/dnn"
	"github.com/monolith-go/monolith/pkg/trainer/hashbucket"
	"github.com/monolith-go/monolith/pkg/trainer/synth"
)

// smallRun is a run small enough for a test: a few thousand distinct ids, one epoch, two seeds.
var smallRun = []string{"--examples=20000", "--eval_examples=5000", "--epochs=1", "--seeds=2", "--users=5000", "--items=1000"}

// tableRows are the rows of the results table in out, by config, each its fields by column name.
func tableRows(t *testing.T, out string) []map[string]string {
	t.Helper()
	lines := strings.Split(out, "\n")
	at := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "config ") })
	if at < 0 {
		t.Fatalf("no table header in\n%s", out)
	}
	if got := strings.Fields(lines[at]); !slices.Equal(got, tableHeader) {
		t.Fatalf("header %q, want %q", got, tableHeader)
	}
	var rows []map[string]string
	for _, l := range lines[at+1:] {
		if strings.TrimSpace(l) == "" {
			break
		}
		fields := strings.Fields(l)
		if len(fields) != len(tableHeader) {
			t.Fatalf("row %q has %d fields, want %d", l, len(fields), len(tableHeader))
		}
		row := map[string]string{}
		for i, h := range tableHeader {
			row[h] = fields[i]
		}
		rows = append(rows, row)
	}
	return rows
}

func number(t *testing.T, row map[string]string, col string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(row[col], 64)
	if err != nil {
		t.Fatalf("config %s, column %s: %v", row["config"], col, err)
	}
	return v
}

// A small run prints a row per configuration and epoch; the collisionless one has no buckets and
// no collisions, the hashed ones collide at close to their targets; the
// seeds differ; each epoch's progress goes to stderr.
func TestSmallRun(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), smallRun, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
	out := stdout.String()
	t.Log(out)
	for _, want := range []string{"best eval AUC (true probabilities): 0.", "20000 train + 5000 eval examples", "wall time"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	rows := tableRows(t, out)
	if len(rows) != len(setups) {
		t.Fatalf("%d rows, want %d (a configuration per row, one epoch)", len(rows), len(setups))
	}
	for i, s := range setups {
		row := rows[i]
		if row["config"] != s.name || row["epoch"] != "1" {
			t.Errorf("row %d is config %s epoch %s, want %s epoch 1", i, row["config"], row["epoch"], s.name)
		}
		for _, c := range []struct {
			col, buckets string
			target       float64
		}{{"user_collide_%", "user_buckets", s.userRate}, {"item_collide_%", "item_buckets", s.itemRate}} {
			got, n := number(t, row, c.col)/100, number(t, row, c.buckets)
			switch {
			case c.target == 0 && (got != 0 || n != 0):
				t.Errorf("%s: %s %v with %v buckets, want no buckets and no collisions", s.name, c.col, got, n)
			case c.target > 0 && (math.Abs(got-c.target) > 0.005 || n < 1):
				t.Errorf("%s: %s %v with %v buckets, want within half a point of the target %v", s.name, c.col, got, n, c.target)
			}
		}
		auc := number(t, row, "auc_mean")
		if !(auc > 0.5 && auc < 1) || !(number(t, row, "auc_std") > 0) {
			t.Errorf("%s: AUC %v, deviation %v over 2 seeds; want an AUC above chance and different seeds", s.name, auc, row["auc_std"])
		}
		if s.userRate == 0 && (number(t, row, "d_auc_mean") != 0 || number(t, row, "d_auc_std") != 0) {
			t.Errorf("collisionless: AUC difference to itself %s ± %s, want 0", row["d_auc_mean"], row["d_auc_std"])
		}
	}
	for _, want := range []string{"run=1/6", "run=6/6", "epoch=1/1", "examples_per_s="} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("progress on stderr lacks %q:\n%s", want, stderr.String())
		}
	}
}

func TestBadCommandLines(t *testing.T) {
	for _, args := range [][]string{
		{"--epochs=0"},
		{"--seeds=0"},
		{"--examples=-1"},
		{"--dim=0"},
		{"--zipf_s=1"},
		{"--users=1"},
		{"--learning_rate=0"},
		{"--embedding_learning_rate=0"},
		{"--embedding_learning_rate=1e-50"},
		{"--embedding_learning_rate=1e40"},
		{"--data_seed=-1"},
		{"--no_such_flag"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, &stdout, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2; stderr: %s", args, code, stderr.String())
		}
	}
}

// The click log is a function of its seed, keeps each slot's ids in its vocabulary and in its
// slot, and its labels follow its probabilities.
func TestClickLog(t *testing.T) {
	cfg := logConfig{Seed: 5, Users: 300, Items: 20, ZipfS: 1.1, LatentDim: 3, IDStd: 0.5, LatentStd: 0.7, Bias: -1}
	g, err := newClickLog(cfg)
	if err != nil {
		t.Fatal(err)
	}
	exs := g.draw(20000, 1)
	if again := g.draw(20000, 1); !slices.Equal(exs, again) {
		t.Error("two draws of one stream differ")
	}
	if other := g.draw(20000, 2); slices.Equal(exs, other) {
		t.Error("two streams gave the same examples")
	}
	var clicks, probs float64
	for _, ex := range exs {
		u, i := ex.user&(1<<48-1), ex.item&(1<<48-1)
		if synth.SlotOf(ex.user) != userSlot || synth.SlotOf(ex.item) != itemSlot || u < 1 || u > 300 || i < 1 || i > 20 {
			t.Fatalf("example %+v: user %d (slot %d), item %d (slot %d) outside their vocabularies", ex, u, synth.SlotOf(ex.user), i, synth.SlotOf(ex.item))
		}
		clicks += float64(ex.label)
		probs += ex.prob
	}
	if mean, want := clicks/20000, probs/20000; math.Abs(mean-want) > 0.02 {
		t.Errorf("click rate %v, want the mean probability %v", mean, want)
	}
	users, items := distinctIDs(exs)
	if len(items) != 20 || len(users) < 100 || len(users) > 300 {
		t.Errorf("%d distinct users (of 300), %d items (of 20); want all items and most users", len(users), len(items))
	}
}

// The batcher passes the examples' fids through as drawn; the model's features carry the setup's
// bucket counts (0: collisionless).
func TestBatcher(t *testing.T) {
	exs := []example{
		{user: synth.FID(userSlot, 7), item: synth.FID(itemSlot, 9), label: 1},
		{user: synth.FID(userSlot, 123456), item: synth.FID(itemSlot, 3)},
	}
	b := (&batcher{}).build(exs)
	if !slices.Equal(b.Labels, []float32{1, 0}) || len(b.Fids) != 2 {
		t.Fatalf("labels %v, %d fid lists; want [1 0], 2", b.Labels, len(b.Fids))
	}
	for i, ex := range exs {
		if want := []uint64{ex.user, ex.item}; !slices.Equal(b.Fids[i], want) {
			t.Errorf("example %d fids %#x, want %#x", i, b.Fids[i], want)
		}
	}
	for _, tc := range []struct {
		name         string
		users, items uint64
	}{{"collisionless", 0, 0}, {"users hashed", 10, 0}, {"both hashed", 10, 1}} {
		tb := &tables{userBuckets: tc.users, itemBuckets: tc.items}
		feats := modelFeatures(8, tb.buckets())
		if len(feats) != 2 || feats[0].Slot != userSlot || feats[1].Slot != itemSlot {
			t.Fatalf("%s: features %+v, want user and item", tc.name, feats)
		}
		if feats[0].Buckets != tc.users || feats[1].Buckets != tc.items || feats[0].Dim != 8 || feats[1].Dim != 8 {
			t.Errorf("%s: features %+v, want buckets %d and %d, dim 8", tc.name, feats, tc.users, tc.items)
		}
	}
	if n, rate, err := bucketsFor([]uint64{1, 2, 3}, 0); n != 0 || rate != 0 || err != nil {
		t.Errorf("bucketsFor(rate 0) = %d, %v, %v; want 0 buckets, no collisions", n, rate, err)
	}
}

// A model whose features hash their ids (dnn.Feature.Buckets) trains and predicts exactly as a
// collisionless one fed the fids that hashbucket.Bucketer.Apply maps them to: the bench measures
// the mapping the model applies in training and serving, and its figures are those of
// hashing the fids before the model.
func TestModelBucketsAreBucketer(t *testing.T) {
	ctx := context.Background()
	f := benchFlags{Dim: 4, BatchSize: 64, LearningRate: 0.01, EmbeddingLR: 0.3}
	g, err := newClickLog(logConfig{Seed: 3, Users: 500, Items: 50, ZipfS: 1.1, LatentDim: 2, IDStd: 0.5, LatentStd: 0.7, Bias: -1})
	if err != nil {
		t.Fatal(err)
	}
	exs := g.draw(1024, 1)
	buckets := map[int]uint64{userSlot: 37, itemSlot: 5}
	bk, err := hashbucket.New(buckets)
	if err != nil {
		t.Fatal(err)
	}
	newModel := func(buckets map[int]uint64) *dnn.Model {
		store, err := newStore(f, 1)
		if err != nil {
			t.Fatal(err)
		}
		m, err := dnn.New(dnn.Config{Features: modelFeatures(f.Dim, buckets), LearningRate: f.LearningRate,
			EmbeddingLearningRates: []float32{float32(f.EmbeddingLR)}, Seed: 1}, store)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	// inModel hashes in the model, before is fed fids hashed before the model, raw is collisionless.
	inModel, before, raw := newModel(buckets), newModel(nil), newModel(nil)
	var bt batcher
	hashed := func(exs []example) *batch.Batch {
		b := bt.build(exs)
		bk.Apply(bt.fids[:2*len(exs)])
		return b
	}
	eval := g.draw(512, 2)
	var preds [3][]float64
	for i, m := range []struct {
		model *dnn.Model
		build func([]example) *batch.Batch
	}{{inModel, bt.build}, {before, hashed}, {raw, bt.build}} {
		for lo := 0; lo < len(exs); lo += f.BatchSize {
			if _, err := m.model.Step(ctx, m.build(exs[lo:lo+f.BatchSize])); err != nil {
				t.Fatal(err)
			}
		}
		p, err := m.model.Predict(ctx, m.build(eval))
		if err != nil {
			t.Fatal(err)
		}
		preds[i] = slices.Clone(p)
	}
	if !slices.Equal(preds[0], preds[1]) {
		t.Errorf("predictions of ids hashed in the model %v... and before it %v... differ", preds[0][:4], preds[1][:4])
	}
	if slices.Equal(preds[0], preds[2]) {
		t.Error("the hashed model predicts as the collisionless one: its buckets changed nothing")
	}
}

func TestMeanStd(t *testing.T) {
	for _, tc := range []struct {
		xs        []float64
		mean, std float64
	}{
		{[]float64{0.7}, 0.7, 0},
		{[]float64{1, 3}, 2, math.Sqrt2},
		{[]float64{2, 4, 4, 4, 5, 5, 7, 9}, 5, math.Sqrt(32.0 / 7)},
	} {
		if m, s := meanStd(tc.xs); math.Abs(m-tc.mean) > 1e-12 || math.Abs(s-tc.std) > 1e-12 {
			t.Errorf("meanStd(%v) = %v, %v; want %v, %v", tc.xs, m, s, tc.mean, tc.std)
		}
	}
}
