package main

import (
	"context"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	examplepb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/example"
	tfexamplepb "github.com/monolith-go/monolith/gen/pb/tensorflow/core/example"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/internal/syncbuf"
	"github.com/monolith-go/monolith/pkg/dataset"
	"github.com/monolith-go/monolith/pkg/hooks/runhook"
	"github.com/monolith-go/monolith/pkg/trainenv"
)

// rating is one row of the ratings data of these tests: a user rates an item of a genre at a
// price. Users and items have hidden tastes and qualities (functions of their ids), so that a
// model of their embeddings learns what a model without them cannot.
type rating struct {
	user, item int64
	genre      string
	price      float32
	rating     float32
}

var genres = []string{"drama", "comedy", "horror", "documentary"}

// ratings are n rows drawn deterministically from seed.
func ratings(n int, seed int64) []rating {
	var out []rating
	x := uint64(seed)*0x9e3779b97f4a7c15 + 1
	next := func(m int64) int64 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		return int64(x % uint64(m))
	}
	sign := func(b bool) float64 {
		if b {
			return 1
		}
		return -1
	}
	for range n {
		u, i := next(60), next(30)
		logit := 1.5*sign(u%3 == 0) + 1.5*sign(i%4 == 0) + 1.5*sign(u%2 == i%2)
		r := float32(1 + next(3)) // 1..3
		if float64(next(1000))/1000 < 1/(1+math.Exp(-logit)) {
			r = float32(4 + next(2)) // 4..5
		}
		out = append(out, rating{user: u, item: i, genre: genres[i%4], price: float32(i%7) + 0.5, rating: r})
	}
	return out
}

// tfFeature builds tf.train.Example features.
func tfInt(v ...int64) *tfexamplepb.Feature {
	return &tfexamplepb.Feature{Kind: &tfexamplepb.Feature_Int64List{Int64List: &tfexamplepb.Int64List{Value: v}}}
}

func tfFloat(v ...float32) *tfexamplepb.Feature {
	return &tfexamplepb.Feature{Kind: &tfexamplepb.Feature_FloatList{FloatList: &tfexamplepb.FloatList{Value: v}}}
}

func tfBytes(v ...string) *tfexamplepb.Feature {
	var b [][]byte
	for _, s := range v {
		b = append(b, []byte(s))
	}
	return &tfexamplepb.Feature{Kind: &tfexamplepb.Feature_BytesList{BytesList: &tfexamplepb.BytesList{Value: b}}}
}

// tfRecord is a rating as a tf.train.Example: user_id, item_id (int64_list), genre (bytes_list),
// price (float_list), rating (float_list, the raw label).
func (r rating) tfRecord() map[string]*tfexamplepb.Feature {
	return map[string]*tfexamplepb.Feature{"user_id": tfInt(r.user), "item_id": tfInt(r.item), "genre": tfBytes(r.genre),
		"price": tfFloat(r.price), "rating": tfFloat(r.rating)}
}

// writeTF writes records as a TFRecord file of tf.train.Examples (compressed with c).
func writeTF(t *testing.T, path string, c dataset.Compression, recs []map[string]*tfexamplepb.Feature) string {
	t.Helper()
	var data [][]byte
	for _, f := range recs {
		b, err := proto.Marshal(&tfexamplepb.Example{Features: &tfexamplepb.Features{Feature: f}})
		if err != nil {
			t.Fatal(err)
		}
		data = append(data, b)
	}
	return writeRecords(t, path, c, data)
}

