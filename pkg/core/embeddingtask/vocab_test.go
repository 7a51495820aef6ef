package embeddingtask

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/internal/refcases"
	"github.com/monolith-go/monolith/pkg/errkind"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type refError struct{ Type, Message string }

// pyKinds maps the reference's exception classes to error kinds.
var pyKinds = map[string]errkind.Kind{
	"AssertionError":    errkind.Precondition,
	"ValueError":        errkind.Value,
	"ZeroDivisionError": errkind.Value,
}

func checkError(t *testing.T, what string, err error, ref *refError) {
	t.Helper()
	if ref == nil {
		if err != nil {
			t.Errorf("%s: %v, reference succeeded", what, err)
		}
		return
	}
	if err == nil || errkind.Of(err) != pyKinds[ref.Type] || !strings.Contains(err.Error(), ref.Message) {
		t.Errorf("%s: %v, reference %s: %s", what, err, ref.Type, ref.Message)
	}
}

type refEmbeddingTask struct {
	Defaults struct {
		Params map[string]any `json:"params"`
		Train  map[string]any `json:"train"`
	} `json:"defaults"`
	Vocab []struct {
		Name             string         `json:"name"`
		Content          string         `json:"content"`
		VocabSizePerSlot *int           `json:"vocab_size_per_slot"`
		Custom           map[string]int `json:"custom_vocab_size_mapping"`
		Offset           *int           `json:"vocab_size_offset"`
		Output           map[string]int `json:"output"`
		Error            *refError      `json:"error"`
	} `json:"vocab"`
	MissingVocabPath struct {
		Error *refError `json:"error"`
	} `json:"missing_vocab_path"`
	Download []struct {
		Mode       string         `json:"mode"`
		Output     map[string]int `json:"output"`
		IsDownload bool           `json:"vocab_file_path_is_download"`
		HadoopArgs []string       `json:"hadoop_args"`
	} `json:"download"`
}

func loadRef(t *testing.T) refEmbeddingTask {
	t.Helper()
	var r refEmbeddingTask
	refcases.ReadJSON(t, "testdata/reference_embeddingtask.json", &r)
	return r
}

func intKeys(m map[string]int) map[int]int {
	if m == nil {
		return nil
	}
	out := map[int]int{}
	for k, v := range m {
		n, _ := strconv.Atoi(k)
		out[n] = v
	}
	return out
}

func TestDefaultParamsMatchReference(t *testing.T) {
	ref := loadRef(t)
	p := DefaultParams()
	for name, want := range ref.Defaults.Params {
		if name == "custom_vocab_size_mapping" {
			if want != nil || p.CustomVocabSizeMapping != nil {
				t.Errorf("custom_vocab_size_mapping %v", p.CustomVocabSizeMapping)
			}
			continue
		}
		got, ok := p.Get(name)
		if !ok {
			t.Errorf("no param %s", name)
			continue
		}
		if fmt.Sprint(deref(got)) != fmt.Sprint(want) {
			t.Errorf("%s = %v, reference %v", name, deref(got), want)
		}
	}
	for name, want := range ref.Defaults.Train {
		got, ok := p.Train.Get(name)
		if !ok || fmt.Sprint(deref(got)) != fmt.Sprint(want) {
			t.Errorf("train.%s = %v, reference %v", name, deref(got), want)
		}
	}
}

// deref prints optional values as the JSON of the reference decodes (nil for None).
func deref(v any) any {
	switch x := v.(type) {
	case *int:
		if x == nil {
			return nil
		}
		return *x
	case *string:
		if x == nil {
			return nil
		}
		return *x
	case int:
		return float64(x)
	}
	return v
}

func TestParseVocabSizesReference(t *testing.T) {
	for _, c := range loadRef(t).Vocab {
		t.Run(c.Name, func(t *testing.T) {
			p := DefaultParams()
			p.VocabSizePerSlot, p.VocabSizeOffset = c.VocabSizePerSlot, c.Offset
			p.CustomVocabSizeMapping = intKeys(c.Custom)
			got, err := ParseVocabSizes(strings.NewReader(c.Content), p)
			checkError(t, c.Name, err, c.Error)
			if c.Error == nil && !reflect.DeepEqual(got, intKeys(c.Output)) {
				t.Errorf("got %v, reference %v", got, c.Output)
			}
		})
	}
}

