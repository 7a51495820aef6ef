package dataset

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// touch creates empty files (and their directories) under root.
func touch(t *testing.T, root string, files ...string) {
	t.Helper()
	for _, f := range files {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMatch(t *testing.T) {
	root := t.TempDir()
	touch(t, root, "a/1.tfr", "a/2.tfr", "a/10.tfr", "b/1.tfr", "b/x.gz", "c,d/1.tfr")
	list := filepath.Join(root, "files.txt")
	write := func(name, content string) string {
		p := filepath.Join(root, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("files.txt", "\n  "+root+"/b/*.gz  \n\n"+root+"/a/1.tfr\n"+root+"/c,d/*\n")
	nested := write("nested.txt", root+"/a/1.tfr\n@"+list+"\n")
	badLine := write("bad.txt", root+"/a/1.tfr\n"+root+"/[\n")
	p := func(s string) string { return strings.ReplaceAll(s, "R", root) }
	tests := []struct {
		name     string
		patterns []string
		want     []string // with R for root
		kind     errkind.Kind
		errSub   string
	}{
		{name: "glob, sorted by byte order", patterns: []string{p("R/a/*.tfr")}, want: []string{"R/a/1.tfr", "R/a/10.tfr", "R/a/2.tfr"}},
		{name: "comma list with spaces and empty items", patterns: []string{p(" R/b/*.tfr , ,R/a/2.tfr,")}, want: []string{"R/a/2.tfr", "R/b/1.tfr"}},
		{name: "duplicates across patterns", patterns: []string{p("R/a/1.tfr,R/a/1*"), p("R/*/1.tfr")}, want: []string{"R/a/1.tfr", "R/a/10.tfr", "R/b/1.tfr", "R/c,d/1.tfr"}},
		{name: "file list: one pattern per line, commas kept", patterns: []string{"@" + list}, want: []string{"R/a/1.tfr", "R/b/x.gz", "R/c,d/1.tfr"}},
		{name: "file list in a comma list", patterns: []string{p("R/a/2.tfr,@") + list}, want: []string{"R/a/1.tfr", "R/a/2.tfr", "R/b/x.gz", "R/c,d/1.tfr"}},
		{name: "plain path", patterns: []string{p("R/b/x.gz")}, want: []string{"R/b/x.gz"}},
		{name: "directories are matched too", patterns: []string{p("R/?")}, want: []string{"R/a", "R/b"}},
		{name: "nothing matches", patterns: []string{p("R/none/*"), p("R/missing.tfr")}, want: nil},
		{name: "no patterns", patterns: nil, want: nil},
		{name: "bad glob", patterns: []string{p("R/a/[")}, kind: errkind.Value, errSub: "syntax error in pattern"},
		{name: "missing file list", patterns: []string{p("@R/nope.txt")}, kind: errkind.NotFound, errSub: "nope.txt"},
		{name: "file list naming a file list", patterns: []string{"@" + nested}, kind: errkind.Value, errSub: "nested.txt line 2"},
		{name: "bad glob in a file list", patterns: []string{"@" + badLine}, kind: errkind.Value, errSub: "bad.txt line 2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Match(tc.patterns...)
			if tc.errSub != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errSub) || errkind.Of(err) != tc.kind {
					t.Fatalf("err = %v (kind %v), want one containing %q of kind %v", err, errkind.Of(err), tc.errSub, tc.kind)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, w := range tc.want {
				want = append(want, p(w))
			}
			if !slices.Equal(got, want) {
				t.Fatalf("Match = %q\nwant %q", got, want)
			}
		})
	}
}

func TestExpandPatterns(t *testing.T) {
	root := t.TempDir()
	touch(t, root, "a/1", "a/2")
	got, err := ExpandPatterns(root+"/a/2,"+root+"/none/*", root+"/a/*")
	if err != nil || !slices.Equal(got, []string{root + "/a/1", root + "/a/2"}) {
		t.Fatalf("ExpandPatterns = %q, %v", got, err)
	}
	_, err = ExpandPatterns(root+"/none/*", root+"/missing")
	if err == nil || errkind.Of(err) != errkind.NotFound || !strings.Contains(err.Error(), "/none/*") {
		t.Fatalf("no match: err = %v (kind %v), want NotFound naming the patterns", err, errkind.Of(err))
	}
	if _, err := ExpandPatterns(root + "/[a"); errkind.Of(err) != errkind.Value {
		t.Fatalf("bad pattern: err = %v, want kind Value", err)
	}
}

// patternsGolden is testdata/patterns_golden.json, written by testdata/gen_golden.py running the
// reference's own gen_patterns and --dataset_input_patterns code.
type patternsGolden struct {
	Tree        []string `json:"tree"`
	GenPatterns []struct {
		Args struct {
			InputPath string `json:"input_path"`
			StartDate *int   `json:"start_date"`
			StartHour int    `json:"start_hour"`
			EndDate   int    `json:"end_date"`
			EndHour   int    `json:"end_hour"`
			IsHourly  bool   `json:"is_hourly"`
			Wildcard  string `json:"wildcard"`
		} `json:"args"`
		Patterns []string `json:"patterns"`
	} `json:"gen_patterns"`
	Templates []struct {
		Template string   `json:"template"`
		Patterns []string `json:"patterns"`
		Error    string   `json:"error"`
	} `json:"templates"`
}

func loadPatternsGolden(t *testing.T) patternsGolden {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "patterns_golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g patternsGolden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.GenPatterns) == 0 || len(g.Templates) == 0 {
		t.Fatal("patterns_golden.json has no cases")
	}
	return g
}

func TestGenPatternsGolden(t *testing.T) {
	g := loadPatternsGolden(t)
	for _, c := range g.GenPatterns {
		a := c.Args
		d := PatternDates{InputPath: a.InputPath, StartHour: a.StartHour, EndDate: a.EndDate, EndHour: a.EndHour, Hourly: a.IsHourly, Wildcard: a.Wildcard}
		if a.StartDate != nil {
			d.StartDate = *a.StartDate
		}
		got, err := GenPatterns(d, time.Time{})
		if err != nil {
			t.Errorf("%+v: %v", d, err)
			continue
		}
		if !slices.Equal(got, c.Patterns) {
			t.Errorf("%+v:\n got %q\nwant %q", d, got, c.Patterns)
		}
	}
}

func TestGenPatterns(t *testing.T) {
	now := time.Date(2021, 3, 2, 15, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		d      PatternDates
		want   []string
		errSub string
	}{
		{name: "end date defaults to today", d: PatternDates{InputPath: "/d", StartDate: 20210228}, want: []string{"/d/20210228/*", "/d/20210301/*"}},
		{name: "bad start date", d: PatternDates{InputPath: "/d", StartDate: 20211345, EndDate: 20211350}, errSub: "start 20211345"},
		{name: "bad start hour", d: PatternDates{InputPath: "/d", StartDate: 20210101, StartHour: 24, EndDate: 20210102}, errSub: "hour 24"},
		{name: "bad end hour", d: PatternDates{InputPath: "/d", StartDate: 20210101, EndDate: 20210102, EndHour: 30, Hourly: true}, errSub: "end 20210102 hour 30"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := GenPatterns(tc.d, now)
			if tc.errSub != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errSub) || errkind.Of(err) != errkind.Value {
					t.Fatalf("err = %v, want a Value error containing %q", err, tc.errSub)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("GenPatterns = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestExpandTemplateGolden(t *testing.T) {
	g := loadPatternsGolden(t)
	root := t.TempDir()
	touch(t, root, g.Tree...)
	t.Chdir(root)
	for _, c := range g.Templates {
		got, err := ExpandTemplate(c.Template)
		if c.Error != "" {
			if err == nil || errkind.Of(err) != errkind.NotFound || !strings.Contains(err.Error(), "no match files") {
				t.Errorf("%s: got %q, %v; want the reference's %q as a NotFound error", c.Template, got, err, c.Error)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.Patterns) {
			t.Errorf("%s:\n got %q, %v\nwant %q", c.Template, got, err, c.Patterns)
		}
	}
}

func TestExpandTemplateBadFields(t *testing.T) {
	tests := []struct{ template, errSub string }{
		{"d/{DATE(2020112,20201130)}", "differ in length"},
		{"d/{DATE(202011,202012)}", "not support 202011 202012"},
		{"d/{DATE(20201399,20201399)}", "not dates"},
		{"d/{INT(a,3)}", "not integers"},
		{"d/{HEX(1,3)}", "is not DATE or INT"},
		{"d/{INT(1)}", "want DATE(start,end)"},
	}
	for _, tc := range tests {
		t.Run(tc.template, func(t *testing.T) {
			_, err := ExpandTemplate(tc.template)
			if err == nil || errkind.Of(err) != errkind.Value || !strings.Contains(err.Error(), tc.errSub) {
				t.Fatalf("err = %v, want a Value error containing %q", err, tc.errSub)
			}
		})
	}
}

func TestParseCompression(t *testing.T) {
	tests := []struct {
		in   string
		want Compression
		bad  bool
	}{
		{"", NoCompression, false}, {"NO", NoCompression, false}, {"none", NoCompression, false},
		{"gzip", GZIP, false}, {"GZIP", GZIP, false}, {" zlib ", ZLIB, false},
		{"SNAPPY", "", true}, {"ZSTD", "", true}, {"lz4", "", true},
	}
	for _, tc := range tests {
		got, err := ParseCompression(tc.in)
		if tc.bad {
			if err == nil || errkind.Of(err) != errkind.Value {
				t.Errorf("%q: err = %v, want a Value error", tc.in, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestParseKind(t *testing.T) {
	tests := []struct {
		in   string
		want Kind
		name string
	}{
		{"instance", KindInstance, "instance"}, {"INSTANCE", KindInstance, "instance"},
		{"examplebatch", KindExampleBatch, "examplebatch"}, {"example_batch", KindExampleBatch, "examplebatch"},
		{"Example", KindExample, "example"}, {"plaintext", KindPlainText, "plaintext"},
	}
	for _, tc := range tests {
		got, err := ParseKind(tc.in)
		if err != nil || got != tc.want || got.String() != tc.name {
			t.Errorf("%q: %v (%s), %v; want %v (%s)", tc.in, got, got, err, tc.want, tc.name)
		}
	}
	if _, err := ParseKind("proto"); errkind.Of(err) != errkind.Value {
		t.Errorf("unknown kind: err = %v, want a Value error", err)
	}
}