func writeRecords(t *testing.T, path string, c dataset.Compression, data [][]byte) string {
	t.Helper()
	w, err := dataset.CreateFile(path, c)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range data {
		if err := w.Write(d); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// tfRatings writes n ratings as tf.train.Examples, each changed by mod (nil: none).
func tfRatings(t *testing.T, path string, n int, seed int64, mod func(i int, f map[string]*tfexamplepb.Feature)) string {
	t.Helper()
	var recs []map[string]*tfexamplepb.Feature
	for i, r := range ratings(n, seed) {
		f := r.tfRecord()
		if mod != nil {
			mod(i, f)
		}
		recs = append(recs, f)
	}
	return writeTF(t, path, dataset.NoCompression, recs)
}

// monoRatings writes n ratings as Monolith Examples: user_id and item_id as fid_v2 in slots 1 and
// 2, price as float_list, the label 0/1 (rating >= 4), each changed by mod.
func monoRatings(t *testing.T, path string, n int, seed int64, mod func(i int, ex *examplepb.Example)) string {
	t.Helper()
	var data [][]byte
	for i, r := range ratings(n, seed) {
		label := float32(0)
		if r.rating >= 4 {
			label = 1
		}
		ex := &examplepb.Example{Label: []float32{label}, NamedFeature: []*examplepb.NamedFeature{
			{Name: "user_id", Feature: &examplepb.Feature{Type: &examplepb.Feature_FidV2List{FidV2List: &examplepb.FidList{Value: []uint64{1<<48 | uint64(r.user)}}}}},
			{Name: "item_id", Feature: &examplepb.Feature{Type: &examplepb.Feature_FidV2List{FidV2List: &examplepb.FidList{Value: []uint64{2<<48 | uint64(r.item)}}}}},
			{Name: "price", Feature: &examplepb.Feature{Type: &examplepb.Feature_FloatList{FloatList: &examplepb.FloatList{Value: []float32{r.price}}}}},
		}}
		if mod != nil {
			mod(i, ex)
		}
		b, err := proto.Marshal(ex)
		if err != nil {
			t.Fatal(err)
		}
		data = append(data, b)
	}
	return writeRecords(t, path, dataset.NoCompression, data)
}

// ratingsSchema is the schema of tfRatings' records.
const ratingsSchema = `# the ratings of cmd/train's tests
label: {source: rating, threshold: 4}
features:
  - {name: user, kind: sparse_int, slot: 1, source: user_id}
  - {name: item, kind: sparse_int, slot: 2, source: item_id}
  - {name: genre, kind: sparse_string, slot: 3, optional: true, default: [unknown]}
  - {name: price, kind: dense, dim: 1}
`

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// dirState lists the files under dir with their sizes ("" for none).
func dirState(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			t.Fatal(err)
		}
		if info, err := d.Info(); err == nil && !d.IsDir() {
			out = append(out, fmt.Sprintf("%s %d", p, info.Size()))
		}
		return nil
	})
	return out
}