func TestParseVocabSizesGoOnly(t *testing.T) {
	p := DefaultParams()
	for _, c := range []struct {
		name, content string
		kind          errkind.Kind
	}{
		{"not utf-8", "1\t\xff\n", errkind.Value},
		{"count overflows int64", "1\t99999999999999999999\n", errkind.Value},
		{"slot overflows int64", "99999999999999999999\t1\n", errkind.Value},
	} {
		if _, err := ParseVocabSizes(strings.NewReader(c.content), p); errkind.Of(err) != c.kind {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	// Python's str.isdigit accepts other scripts' digits; they are treated as a header here.
	got, err := ParseVocabSizes(strings.NewReader("٣\t5\n1\t2\n"), p)
	if err != nil || !reflect.DeepEqual(got, map[int]int{1: 2}) {
		t.Errorf("non-ASCII slot: %v %v", got, err)
	}
}

// fakeHadoop writes a hadoop command that records its arguments and copies n part files (or
// fails) into its destination.
func fakeHadoop(t *testing.T, dir, mode string) (cmd, argsFile string) {
	t.Helper()
	argsFile = filepath.Join(dir, "args-"+mode)
	n := map[string]int{"one": 1, "two": 2, "none": 0, "fail": 0}[mode]
	script := "#!/bin/sh\nprintf '%s\\n' \"$@\" > " + argsFile + "\n"
	if mode == "fail" {
		script += "exit 1\n"
	}
	for i := range n {
		script += fmt.Sprintf("printf '5\\t55\\n6\\t66\\n' > \"$4/part-%05d.csv\"\n", i)
	}
	cmd = filepath.Join(dir, "hadoop-"+mode)
	if err := os.WriteFile(cmd, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return cmd, argsFile
}

func TestCreateVocabDictDownloadReference(t *testing.T) {
	ref := loadRef(t)
	dir := t.TempDir()
	fallback := filepath.Join(dir, "fallback.tsv")
	if err := os.WriteFile(fallback, []byte("1\t11\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range ref.Download {
		t.Run(c.Mode, func(t *testing.T) {
			hadoop, argsFile := fakeHadoop(t, dir, c.Mode)
			p := DefaultParams()
			p.VocabFilePath = &fallback
			end, prefix := "20201210", "hdfs://ns/vocab/"
			p.Train.EndDate, p.Train.VocabFileFolderPrefix = &end, &prefix
			downloads := t.TempDir()
			got, err := CreateVocabDict(context.Background(), &p, HDFSDownloader{Hadoop: hadoop, Dir: downloads, Logger: quiet}, quiet)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, intKeys(c.Output)) {
				t.Errorf("got %v, reference %v", got, c.Output)
			}
			if (*p.VocabFilePath != fallback) != c.IsDownload {
				t.Errorf("vocab file path %s", *p.VocabFilePath)
			}
			raw, err := os.ReadFile(argsFile)
			if err != nil {
				t.Fatal(err)
			}
			args := strings.Split(strings.TrimSpace(string(raw)), "\n")
			// The destination differs on purpose: a fresh directory instead of ./temp.
			if len(args) != 4 || !reflect.DeepEqual(args[:3], c.HadoopArgs[:3]) || !strings.HasPrefix(args[3], downloads) {
				t.Errorf("hadoop args %v, reference %v", args, c.HadoopArgs)
			}
			if left, _ := os.ReadDir(downloads); (len(left) == 1) != c.IsDownload {
				t.Errorf("download directories left: %d", len(left))
			}
		})
	}
}

func TestCreateVocabDictErrors(t *testing.T) {
	ref := loadRef(t)
	p := DefaultParams()
	_, err := CreateVocabDict(context.Background(), &p, nil, quiet)
	checkError(t, "no vocab path", err, ref.MissingVocabPath.Error)
	missing := filepath.Join(t.TempDir(), "absent.tsv")
	p.VocabFilePath = &missing
	if _, err := CreateVocabDict(context.Background(), &p, nil, quiet); errkind.Of(err) != errkind.NotFound {
		t.Errorf("absent file: %v", err)
	}
	// No hadoop on this path: the download fails and the configured file is used.
	end, prefix := "1", "p/"
	p.Train.EndDate, p.Train.VocabFileFolderPrefix = &end, &prefix
	good := filepath.Join(t.TempDir(), "v.tsv")
	_ = os.WriteFile(good, []byte("3\t4\n"), 0o644)
	p.VocabFilePath = &good
	got, err := CreateVocabDict(context.Background(), &p, HDFSDownloader{Hadoop: filepath.Join(t.TempDir(), "no-hadoop"), Dir: t.TempDir(), Logger: quiet}, quiet)
	if err != nil || !reflect.DeepEqual(got, map[int]int{3: 4}) {
		t.Errorf("missing hadoop: %v %v", got, err)
	}
	if _, err := (HDFSDownloader{Hadoop: "/bin/true", Dir: t.TempDir(), Logger: quiet}).Download(context.Background(), "p", "d"); errkind.Of(err) != errkind.NotFound {
		t.Errorf("no file downloaded: %v", err)
	}
}

func TestNewTask(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v.tsv")
	_ = os.WriteFile(path, []byte("slot\tcount\n1\t100\n2\t200\n"), 0o644)
	p := DefaultParams()
	p.VocabFilePath = &path
	per := 9
	p.CustomVocabSizeMapping = map[int]int{2: 5}
	task, err := New(context.Background(), p, nil, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(task.VocabSizes(), map[int]int{1: 100, 2: 5}) {
		t.Errorf("vocab %v", task.VocabSizes())
	}
	// The task copied its params.
	p.CustomVocabSizeMapping[2] = 77
	if task.Params().CustomVocabSizeMapping[2] != 5 {
		t.Error("task shares the caller's mapping")
	}
	p.VocabSizePerSlot = &per
	task, _ = New(context.Background(), p, nil, quiet)
	if !reflect.DeepEqual(task.VocabSizes(), map[int]int{1: 9, 2: 9}) {
		t.Errorf("per slot vocab %v", task.VocabSizes())
	}
	p.VocabFilePath = nil
	if _, err := New(context.Background(), p, nil, quiet); errkind.Of(err) != errkind.Precondition {
		t.Errorf("no vocab file: %v", err)
	}
}
