package csvconvert

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	examplepb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/example"
	tfexample "github.com/monolith-go/monolith/gen/pb/tensorflow/core/example"
	"github.com/monolith-go/monolith/pkg/featureschema"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
)

// testSchema has a feature of every kind, optional ones, a separator of its own and the default
// one (";"), and a source that differs from the name.
const testSchema = `
label: {source: rating, threshold: 4}
features:
  - {name: user_id, kind: sparse_int, slot: 1}
  - {name: genre, kind: sparse_string, slot: 3, source: genres, separator: "|", optional: true, default: []}
  - {name: tags, kind: sparse_int, slot: 4, optional: true, default: [7, 8]}
  - {name: price, kind: dense, dim: 1, optional: true, default: ["0.5"]}
  - {name: emb, kind: dense, dim: 3}
`

func mustSchema(t testing.TB, yaml string) *featureschema.Schema {
	t.Helper()
	s, err := featureschema.Parse([]byte(yaml), "schema.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// memShard keeps the records written to it.
type memShard struct{ recs [][]byte }

func (m *memShard) Write(rec []byte) error {
	m.recs = append(m.recs, slices.Clone(rec))
	return nil
}

// convertCSV converts data (named name) with schema into n memory shards.
func convertCSV(t testing.TB, s *featureschema.Schema, name, data string, n int, opts Options) ([]*memShard, Stats, error) {
	t.Helper()
	plan, err := PlanOf(s)
	if err != nil {
		t.Fatal(err)
	}
	shards := make([]*memShard, n)
	ws := make([]RecordWriter, n)
	for i := range shards {
		shards[i] = &memShard{}
		ws[i] = shards[i]
	}
	c, err := NewConverter(plan, ws, opts)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Convert(context.Background(), name, strings.NewReader(data))
	return shards, c.Stats(), err
}

// decodeAll reads recs back as the trainer does.
func decodeAll(t testing.TB, s *featureschema.Schema, format batch.Format, recs [][]byte) *batch.Batch {
	t.Helper()
	in, err := s.Inputs(format)
	if err != nil {
		t.Fatal(err)
	}
	d, err := batch.NewDecoder(in)
	if err != nil {
		t.Fatal(err)
	}
	b := &batch.Batch{}
	for i, rec := range recs {
		if err := d.Append(b, rec); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	return b
}

// example is a row as the trainer must see it.
type example struct {
	label float32
	fids  []uint64
	dense []float32
}

func fid(slot int, id int64) uint64  { return featureschema.FID(slot, id) }
func sfid(slot int, s string) uint64 { return featureschema.FID(slot, featureschema.StringID(s)) }

func checkBatch(t *testing.T, b *batch.Batch, want []example) {
	t.Helper()
	if b.Size() != len(want) {
		t.Fatalf("%d examples, want %d", b.Size(), len(want))
	}
	for i, w := range want {
		if b.Labels[i] != w.label || !slices.Equal(b.Fids[i], w.fids) || !slices.Equal(b.Row(i), w.dense) {
			t.Errorf("example %d: label %v fids %v dense %v, want %v %v %v", i, b.Labels[i], b.Fids[i], b.Row(i), w.label, w.fids, w.dense)
		}
	}
}

// TestConvertDecodes: rows converted to either kind of Example decode through batch.Decoder to the
// values the CSV holds, the optional features' defaults applied by the decoder where a cell was
// empty.
func TestConvertDecodes(t *testing.T) {
	s := mustSchema(t, testSchema)
	for _, tc := range []struct {
		name  string
		comma rune
		data  string
		want  []example
	}{
		{
			name: "every feature",
			data: "rating,user_id,genres,tags,price,emb\n" +
				"5,11,a|b,1;2,1.5,1;2;3\n" +
				"3,12,c,9,-2,0;0;0.25\n",
			want: []example{
				{1, []uint64{fid(1, 11), sfid(3, "a"), sfid(3, "b"), fid(4, 1), fid(4, 2)}, []float32{1.5, 1, 2, 3}},
				{0, []uint64{fid(1, 12), sfid(3, "c"), fid(4, 9)}, []float32{-2, 0, 0, 0.25}},
			},
		},
		{
			name: "optional cells empty: the schema's defaults",
			data: "rating,user_id,genres,tags,price,emb\n4,1,,,,1;1;1\n",
			want: []example{{1, []uint64{fid(1, 1), fid(4, 7), fid(4, 8)}, []float32{0.5, 1, 1, 1}}},
		},
		{
			name:  "tsv",
			comma: '\t',
			data:  "rating\tuser_id\tgenres\ttags\tprice\temb\n4.5\t-3\tx y|z\t5\t2\t1;2;3\n",
			want:  []example{{1, []uint64{fid(1, -3), sfid(3, "x y"), sfid(3, "z"), fid(4, 5)}, []float32{2, 1, 2, 3}}},
		},
		{
			name: "quoted fields hold commas, quotes, newlines and separators",
			data: "rating,user_id,genres,tags,price,emb\n" +
				`1,2,"a,b|c ""d""","3;4",7,"1;2;3"` + "\n" +
				`0,3,"multi` + "\n" + `line",,,"4;5;6"` + "\n",
			want: []example{
				{0, []uint64{fid(1, 2), sfid(3, "a,b"), sfid(3, `c "d"`), fid(4, 3), fid(4, 4)}, []float32{7, 1, 2, 3}},
				{0, []uint64{fid(1, 3), sfid(3, "multi\nline"), fid(4, 7), fid(4, 8)}, []float32{0.5, 4, 5, 6}},
			},
		},
		{
			name: "columns in another order, extra columns, a byte order mark, spaces around values",
			data: "\ufeffextra, emb ,price,genres,user_id,tags,rating,more\n" +
				"x, 1 ; 2 ;3 , 8 , p | q ,  42 ,,  4 ,y\n",
			want: []example{{1, []uint64{fid(1, 42), sfid(3, "p"), sfid(3, "q"), fid(4, 7), fid(4, 8)}, []float32{8, 1, 2, 3}}},
		},
		{
			name: "ids beyond 48 bits keep their low bits",
			data: "rating,user_id,genres,tags,price,emb\n0,9223372036854775807,,-9223372036854775808,1e-3,1e3;-1e-3;0\n",
			want: []example{{0, []uint64{fid(1, 9223372036854775807), fid(4, -9223372036854775808)}, []float32{1e-3, 1e3, -1e-3, 0}}},
		},
	} {
		for _, format := range []batch.Format{batch.TFExample, batch.Monolith} {
			t.Run(tc.name+"/"+string(format), func(t *testing.T) {
				shards, stats, err := convertCSV(t, s, "in.csv", tc.data, 1, Options{Format: format, Comma: tc.comma})
				if err != nil {
					t.Fatal(err)
				}
				if stats.Rows != int64(len(tc.want)) || stats.BadRows != 0 || stats.Files != 1 {
					t.Errorf("stats %+v", stats)
				}
				checkBatch(t, decodeAll(t, s, format, shards[0].recs), tc.want)
			})
		}
	}
}

// TestLongFields: fields of 128 bytes or more (many ids, long strings: lengths of several bytes,
// laid out again), a name longer than a template's 32 bytes, and a cell longer than the
// encoder's first buffer decode to their values in both kinds of Example.
func TestLongFields(t *testing.T) {
	long := strings.Repeat("a_feature_with_a_rather_long_name", 2)
	s := mustSchema(t, `
label: {source: label}
features:
  - {name: ids, kind: sparse_int, slot: 1}
  - {name: words, kind: sparse_string, slot: 2}
  - {name: `+long+`, kind: sparse_int, slot: 3}
  - {name: wide, kind: dense, dim: 40}
`)
	var ids, words, wide []string
	var wantFids []uint64
	for i := range 300 {
		ids = append(ids, fmt.Sprint(1000003*i))
		wantFids = append(wantFids, fid(1, int64(1000003*i)))
	}
	for i := range 200 {
		w := strings.Repeat(string(rune('a'+i%26)), 1+i%150)
		words = append(words, w)
		wantFids = append(wantFids, sfid(2, w))
	}
	huge := strings.Repeat("z", 10000)
	words = append(words, huge)
	wantFids = append(wantFids, sfid(2, huge), fid(3, 7))
	var wantDense []float32
	for i := range 40 {
		wide = append(wide, fmt.Sprint(float32(i)/4))
		wantDense = append(wantDense, float32(i)/4)
	}
	data := "label,ids,words," + long + ",wide\n" +
		"1," + strings.Join(ids, ";") + "," + strings.Join(words, ";") + ",7," + strings.Join(wide, ";") + "\n" +
		"0,5,x,8," + strings.Repeat("1;", 39) + "1\n"
	ones := slices.Repeat([]float32{1}, 40)
	for _, format := range []batch.Format{batch.TFExample, batch.Monolith} {
		shards, _, err := convertCSV(t, s, "long.csv", data, 1, Options{Format: format})
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		checkBatch(t, decodeAll(t, s, format, shards[0].recs), []example{
			{1, wantFids, wantDense},
			{0, []uint64{fid(1, 5), sfid(2, "x"), fid(3, 8)}, ones},
		})
	}
}

// TestRecordContents: the records hold what the task says, read with the generated messages: the
// raw label (not the rule's 0/1), strings as bytes_list (tf.train.Example) or hashed fids
// (Monolith), features named by their source, an optional empty cell left out.
func TestRecordContents(t *testing.T) {
	s := mustSchema(t, testSchema)
	data := "rating,user_id,genres,tags,price,emb\n3.5,11,a|b,,2,1;2;3\n"

	shards, _, err := convertCSV(t, s, "in.csv", data, 1, Options{Format: batch.TFExample})
	if err != nil {
		t.Fatal(err)
	}
	tf := &tfexample.Example{}
	if err := proto.Unmarshal(shards[0].recs[0], tf); err != nil {
		t.Fatal(err)
	}
	fm := tf.GetFeatures().GetFeature()
	if got := fm["rating"].GetFloatList().GetValue(); !slices.Equal(got, []float32{3.5}) {
		t.Errorf("rating %v, want the raw [3.5]", got)
	}
	if got := fm["user_id"].GetInt64List().GetValue(); !slices.Equal(got, []int64{11}) {
		t.Errorf("user_id %v", got)
	}
	if got := fm["genres"].GetBytesList().GetValue(); len(got) != 2 || string(got[0]) != "a" || string(got[1]) != "b" {
		t.Errorf("genres %q", got)
	}
	if _, ok := fm["tags"]; ok {
		t.Error("the empty optional tags were written")
	}
	if got := fm["emb"].GetFloatList().GetValue(); !slices.Equal(got, []float32{1, 2, 3}) {
		t.Errorf("emb %v", got)
	}
	if len(fm) != 5 {
		t.Errorf("%d features, want 5: %v", len(fm), fm)
	}

	shards, _, err = convertCSV(t, s, "in.csv", data, 1, Options{Format: batch.Monolith})
	if err != nil {
		t.Fatal(err)
	}
	mono := &examplepb.Example{}
	if err := proto.Unmarshal(shards[0].recs[0], mono); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(mono.GetLabel(), []float32{3.5}) {
		t.Errorf("label %v, want the raw [3.5]", mono.GetLabel())
	}
	got := map[string]*examplepb.Feature{}
	for _, nf := range mono.GetNamedFeature() {
		got[nf.GetName()] = nf.GetFeature()
	}
	if v := got["genres"].GetFidV2List().GetValue(); !slices.Equal(v, []uint64{sfid(3, "a"), sfid(3, "b")}) {
		t.Errorf("genres %v", v)
	}
	if v := got["user_id"].GetFidV2List().GetValue(); !slices.Equal(v, []uint64{fid(1, 11)}) {
		t.Errorf("user_id %v", v)
	}
	if v := got["price"].GetFloatList().GetValue(); !slices.Equal(v, []float32{2}) {
		t.Errorf("price %v", v)
	}
	if _, ok := got["tags"]; ok || len(got) != 4 {
		t.Errorf("features %v, want user_id, genres, price, emb", got)
	}
}

// TestBadRows: each bad row is a *RowError naming the file, the line, the column and the value.
func TestBadRows(t *testing.T) {
	s := mustSchema(t, testSchema)
	const header = "rating,user_id,genres,tags,price,emb\n"
	const good = "1,1,a,1,1,1;2;3\n"
	for _, tc := range []struct {
		name, row    string
		line         int
		column, want string
	}{
		{"fields missing", "1,1,a\n", 3, "", "the row has 3 fields, the header has 6"},
		{"fields extra", "1,1,a,1,1,1;2;3,9\n", 3, "", "the row has 7 fields, the header has 6"},
		{"bare quote", "1,1,a\"b,1,1,1;2;3\n", 3, "", "bare \" in non-quoted-field"},
		{"label not a number", "yes,1,a,1,1,1;2;3\n", 3, "rating", "not a finite number"},
		{"label empty", ",1,a,1,1,1;2;3\n", 3, "rating", "the label is empty"},
		{"label NaN", "NaN,1,a,1,1,1;2;3\n", 3, "rating", "not a finite number"},
		{"id not an integer", "1,1.5,a,1,1,1;2;3\n", 3, "user_id", `"1.5" is not an integer id`},
		{"id overflows", "1,99999999999999999999,a,1,1,1;2;3\n", 3, "user_id", "is not an integer id"},
		{"required empty", "1,,a,1,1,1;2;3\n", 3, "user_id", `required feature "user_id" is empty`},
		{"empty list item", "1,1,a||b,1,1,1;2;3\n", 3, "genres", "an empty item"},
		{"dense not a number", "1,1,a,1,abc,1;2;3\n", 3, "price", `"abc" is not a number`},
		{"dense infinite", "1,1,a,1,Inf,1;2;3\n", 3, "price", "must be finite"},
		{"dense out of float32", "1,1,a,1,1e39,1;2;3\n", 3, "price", "out of float32's range"},
		{"dense too few", "1,1,a,1,1,1;2\n", 3, "emb", "has 2 values, the schema's dim is 3"},
		{"dense too many", "1,1,a,1,1,1;2;3;4\n", 3, "emb", "has 4 values, the schema's dim is 3"},
		{"quoted newline moves the line", "1,1,\"a\nb\",1,x,1;2;3\n", 4, "price", `"x" is not a number`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stats, err := convertCSV(t, s, "d.csv", header+good+tc.row+good, 1, Options{})
			var re *RowError
			if !errors.As(err, &re) {
				t.Fatalf("error %v, want a *RowError", err)
			}
			if re.File != "d.csv" || re.Line != tc.line || re.Column != tc.column || !strings.Contains(re.Error(), tc.want) {
				t.Errorf("error %q (line %d column %q), want d.csv line %d column %q with %q", re, re.Line, re.Column, tc.line, tc.column, tc.want)
			}
			if strings.Contains(re.Error(), "\n") {
				t.Errorf("error %q is not one line", re)
			}
			if stats.Rows != 1 || stats.BadRows != 1 {
				t.Errorf("stats %+v, want 1 row and 1 bad row", stats)
			}
		})
	}
}

// TestMaxBadRows: up to MaxBadRows bad rows are skipped and counted; one more fails.
func TestMaxBadRows(t *testing.T) {
	s := mustSchema(t, testSchema)
	data := "rating,user_id,genres,tags,price,emb\n" +
		"1,1,a,1,1,1;2;3\n" +
		"1,x,a,1,1,1;2;3\n" + // bad
		"1,2,a,1,1,1;2;3\n" +
		"7,3,a,1,1,1;2;3\n" + // good: a threshold takes any number
		"1,4,a,1,1,1;2\n" + // bad
		"1,5,a,1,1,1;2;3\n"
	for _, tc := range []struct {
		max      int64
		fail     bool
		rows     int64
		bad      int64
		reported int
	}{
		{max: 2, rows: 4, bad: 2, reported: 2},
		{max: 5, rows: 4, bad: 2, reported: 2},
		{max: 1, fail: true, rows: 3, bad: 2, reported: 1},
		{max: 0, fail: true, rows: 1, bad: 1, reported: 0},
	} {
		var reported []*RowError
		shards, stats, err := convertCSV(t, s, "m.csv", data, 1, Options{MaxBadRows: tc.max, OnBadRow: func(e *RowError) { reported = append(reported, e) }})
		if (err != nil) != tc.fail {
			t.Errorf("max %d: error %v, want failure %v", tc.max, err, tc.fail)
		}
		if tc.fail && tc.max > 0 && !strings.Contains(err.Error(), "more than the 1 allowed") {
			t.Errorf("max %d: error %q does not say the limit", tc.max, err)
		}
		if stats.Rows != tc.rows || stats.BadRows != tc.bad || len(reported) != tc.reported || len(shards[0].recs) != int(tc.rows) {
			t.Errorf("max %d: stats %+v, %d reported, want %d rows %d bad %d reported", tc.max, stats, len(reported), tc.rows, tc.bad, tc.reported)
		}
	}
}

// TestMissingColumn: a header without a schema column is an error naming the file, the column
// and the nearest header column.
func TestMissingColumn(t *testing.T) {
	s := mustSchema(t, testSchema)
	for _, tc := range []struct{ header, want string }{
		{"rating,userid,genres,tags,price,emb", `m.csv: the header has no column "user_id" (feature "user_id"); did you mean "userid"?`},
		{"label,user_id,genres,tags,price,emb", `m.csv: the header has no column "rating" (the label)`},
		{"rating,user_id,genres,tags,price,emb,price", `m.csv: the header names column "price" (feature "price") more than once`},
		{"", `m.csv is empty`},
	} {
		_, _, err := convertCSV(t, s, "m.csv", tc.header, 1, Options{Suggest: featureschema.Suggest})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("header %q: error %v, want %q", tc.header, err, tc.want)
		}
	}
}

// TestSharding: rows are dealt round-robin.
func TestSharding(t *testing.T) {
	s := mustSchema(t, testSchema)
	var b strings.Builder
	b.WriteString("rating,user_id,genres,tags,price,emb\n")
	for i := range 10 {
		fmt.Fprintf(&b, "1,%d,a,1,1,1;2;3\n", i)
	}
	shards, _, err := convertCSV(t, s, "s.csv", b.String(), 3, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for k, sh := range shards {
		got := decodeAll(t, s, batch.TFExample, sh.recs)
		var ids []uint64
		for _, f := range got.Fids {
			ids = append(ids, f[0])
		}
		var want []uint64
		for i := k; i < 10; i += 3 {
			want = append(want, fid(1, int64(i)))
		}
		if !slices.Equal(ids, want) {
			t.Errorf("shard %d: user fids %v, want %v", k, ids, want)
		}
	}
}

// TestGzipInput: a gzip file is read whether its name ends .gz or not; a corrupt one is bad input.
func TestGzipInput(t *testing.T) {
	s := mustSchema(t, testSchema)
	plan, err := PlanOf(s)
	if err != nil {
		t.Fatal(err)
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write([]byte("rating,user_id,genres,tags,price,emb\n1,5,a,1,1,1;2;3\n"))
	zw.Close()
	dir := t.TempDir()
	for _, name := range []string{"in.csv.gz", "in.csv"} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, z.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		sh := &memShard{}
		c, err := NewConverter(plan, []RecordWriter{sh}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.ConvertFile(context.Background(), path); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		checkBatch(t, decodeAll(t, s, batch.TFExample, sh.recs), []example{{0, []uint64{fid(1, 5), sfid(3, "a"), fid(4, 1)}, []float32{1, 1, 2, 3}}})
	}
	cut := filepath.Join(dir, "cut.csv.gz")
	if err := os.WriteFile(cut, z.Bytes()[:z.Len()-6], 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := NewConverter(plan, []RecordWriter{&memShard{}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ConvertFile(context.Background(), cut); err == nil || !strings.Contains(err.Error(), "cut.csv.gz") {
		t.Errorf("truncated gzip: %v", err)
	}
}

// TestProgress: Progress is told the counts as rows are converted (here at every check, the
// interval being a nanosecond), and Stats end with what was written.
func TestProgress(t *testing.T) {
	s := mustSchema(t, testSchema)
	var b strings.Builder
	b.WriteString("rating,user_id,genres,tags,price,emb\n")
	for i := range 3000 {
		fmt.Fprintf(&b, "1,%d,a,1,1,1;2;3\n", i)
		if i%1000 == 0 {
			b.WriteString("1,x,a,1,1,1;2;3\n")
		}
	}
	var calls []Stats
	_, stats, err := convertCSV(t, s, "p.csv", b.String(), 2, Options{
		MaxBadRows: 5, ProgressInterval: time.Nanosecond, Progress: func(s Stats) { calls = append(calls, s) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) == 0 {
		t.Fatal("Progress was never called")
	}
	for i := 1; i < len(calls); i++ {
		if calls[i].Rows < calls[i-1].Rows || calls[i].RecordBytes < calls[i-1].RecordBytes {
			t.Errorf("progress went back: %+v then %+v", calls[i-1], calls[i])
		}
	}
	if stats.Rows != 3000 || stats.BadRows != 3 || stats.Files != 1 || stats.RecordBytes <= 3000*16 {
		t.Errorf("stats %+v", stats)
	}
}