// TestBadData: schemas, records and flags a user gets wrong. Each run exits 2 with one line on
// stderr naming the file (and line, or record offset), the feature and the value, without a stack
// trace and without writing into --model_dir: with the previous good run's files there, the model
// dir is left exactly as it was (a record past the ones checked at the start fails the same way,
// but the run has begun: its case says so).
func TestBadData(t *testing.T) {
	leakcheck.Check(t)
	dir := t.TempDir()
	path := func(name string) string { return filepath.Join(dir, name) }
	good := tfRatings(t, path("good.tfrecord"), 600, 1, nil)
	eval := tfRatings(t, path("eval.tfrecord"), 200, 2, nil)
	schema := writeFile(t, path("schema.yaml"), ratingsSchema)
	schemaWith := func(name, content string) string { return writeFile(t, path(name), content) }
	feature := func(name string, f *tfexamplepb.Feature) func(int, map[string]*tfexamplepb.Feature) {
		return func(_ int, m map[string]*tfexamplepb.Feature) { m[name] = f }
	}
	gz := writeTF(t, path("gz.tfrecord"), dataset.GZIP, []map[string]*tfexamplepb.Feature{ratings(1, 1)[0].tfRecord()})
	monoGood := monoRatings(t, path("mono.tfrecord"), 300, 3, nil)
	monoEval := monoRatings(t, path("monoeval.tfrecord"), 100, 4, nil)
	badFile := func(name string, mod func(int, map[string]*tfexamplepb.Feature)) string {
		return tfRatings(t, path(name), 50, 5, func(i int, m map[string]*tfexamplepb.Feature) {
			if i == 7 {
				mod(i, m)
			}
		})
	}

	// A good run leaves its model dir; the bad runs start from a copy of it.
	goodDir := t.TempDir()
	base := []string{"--schema=" + schema, "--input_format=tf_example", "--train_data=" + good, "--eval_data=" + eval,
		"--epochs=1", "--batch_size=64", "--embedding_dim=4", "--hidden=8"}
	runOK(t, withArgs(base, "--model_dir="+goodDir)...)
	tf := func(train string, more ...string) []string {
		return withArgs([]string{"--schema=" + schema, "--input_format=tf_example", "--train_data=" + train, "--eval_data=" + eval,
			"--epochs=1", "--batch_size=64", "--embedding_dim=4", "--hidden=8"}, more...)
	}
	withSchema := func(s string, more ...string) []string {
		return withArgs([]string{"--schema=" + s, "--input_format=tf_example", "--train_data=" + good, "--eval_data=" + eval, "--epochs=1"}, more...)
	}
	mono := func(more ...string) []string {
		return withArgs([]string{"--train_data=" + monoGood, "--eval_data=" + monoEval, "--epochs=1", "--batch_size=64"}, more...)
	}
	lateNaN := tfRatings(t, path("late-nan.tfrecord"), 1500, 6, func(i int, m map[string]*tfexamplepb.Feature) {
		if i == 1400 {
			m["price"] = tfFloat(float32(math.NaN()))
		}
	})
	empty := writeTF(t, path("empty.tfrecord"), dataset.NoCompression, nil)

	cases := []struct {
		name string
		args []string
		want string // a regexp the error line must match
		// begun: the bad record is past the first ones checked, so the run had begun.
		begun bool
	}{
		// Schemas.
		{"schema file missing", withSchema(path("none.yaml")), `--schema: feature schema: open .*none\.yaml: no such file`, false},
		{"schema is a directory", withSchema(dir), `--schema: feature schema: read .*: is a directory`, false},
		{"schema YAML syntax", withSchema(schemaWith("syntax.yaml", "label: {source: rating\nfeatures: [")), `syntax\.yaml:\d+`, false},
		{"schema unknown key", withSchema(schemaWith("key.yaml", strings.Replace(ratingsSchema, "source: user_id", "sourse: user_id", 1))),
			`key\.yaml:4:\d+: features\[0\]: unknown key "sourse" \(did you mean "source"\?\)`, false},
		{"schema bad kind", withSchema(schemaWith("kind.yaml", strings.Replace(ratingsSchema, "kind: sparse_int, slot: 1", "kind: sparse_str, slot: 1", 1))),
			`kind\.yaml:4:\d+: features\[0\]\.kind: "sparse_str" is not one of sparse_int, sparse_string, dense`, false},
		{"schema duplicate name", withSchema(schemaWith("dupname.yaml", strings.Replace(ratingsSchema, "name: item,", "name: user,", 1))),
			`dupname\.yaml:5:\d+: features\[1\]\.name: .*"user"`, false},
		{"schema duplicate slot", withSchema(schemaWith("dupslot.yaml", strings.Replace(ratingsSchema, "slot: 2", "slot: 1", 1))),
			`dupslot\.yaml:5:\d+: features\[1\]\.slot: .*1`, false},
		{"schema slot out of range", withSchema(schemaWith("slot.yaml", strings.Replace(ratingsSchema, "slot: 2", "slot: 40000", 1))),
			`slot\.yaml:5:\d+: features\[1\]\.slot: .*40000`, false},
		{"schema dim on a sparse feature", withSchema(schemaWith("dimsparse.yaml", strings.Replace(ratingsSchema, "slot: 2,", "slot: 2, dim: 4,", 1))),
			`dimsparse\.yaml:5:\d+: features\[1\]\.dim`, false},
		{"schema dense without dim", withSchema(schemaWith("nodim.yaml", strings.Replace(ratingsSchema, "kind: dense, dim: 1", "kind: dense", 1))),
			`nodim\.yaml:7:\d+: features\[3\]`, false},
		{"schema optional without default", withSchema(schemaWith("nodefault.yaml", strings.Replace(ratingsSchema, ", default: [unknown]", "", 1))),
			`nodefault\.yaml:6:\d+: features\[2\]`, false},
		{"schema default not an id", withSchema(schemaWith("badid.yaml", strings.Replace(ratingsSchema, "slot: 2, source: item_id}", "slot: 2, source: item_id, optional: true, default: abc}", 1))),
			`badid\.yaml:5:\d+: features\[1\]\.default: .*"abc"`, false},
		{"schema threshold and positive", withSchema(schemaWith("rules.yaml", strings.Replace(ratingsSchema, "threshold: 4}", "threshold: 4, positive: [5]}", 1))),
			`rules\.yaml:2:\d+: label`, false},
		{"schema threshold not a number", withSchema(schemaWith("thresh.yaml", strings.Replace(ratingsSchema, "threshold: 4}", "threshold: high}", 1))),
			`thresh\.yaml:2:\d+: label\.threshold: .*"high"`, false},
		{"schema without features", withSchema(schemaWith("nofeatures.yaml", "label: {source: rating}\nfeatures: []\n")), `nofeatures\.yaml:2:\d+: features`, false},
		{"schema and shorthand flags", withArgs(withSchema(schema), "--sparse_features=user_id:1"), `--schema names the features: give it or --dense_features/--sparse_features, not both`, false},
		// Records.
		{"raw ratings as labels", withSchema(schemaWith("nothreshold.yaml", strings.Replace(ratingsSchema, ", threshold: 4", "", 1))),
			`--train_data: .*good\.tfrecord at offset \d+: label [1-5] is neither 0 nor 1 \(a schema's label\.threshold or label\.positive maps other values to 0/1\)`, false},
		{"label column misspelled", withSchema(schemaWith("labelname.yaml", strings.Replace(ratingsSchema, "source: rating", "source: ratings", 1))),
			`good\.tfrecord at offset 0: the label feature "ratings" is missing; the record has genre, item_id, price, rating, user_id \(did you mean "rating"\?\)`, false},
		{"feature misspelled", withSchema(schemaWith("userid.yaml", strings.Replace(ratingsSchema, "source: user_id", "source: userid", 1))),
			`good\.tfrecord at offset 0: feature "user" \(source "userid"\) is missing; .*\(did you mean "user_id"\?\)`, false},
		{"optional feature no record has", withSchema(schemaWith("optname.yaml", strings.Replace(ratingsSchema, "name: genre,", "name: genre, source: genres,", 1))),
			`--train_data: no record of the first 600 has the feature genres \(did you mean genre\?\)`, false},
		{"strings as integer ids", withSchema(schemaWith("genreint.yaml", strings.Replace(ratingsSchema, "kind: sparse_string, slot: 3, optional: true, default: [unknown]", "kind: sparse_int, slot: 3", 1))),
			`good\.tfrecord at offset 0: feature "genre" holds strings \(bytes_list\), the schema says integer ids: declare it sparse_string`, false},
		{"dense of the wrong length", withSchema(schemaWith("dim2.yaml", strings.Replace(ratingsSchema, "dim: 1", "dim: 2", 1))),
			`good\.tfrecord at offset 0: feature "price" has 1 values, want 2`, false},
		{"NaN dense value", tf(badFile("nan.tfrecord", feature("price", tfFloat(float32(math.NaN()))))), `nan\.tfrecord at offset \d+: feature "price": value 0 is NaN`, false},
		{"infinite dense value", tf(badFile("inf.tfrecord", feature("price", tfFloat(float32(math.Inf(1)))))), `inf\.tfrecord at offset \d+: feature "price": value 0 is \+Inf`, false},
		{"ids as floats", tf(badFile("floatids.tfrecord", feature("user_id", tfFloat(3)))), `floatids\.tfrecord at offset \d+: feature "user" holds float_list, want int64_list or bytes_list`, false},
		{"two labels", tf(badFile("twolabels.tfrecord", feature("rating", tfFloat(4, 5)))), `twolabels\.tfrecord at offset \d+: label feature "rating" has 2 values, want 1`, false},
		{"label as a string", tf(badFile("labelstr.tfrecord", feature("rating", tfBytes("five")))), `labelstr\.tfrecord at offset \d+: label feature "rating" holds bytes_list`, false},
		{"label NaN", tf(badFile("labelnan.tfrecord", feature("rating", tfFloat(float32(math.NaN()))))), `labelnan\.tfrecord at offset \d+: label.*NaN`, false},
		{"a required feature missing in one record", tf(badFile("norecord.tfrecord", func(_ int, m map[string]*tfexamplepb.Feature) { delete(m, "item_id") })),
			`norecord\.tfrecord at offset \d+: feature "item" \(source "item_id"\) is missing`, false},
		{"empty training file", tf(empty), `--train_data: no records in .*empty\.tfrecord`, false},
		{"empty evaluation file", withArgs(tf(good), "--eval_data="+empty), `--eval_data: no records in .*empty\.tfrecord`, false},
		{"gzip file without --compression", tf(gz), `gz\.tfrecord at offset 0: .*\(the file starts with gzip's magic bytes: read it with compression GZIP \(--compression=GZIP\)\)`, false},
		{"Monolith Examples read as tf.train.Examples", withArgs(tf(monoGood), "--eval_data="+monoEval), `mono\.tfrecord at offset 0: `, false},
		{"tf.train.Examples read as Monolith Examples", withArgs(mono(), "--train_data="+good, "--sparse_features=user_id:1"), `good\.tfrecord at offset 0: `, false},
		{"Monolith fid of another slot", withArgs(mono(), "--sparse_features=user_id:1,item_id:1"), `features "user_id" and "item_id" are both in slot 1`, false},
		{"Monolith fid_v1 of another slot", withArgs(mono("--schema=" + schemaWith("monoslot.yaml", "label: {}\nfeatures:\n  - {name: user_id, kind: sparse_int, slot: 5}\n  - {name: price, kind: dense, dim: 1}\n"))),
			`mono\.tfrecord at offset 0: feature "user_id": fid_v2 \d+ has slot 1, the schema gives the feature slot 5`, false},
		{"shorthand feature misspelled", mono("--sparse_features=userid:1,item_id:2", "--dense_features=price:1"),
			`--train_data: no record of the first 300 has the feature userid \(did you mean user_id\?\)`, false},
		{"shorthand dense misspelled", mono("--sparse_features=user_id:1", "--dense_features=prize:1"),
			`mono\.tfrecord at offset 0: feature "prize" \(source "prize"\) is missing; .*\(did you mean "price"\?\)`, false},
		{"a bad record after the checked ones", tf(lateNaN), `late-nan\.tfrecord at offset \d+: feature "price": value 0 is NaN`, true},
		// Flags.
		{"save every 0 steps", tf(good, "--save_checkpoints_steps=0"), `--save_checkpoints_steps 0: want a positive number of steps`, false},
		{"save every 0 seconds", tf(good, "--save_checkpoints_secs=0"), `--save_checkpoints_secs 0: want a positive number of seconds`, false},
		{"unknown input format", tf(good, "--input_format=csv"), `--input_format`, false},
		{"negative shuffle buffer", tf(good, "--shuffle_buffer=-1"), `--shuffle_buffer -1 is negative`, false},
		{"negative seed", tf(good, "--seed=-1"), `--seed -1 is negative`, false},
		{"negative buckets", tf(good, "--embedding_buckets=-1"), `--embedding_buckets -1: want 0 \(collisionless\) to 281474976710656`, false},
		{"too many buckets", tf(good, "--embedding_buckets=281474976710657"), `--embedding_buckets 281474976710657`, false},
		{"negative eval interval", tf(good, "--eval_every_steps=-1"), `--eval_every_steps -1 is negative`, false},
		{"unknown pooling", tf(good, "--pooling=max"), `--pooling`, false},
		{"zero epochs", tf(good, "--epochs=0"), `--epochs 0 is not positive`, false},
	}
	if len(cases) < 40 {
		t.Fatalf("%d cases, want at least 40", len(cases))
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			modelDir := filepath.Join(t.TempDir(), "model")
			if err := os.CopyFS(modelDir, os.DirFS(goodDir)); err != nil {
				t.Fatal(err)
			}
			before := dirState(t, modelDir)
			r := start(t, withArgs(c.args, "--model_dir="+modelDir), nil)()
			if r.code != 2 {
				t.Errorf("exit status %d, want 2; stderr:\n%s", r.code, r.stderr)
			}
			var errLines []string
			for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
				if strings.HasPrefix(l, "train: ") {
					errLines = append(errLines, l)
				}
			}
			if len(errLines) != 1 || !regexp.MustCompile(c.want).MatchString(errLines[0]) {
				t.Errorf("error lines %q, want one matching %q; stderr:\n%s", errLines, c.want, r.stderr)
			}
			if strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, "panic") {
				t.Errorf("stack trace on stderr:\n%s", r.stderr)
			}
			if after := dirState(t, modelDir); !c.begun && !slices.Equal(after, before) {
				t.Errorf("the model dir changed:\nbefore %q\nafter  %q", before, after)
			}
		})
	}
}

