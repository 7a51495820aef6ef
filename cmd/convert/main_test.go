package main

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/pkg/csvconvert"
	"github.com/monolith-go/monolith/pkg/featureschema"
	"github.com/monolith-go/monolith/pkg/tfrecord"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
)

const schemaYAML = `
label: {source: rating, threshold: 4}
features:
  - {name: user_id, kind: sparse_int, slot: 1}
  - {name: genre, kind: sparse_string, slot: 3, source: genres, separator: "|", optional: true, default: []}
  - {name: price, kind: dense, dim: 1, optional: true, default: ["0.5"]}
  - {name: emb, kind: dense, dim: 2}
`

const header = "rating,user_id,genres,price,emb\n"

func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func write(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func gzipped(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := w.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// readRecords reads the records of a TFRecord file of compression c.
func readRecords(t *testing.T, path, c string) [][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	switch c {
	case "GZIP":
		if r, err = gzip.NewReader(f); err != nil {
			t.Fatal(err)
		}
	case "ZLIB":
		if r, err = zlib.NewReader(f); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := tfrecord.ReadAll(r)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return recs
}

// decode reads records back as the trainer does, with the decoder inputs of the schema.
func decode(t *testing.T, schema string, format batch.Format, recs [][]byte) *batch.Batch {
	t.Helper()
	s, err := featureschema.Parse([]byte(schema), "schema.yaml")
	if err != nil {
		t.Fatal(err)
	}
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

func userIDs(b *batch.Batch) []int64 {
	var ids []int64
	for _, f := range b.Fids {
		ids = append(ids, int64(f[0]&(1<<48-1)))
	}
	return ids
}

// listDir names what dir holds ("" for a missing dir).
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestConvert: files of either format and compression become shards of either kind of Example
// that decode to the rows, dealt round-robin, with a summary on stdout.
func TestConvert(t *testing.T) {
	rows := []string{"5,1,a|b,1.5,1;2", "3,2,,,3;4", "4,3,\"c,d\",2,5;6", "1,4,e,3,7;8", "4.5,5,f|g|h,4,9;10"}
	for _, tc := range []struct {
		name, format, example, compression string
		shards                             int
		inputs                             map[string]string // file -> content
		pattern                            string
	}{
		{name: "csv tf_example", format: "csv", example: "tf_example", shards: 1,
			inputs: map[string]string{"in.csv": header + strings.Join(rows, "\n") + "\n"}, pattern: "in.csv"},
		{name: "csv monolith 2 shards gzip output 2 files", format: "csv", example: "monolith", compression: "GZIP", shards: 2,
			inputs: map[string]string{"a.csv": header + strings.Join(rows[:2], "\n") + "\n", "b.csv": header + strings.Join(rows[2:], "\n")}, pattern: "*.csv"},
		{name: "tsv gzip input zlib output 3 shards", format: "tsv", example: "tf_example", compression: "ZLIB", shards: 3,
			inputs: map[string]string{"in.tsv.gz": gzipped(t, strings.NewReplacer(",", "\t", "\"c\td\"", "c,d").Replace(header+strings.Join(rows, "\n")+"\n"))}, pattern: "in.tsv.gz"},
		{name: "gzip input without .gz via a file list", format: "csv", example: "monolith", shards: 5,
			inputs: map[string]string{"data": gzipped(t, header+strings.Join(rows, "\r\n")+"\r\n"), "list.txt": "data\n"}, pattern: "@list.txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tc.inputs {
				write(t, filepath.Join(dir, name), content)
			}
			if _, ok := tc.inputs["list.txt"]; ok {
				write(t, filepath.Join(dir, "list.txt"), filepath.Join(dir, "data")+"\n")
			}
			schema := write(t, filepath.Join(dir, "schema.yaml"), schemaYAML)
			out := filepath.Join(dir, "out", "nested")
			pattern := filepath.Join(dir, tc.pattern)
			if strings.HasPrefix(tc.pattern, "@") {
				pattern = "@" + filepath.Join(dir, tc.pattern[1:])
			}
			code, stdout, stderr := runCmd(t, "--schema="+schema, "--input="+pattern, "--output="+out,
				"--format="+tc.format, "--example="+tc.example, "--compression="+tc.compression,
				"--shards="+string(rune('0'+tc.shards)))
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if !strings.Contains(stdout, "rows written  5 ") || !strings.Contains(stdout, "bad rows      0 ") {
				t.Errorf("summary:\n%s", stdout)
			}
			var got []int64
			var labels []float32
			for k := range tc.shards {
				name := csvconvert.PartName(k, tc.shards)
				if !strings.Contains(stdout, name) {
					t.Errorf("summary does not name %s:\n%s", name, stdout)
				}
				b := decode(t, schemaYAML, batch.Format(tc.example), readRecords(t, filepath.Join(out, name), tc.compression))
				ids := userIDs(b)
				for i, id := range ids {
					if want := int64(k + 1 + i*tc.shards); id != want {
						t.Errorf("shard %d record %d: user %d, want %d (round-robin)", k, i, id, want)
					}
				}
				got = append(got, ids...)
				labels = append(labels, b.Labels...)
				if k == 0 && len(b.Fids) > 0 && tc.shards == 1 {
					// Row 2's empty optional cells: no genre fids, price's default.
					if len(b.Fids[1]) != 1 || !slices.Equal(b.Row(1), []float32{0.5, 3, 4}) {
						t.Errorf("row 2: fids %v dense %v, want the defaults", b.Fids[1], b.Row(1))
					}
					if len(b.Fids[2]) != 2 || !slices.Equal(b.Row(2), []float32{2, 5, 6}) {
						t.Errorf("row 3: fids %v dense %v", b.Fids[2], b.Row(2))
					}
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, []int64{1, 2, 3, 4, 5}) {
				t.Errorf("users %v, want 1 to 5 once each", got)
			}
			if len(listDir(t, out)) != tc.shards {
				t.Errorf("output holds %v, want the %d shards alone", listDir(t, out), tc.shards)
			}
			var ones int
			for _, l := range labels {
				ones += int(l)
			}
			if ones != 3 {
				t.Errorf("labels %v: %d of them 1, want 3 (ratings 5, 4 and 4.5 reach the threshold)", labels, ones)
			}
		})
	}
}

// TestBadInput: each bad input exits 2 with one line naming the file, the line, the column and
// the value (or what else is wrong), and leaves nothing in --output.
func TestBadInput(t *testing.T) {
	const good = "5,1,a,1,1;2\n"
	for _, tc := range []struct {
		name    string
		content string // in.csv
		gz      bool   // content gzipped
		want    []string
	}{
		{"too few fields", header + good + "5,1,a\n", false, []string{"in.csv:3:", "the row has 3 fields, the header has 5"}},
		{"too many fields", header + good + "5,1,a,1,1;2,9\n", false, []string{"in.csv:3:", "the row has 6 fields"}},
		{"bare quote", header + good + "5,1,a\"b,1,1;2\n", false, []string{"in.csv:3:", `bare " in non-quoted-field`}},
		{"quote never closed", header + good + "5,1,\"a,1,1;2\n", false, []string{"in.csv:", `extraneous or missing " in quoted-field`}},
		{"label not a number", header + good + "five,1,a,1,1;2\n", false, []string{"in.csv:3:", `column "rating"`, `value "five"`, "not a finite number"}},
		{"label empty", header + good + ",1,a,1,1;2\n", false, []string{"in.csv:3:", `column "rating"`, "the label is empty"}},
		{"label NaN", header + good + "NaN,1,a,1,1;2\n", false, []string{"in.csv:3:", `column "rating"`, `value "NaN"`}},
		{"id not an integer", header + good + "5,1.5,a,1,1;2\n", false, []string{"in.csv:3:", `column "user_id"`, `value "1.5"`, "not an integer id"}},
		{"id beyond int64", header + good + "5,9223372036854775808,a,1,1;2\n", false, []string{"in.csv:3:", `column "user_id"`, `value "9223372036854775808"`}},
		{"required cell empty", header + good + "5,,a,1,1;2\n", false, []string{"in.csv:3:", `column "user_id"`, `required feature "user_id" is empty`}},
		{"empty list item", header + good + "5,1,a||b,1,1;2\n", false, []string{"in.csv:3:", `column "genres"`, `value "a||b"`, "empty item"}},
		{"dense not a number", header + good + "5,1,a,cheap,1;2\n", false, []string{"in.csv:3:", `column "price"`, `value "cheap"`, "not a number"}},
		{"dense infinite", header + good + "5,1,a,-Inf,1;2\n", false, []string{"in.csv:3:", `column "price"`, `value "-Inf"`, "finite"}},
		{"dense NaN", header + good + "5,1,a,1,NaN;2\n", false, []string{"in.csv:3:", `column "emb"`, `value "NaN;2"`, "finite"}},
		{"dense too few", header + good + "5,1,a,1,1\n", false, []string{"in.csv:3:", `column "emb"`, `value "1"`, "has 1 values, the schema's dim is 2"}},
		{"dense too many", header + good + "5,1,a,1,1;2;3\n", false, []string{"in.csv:3:", `column "emb"`, `value "1;2;3"`, "has 3 values"}},
		{"a later line after a quoted newline", header + good + "5,1,\"x\ny\",1,1;2\n" + good + "5,1,a,1,1;;2\n", false, []string{"in.csv:6:", `column "emb"`, `value "1;;2"`}},
		{"a bad row in a gzip file", header + good + "5,x,a,1,1;2\n", true, []string{"in.csv:3:", `column "user_id"`, `value "x"`}},
		{"missing column", "rating,userid,genres,price,emb\n" + good, false, []string{"in.csv: the header has no column \"user_id\"", `did you mean "userid"?`}},
		{"duplicate column", "rating,user_id,genres,price,emb,price\n5,1,a,1,1;2,1\n", false, []string{"in.csv: the header names column \"price\"", "more than once"}},
		{"empty file", "", false, []string{"in.csv is empty"}},
		{"truncated gzip", gzipped(t, header+good)[:20], false, []string{"in.csv"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			content := tc.content
			if tc.gz {
				content = gzipped(t, content)
			}
			in := write(t, filepath.Join(dir, "in.csv"), content)
			schema := write(t, filepath.Join(dir, "schema.yaml"), schemaYAML)
			out := filepath.Join(dir, "out")
			code, stdout, stderr := runCmd(t, "--schema="+schema, "--input="+in, "--output="+out, "--shards=2")
			if code != 2 {
				t.Fatalf("exit %d, want 2; stderr:\n%s", code, stderr)
			}
			checkErrorLine(t, stderr, tc.want)
			if stdout != "" {
				t.Errorf("stdout %q, want none", stdout)
			}
			if got := listDir(t, out); got != nil {
				t.Errorf("--output holds %v after a failure (or was left made)", got)
			}
			// An --output that existed keeps what it held, and only that.
			write(t, filepath.Join(out, "README"), "mine")
			if code, _, stderr := runCmd(t, "--schema="+schema, "--input="+in, "--output="+out); code != 2 {
				t.Fatalf("exit %d, want 2: %s", code, stderr)
			}
			if got := listDir(t, out); !slices.Equal(got, []string{"README"}) {
				t.Errorf("--output holds %v, want README alone", got)
			}
		})
	}
}

// checkErrorLine checks that stderr has one "convert: " line, holding every want.
func checkErrorLine(t *testing.T, stderr string, want []string) {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(stderr, "\n"), "\n") {
		if strings.HasPrefix(l, "convert: ") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("%d error lines, want 1:\n%s", len(lines), stderr)
	}
	for _, w := range want {
		if !strings.Contains(lines[0], w) {
			t.Errorf("error %q does not say %q", lines[0], w)
		}
	}
}

// TestMaxBadRows: --max_bad_rows=N skips up to N bad rows, each logged and all counted in the
// summary; one more is the error naming the row, with nothing written.
func TestMaxBadRows(t *testing.T) {
	dir := t.TempDir()
	schema := write(t, filepath.Join(dir, "schema.yaml"), schemaYAML)
	in := write(t, filepath.Join(dir, "in.csv"), header+
		"5,1,a,1,1;2\n"+
		"5,x,a,1,1;2\n"+ // bad: line 3
		"5,2,a,1,1;2\n"+
		"5,3,a,1,1\n"+ // bad: line 5
		"5,4,a,1,1;2\n")
	for _, tc := range []struct {
		max    string
		code   int
		rows   string
		errors []string
	}{
		{"2", 0, "rows written  3 ", nil},
		{"10", 0, "rows written  3 ", nil},
		{"1", 2, "", []string{"in.csv:5:", `column "emb"`, "bad row 2, more than the 1 allowed"}},
		{"0", 2, "", []string{"in.csv:3:", `column "user_id"`, `value "x"`}},
	} {
		out := filepath.Join(dir, "out"+tc.max)
		code, stdout, stderr := runCmd(t, "--schema="+schema, "--input="+in, "--output="+out, "--max_bad_rows="+tc.max)
		if code != tc.code {
			t.Fatalf("--max_bad_rows=%s: exit %d, want %d: %s", tc.max, code, tc.code, stderr)
		}
		if tc.code != 0 {
			checkErrorLine(t, stderr, tc.errors)
			if listDir(t, out) != nil {
				t.Errorf("--max_bad_rows=%s: output left: %v", tc.max, listDir(t, out))
			}
			continue
		}
		if !strings.Contains(stdout, tc.rows) || !strings.Contains(stdout, "bad rows      2 skipped") {
			t.Errorf("--max_bad_rows=%s: summary:\n%s", tc.max, stdout)
		}
		if strings.Count(stderr, "bad row skipped") != 2 || !strings.Contains(stderr, "in.csv:3:") || !strings.Contains(stderr, "in.csv:5:") {
			t.Errorf("--max_bad_rows=%s: the skipped rows are not logged:\n%s", tc.max, stderr)
		}
		if got := len(readRecords(t, filepath.Join(out, csvconvert.PartName(0, 1)), "")); got != 3 {
			t.Errorf("--max_bad_rows=%s: %d records, want 3", tc.max, got)
		}
	}
}

// TestOverwrite: an --output holding part files is refused (exit 2, files untouched) unless
// --overwrite, which replaces them all (also those of another shard count), leaving other files.
func TestOverwrite(t *testing.T) {
	dir := t.TempDir()
	schema := write(t, filepath.Join(dir, "schema.yaml"), schemaYAML)
	in := write(t, filepath.Join(dir, "in.csv"), header+"5,1,a,1,1;2\n5,2,a,1,1;2\n5,3,a,1,1;2\n")
	out := filepath.Join(dir, "out")
	args := []string{"--schema=" + schema, "--input=" + in, "--output=" + out}
	if code, _, stderr := runCmd(t, append(args, "--shards=3")...); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	write(t, filepath.Join(out, "NOTES"), "mine")
	before := listDir(t, out)
	code, _, stderr := runCmd(t, append(args, "--shards=2")...)
	if code != 2 {
		t.Fatalf("exit %d, want 2: %s", code, stderr)
	}
	checkErrorLine(t, stderr, []string{"already holds 3 part files", "--overwrite"})
	if got := listDir(t, out); !slices.Equal(got, before) {
		t.Errorf("refused run changed --output: %v, was %v", got, before)
	}
	if code, _, stderr := runCmd(t, append(args, "--shards=2", "--overwrite")...); code != 0 {
		t.Fatalf("--overwrite: exit %d: %s", code, stderr)
	}
	want := []string{"NOTES", csvconvert.PartName(0, 2), csvconvert.PartName(1, 2)}
	if got := listDir(t, out); !slices.Equal(got, want) {
		t.Errorf("after --overwrite: %v, want %v", got, want)
	}
	// A failed --overwrite run leaves the earlier parts as they were.
	write(t, in, header+"5,1,a,1,1;2\n5,x,a,1,1;2\n")
	if code, _, _ := runCmd(t, append(args, "--shards=1", "--overwrite")...); code != 2 {
		t.Fatalf("bad input with --overwrite: exit %d, want 2", code)
	}
	if got := listDir(t, out); !slices.Equal(got, want) {
		t.Errorf("after a failed --overwrite: %v, want %v", got, want)
	}
}

// TestCommandLine: bad flags and inputs that are not rows exit 2 with one line; --version and
// --help exit 0.
func TestCommandLine(t *testing.T) {
	dir := t.TempDir()
	schema := write(t, filepath.Join(dir, "schema.yaml"), schemaYAML)
	badSchema := write(t, filepath.Join(dir, "bad.yaml"), "label: {source: rating}\nfeatures:\n  - {name: x, kind: sparse_intt, slot: 1}\n")
	in := write(t, filepath.Join(dir, "in.csv"), header+"5,1,a,1,1;2\n")
	out := filepath.Join(dir, "out")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no schema", []string{"--input=" + in, "--output=" + out}, "--schema is required"},
		{"no input", []string{"--schema=" + schema, "--output=" + out}, "--input is required"},
		{"no output", []string{"--schema=" + schema, "--input=" + in}, "--output is required"},
		{"no shards", []string{"--schema=" + schema, "--input=" + in, "--output=" + out, "--shards=0"}, "--shards 0"},
		{"negative max_bad_rows", []string{"--schema=" + schema, "--input=" + in, "--output=" + out, "--max_bad_rows=-1"}, "--max_bad_rows -1"},
		{"bad compression", []string{"--schema=" + schema, "--input=" + in, "--output=" + out, "--compression=SNAPPY"}, "--compression"},
		{"bad example", []string{"--schema=" + schema, "--input=" + in, "--output=" + out, "--example=proto"}, "--example"},
		{"missing schema file", []string{"--schema=" + filepath.Join(dir, "none.yaml"), "--input=" + in, "--output=" + out}, "none.yaml"},
		{"bad schema", []string{"--schema=" + badSchema, "--input=" + in, "--output=" + out}, "bad.yaml:3"},
		{"no file matches", []string{"--schema=" + schema, "--input=" + filepath.Join(dir, "*.tsv"), "--output=" + out}, "no file matches"},
		{"output is a file", []string{"--schema=" + schema, "--input=" + in, "--output=" + in}, "not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCmd(t, tc.args...)
			if code != 2 {
				t.Fatalf("exit %d, want 2: %s", code, stderr)
			}
			checkErrorLine(t, stderr, []string{tc.want})
			if listDir(t, out) != nil {
				t.Errorf("--output made: %v", listDir(t, out))
			}
		})
	}
	for _, args := range [][]string{{"--version"}, {"--help"}} {
		if code, stdout, stderr := runCmd(t, args...); code != 0 || stdout == "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
}