// TestTrainOnYourData: tf.train.Examples of ratings read through a schema (threshold label, int
// and string ids, a dense value) train a model that learns the users' and items' tastes, with an
// evaluation at each epoch end and every --eval_every_steps; Monolith Examples of the same data
// train as well.
func TestTrainOnYourData(t *testing.T) {
	leakcheck.Check(t)
	dir := t.TempDir()
	train := tfRatings(t, filepath.Join(dir, "train.tfrecord"), 3000, 1, nil)
	eval := tfRatings(t, filepath.Join(dir, "eval.tfrecord"), 1000, 2, nil)
	schema := writeFile(t, filepath.Join(dir, "schema.yaml"), ratingsSchema)
	r := runOK(t, "--schema="+schema, "--input_format=tf_example", "--train_data="+train, "--eval_data="+eval, "--epochs=3",
		"--batch_size=100", "--embedding_dim=4", "--hidden=16", "--eval_every_steps=20", "--model_dir="+filepath.Join(dir, "m"))
	evalLine := regexp.MustCompile(`(?m)^eval step=(\d+) epoch=(\d+) auc=(0\.\d{4}) loss=\d+\.\d{4}$`)
	var got []string
	for _, m := range evalLine.FindAllStringSubmatch(r.stdout, -1) {
		got = append(got, m[1]+"/"+m[2])
	}
	// 30 steps an epoch: every 20 steps, and at 30, 60 and 90 (the epochs' ends).
	if want := []string{"20/1", "30/1", "40/2", "60/2", "80/3", "90/3"}; !slices.Equal(got, want) {
		t.Errorf("evaluations at step/epoch %v, want %v; stdout:\n%s", got, want, r.stdout)
	}
	if !strings.Contains(r.stdout, "stopped step=90 examples=9000 by --epochs=3: the training input ran out\n") {
		t.Errorf("no line says what stopped the run:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, "features     label <- rating (1 if value >= 4, else 0); user (slot 1), item (slot 2), genre (slot 3), price (dense, dim 1)") {
		t.Errorf("the features are not described:\n%s", r.stdout)
	}
	auc, _, steps := r.final(t)
	if steps != 90 || auc < 0.8 {
		t.Errorf("auc %v steps %d, want 90 steps and the tastes learned (auc >= 0.8)", auc, steps)
	}

	// The same ratings as Monolith Examples (fid_v2 ids, 0/1 labels) through the shorthand flags,
	// and without dense features.
	mtrain := monoRatings(t, filepath.Join(dir, "mtrain.tfrecord"), 3000, 1, nil)
	meval := monoRatings(t, filepath.Join(dir, "meval.tfrecord"), 1000, 2, nil)
	r = runOK(t, "--train_data="+mtrain, "--eval_data="+meval, "--sparse_features=user_id:1,item_id:2", "--epochs=3",
		"--batch_size=100", "--embedding_dim=4", "--hidden=16", "--pooling=mean", "--model_dir="+filepath.Join(dir, "m2"))
	if auc, _, _ := r.final(t); auc < 0.8 {
		t.Errorf("Monolith Examples without dense features: auc %v, want >= 0.8", auc)
	}
	if !strings.Contains(r.stdout, "pooled 8 + dense 0") {
		t.Errorf("the model is not one without dense features:\n%s", r.stdout)
	}
}

// TestResumeIsExact: a run of 1 epoch whose last batch is partial, resumed with --epochs=3, goes
// on at the example it ended at: it trains on as many examples as an uninterrupted run of 3
// epochs, the partial batch's included, none skipped and none twice.
func TestResumeIsExact(t *testing.T) {
	leakcheck.Check(t)
	dir := t.TempDir()
	train := tfRatings(t, filepath.Join(dir, "train.tfrecord"), 1050, 1, nil)
	eval := tfRatings(t, filepath.Join(dir, "eval.tfrecord"), 300, 2, nil)
	schema := writeFile(t, filepath.Join(dir, "schema.yaml"), ratingsSchema)
	args := func(modelDir string, epochs int) []string {
		return []string{"--schema=" + schema, "--input_format=tf_example", "--train_data=" + train, "--eval_data=" + eval,
			"--epochs=" + strconv.Itoa(epochs), "--batch_size=100", "--embedding_dim=4", "--hidden=8", "--shuffle_buffer=300",
			"--seed=3", "--model_dir=" + modelDir}
	}
	whole := runOK(t, args(filepath.Join(dir, "whole"), 3)...)
	first := runOK(t, args(filepath.Join(dir, "resumed"), 1)...)
	if !strings.Contains(first.stdout, "stopped step=11 examples=1050 by --epochs=1") {
		t.Fatalf("first run:\n%s", first.stdout)
	}
	rest := runOK(t, args(filepath.Join(dir, "resumed"), 3)...)
	// 3150 examples in batches of 100 across epochs: 32 steps uninterrupted; 11 (the last of 50)
	// then 21 (3150-1050 = 2100 examples) resumed.
	if !strings.Contains(whole.stdout, "stopped step=32 examples=3150 ") || !strings.Contains(rest.stdout, "stopped step=32 examples=3150 ") {
		t.Fatalf("uninterrupted:\n%s\nresumed:\n%s", whole.stdout, rest.stdout)
	}
	// The batches differ (the uninterrupted run's 11th holds the first epoch's last 50 examples
	// and the second's first 50, the interrupted run's the 50 alone), not the examples.
	wa, _, _ := whole.final(t)
	ra, _, _ := rest.final(t)
	if math.Abs(wa-ra) > 0.02 {
		t.Errorf("uninterrupted auc %v, resumed auc %v", wa, ra)
	}
}

// TestBucketsAndSeeds: --embedding_buckets=1 hashes every id of a slot into one bucket (the model
// cannot tell users apart, and learns less); --seed changes the run, and the same seed repeats it.
func TestBucketsAndSeeds(t *testing.T) {
	leakcheck.Check(t)
	dir := t.TempDir()
	train := tfRatings(t, filepath.Join(dir, "train.tfrecord"), 2000, 1, nil)
	eval := tfRatings(t, filepath.Join(dir, "eval.tfrecord"), 600, 2, nil)
	schema := writeFile(t, filepath.Join(dir, "schema.yaml"), ratingsSchema)
	run := func(name string, more ...string) float64 {
		r := runOK(t, withArgs([]string{"--schema=" + schema, "--input_format=tf_example", "--train_data=" + train, "--eval_data=" + eval,
			"--epochs=2", "--batch_size=100", "--embedding_dim=4", "--hidden=8", "--model_dir=" + filepath.Join(dir, name)}, more...)...)
		auc, _, _ := r.final(t)
		return auc
	}
	free, hashed := run("free"), run("hashed", "--embedding_buckets=1")
	if !(hashed < free-0.1) {
		t.Errorf("collisionless auc %v, one bucket per slot %v: want the buckets to cost", free, hashed)
	}
	a, b, c := run("seed5a", "--seed=5"), run("seed5b", "--seed=5"), run("seed6", "--seed=6")
	if a != b || a == c {
		t.Errorf("seed 5: %v and %v, seed 6: %v: want seed 5 to repeat and 6 to differ", a, b, c)
	}
}

// cancelAt cancels the command's context (as SIGTERM does) after step n.
type cancelAt struct {
	runhook.Base
	n      int64
	cancel context.CancelFunc
}

func (h *cancelAt) AfterRun(_ context.Context, rc *runhook.RunContext) error {
	if rc.Step+1 == h.n {
		h.cancel()
	}
	return nil
}

// TestSignalStopsInOrder: a signal while training ends the run at a step's end with a final
// checkpoint of that step, an evaluation and exit status 0; a run restored from it goes on.
func TestSignalStopsInOrder(t *testing.T) {
	leakcheck.Check(t)
	modelDir := filepath.Join(t.TempDir(), "m")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncbuf.Buffer
	args := withArgs(dnnSmall, "--epochs=50", "--model_dir="+modelDir)
	code := run(ctx, args, &stdout, &stderr, deps{env: trainenv.Env{}, setenv: func(string, string) error { return nil },
		hooks: []runhook.Hook{&cancelAt{n: 5, cancel: cancel}}})
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
	m := regexp.MustCompile(`(?m)^stopped step=(\d+) examples=\d+ by a signal: the final checkpoint is saved$`).FindStringSubmatch(stdout.String())
	if m == nil {
		t.Fatalf("no stop line:\n%s", stdout.String())
	}
	step, _ := strconv.Atoi(m[1])
	if step < 5 || step >= 400 {
		t.Fatalf("stopped at step %d, want soon after 5 (of 400)", step)
	}
	if _, err := os.Stat(filepath.Join(modelDir, fmt.Sprintf("model.ckpt-%d.index", step))); err != nil {
		t.Fatalf("no final checkpoint of step %d: %v", step, err)
	}
	r := result{code: code, stdout: stdout.String()}
	if _, _, steps := r.final(t); steps != int64(step) {
		t.Errorf("evaluated step %d, stopped at %d", steps, step)
	}
	again := runOK(t, withArgs(dnnSmall, "--epochs=50", "--steps=3", "--model_dir="+modelDir)...)
	if _, _, steps := again.final(t); steps != int64(step)+3 {
		t.Errorf("the restored run ended at step %d, want %d", steps, step+3)
	}
}
