package fileops

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"

	hashtablepb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/hooks/runhook"
	"github.com/monolith-go/monolith/pkg/tfrecord"
)

func newFile(t *testing.T, name string) (*WritableFile, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	f, err := NewWritableFile(path)
	if err != nil {
		t.Fatalf("NewWritableFile(%s): %v", path, err)
	}
	return f, path
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// file_ops_test.py test_basic: 1000 appends of "1234", then close.
func TestAppendBasic(t *testing.T) {
	const times = 1000
	f, path := newFile(t, "test_basic/test_name")
	for range times {
		if err := f.Append([]byte("1234")); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := string(readFile(t, path)), strings.Repeat("1234", times); got != want {
		t.Fatalf("file holds %d bytes, want %d bytes of \"1234\"*%d", len(got), len(want), times)
	}
}

// file_ops_test.py test_hook: the hook closes (and so flushes) the file at the end of the run.
func TestFileCloseHook(t *testing.T) {
	f, path := newFile(t, "test_hook/test_name")
	if err := f.Append([]byte("1234")); err != nil {
		t.Fatal(err)
	}
	h := NewFileCloseHook([]*WritableFile{f})
	if err := h.End(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := string(readFile(t, path)); got != "1234" {
		t.Fatalf("file = %q, want %q", got, "1234")
	}
	if err := f.Append([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after the hook closed the file: %v, want ErrClosed", err)
	}
}

func TestFileCloseHookClosesAllDespiteFailures(t *testing.T) {
	dir := t.TempDir()
	var files []*WritableFile
	for _, name := range []string{"a", "b", "c"} {
		f, err := NewWritableFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Append([]byte(name)); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	// b is closed already: the hook reports it, as the reference's second close does, and still
	// closes c.
	if err := files[1].Close(); err != nil {
		t.Fatal(err)
	}
	list := []*WritableFile{files[0], files[1], files[2]}
	h := NewFileCloseHook(list)
	list[2] = nil // the hook keeps its own copy
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // cleanup runs even when the run was cancelled
	err := h.End(ctx, nil, nil)
	if !errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), files[1].Name()) {
		t.Fatalf("End = %v, want the already-closed error of %s", err, files[1].Name())
	}
	for _, name := range []string{"a", "b", "c"} {
		if got := string(readFile(t, filepath.Join(dir, name))); got != name {
			t.Errorf("%s = %q, want %q", name, got, name)
		}
	}
	if err := files[2].Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("c was not closed by the hook: %v", err)
	}
	if err := NewFileCloseHook(nil).End(context.Background(), nil, nil); err != nil {
		t.Fatalf("End with no files: %v", err)
	}
	if err := NewFileCloseHook([]*WritableFile{nil}).End(context.Background(), nil, nil); errkind.Of(err) != errkind.Value {
		t.Fatalf("End with a nil file = %v, want an error of kind Value", err)
	}
}

// goldenBytes reads testdata/golden.json, written by testdata/gen_golden.py (an independent Python
// encoder of the reference op's output).
func goldenBytes(t *testing.T, name string) []byte {
	t.Helper()
	var g map[string]string
	if err := json.Unmarshal(readFile(t, filepath.Join("testdata", "golden.json")), &g); err != nil {
		t.Fatalf("golden.json: %v", err)
	}
	s, ok := g[name]
	if !ok {
		t.Fatalf("golden.json has no %q", name)
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("golden %s: %v", name, err)
	}
	return b
}

func dump(id int64, num ...float32) *hashtablepb.EntryDump {
	return &hashtablepb.EntryDump{Id: proto.Int64(id), Num: num}
}

func TestEntryDumpGolden(t *testing.T) {
	type step struct {
		raw       string // appended with Append when set
		ids       []int64
		bias, emb []float32
	}
	negZero := float32(math.Copysign(0, -1))
	tests := []struct {
		name   string
		steps  []step
		dumps  []*hashtablepb.EntryDump // what ReadEntryDumps gives back; nil: not a pure dump file
		golden string
	}{
		{
			name: "entry_dump",
			steps: []step{{
				ids:  []int64{1, -2, 1 << 40},
				bias: []float32{0.5, -1, 0},
				emb:  []float32{1, 2, 0.25, -0.75, 3.5, negZero},
			}},
			dumps:  []*hashtablepb.EntryDump{dump(1, 0.5, 1, 2), dump(-2, -1, 0.25, -0.75), dump(1<<40, 0, 3.5, negZero)},
			golden: "entry_dump",
		},
		{
			name: "mixed",
			steps: []step{
				{raw: "header\n"},
				{ids: []int64{7}, bias: []float32{1.5}, emb: []float32{2, 4, 8}},
				{raw: "tail"},
				{ids: []int64{-1, 0}, bias: []float32{0, 0.125}, emb: nil},
			},
			golden: "mixed",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, path := newFile(t, tc.name)
			for _, s := range tc.steps {
				var err error
				if s.raw != "" {
					err = f.Append([]byte(s.raw))
				} else {
					err = f.AppendEntryDump(s.ids, s.bias, s.emb)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			got, want := readFile(t, path), goldenBytes(t, tc.golden)
			if !bytes.Equal(got, want) {
				t.Fatalf("file bytes\n got %x\nwant %x", got, want)
			}
			if tc.dumps == nil {
				return
			}
			dumps, err := ReadEntryDumps(bytes.NewReader(got))
			if err != nil {
				t.Fatal(err)
			}
			if len(dumps) != len(tc.dumps) {
				t.Fatalf("read %d dumps, want %d", len(dumps), len(tc.dumps))
			}
			for i := range dumps {
				if !proto.Equal(dumps[i], tc.dumps[i]) {
					t.Errorf("dump %d = %v, want %v", i, dumps[i], tc.dumps[i])
				}
			}
			if math.Signbit(float64(dumps[2].GetNum()[2])) != true {
				t.Errorf("-0 embedding value lost its sign")
			}
		})
	}
}

func TestAppendEntryDumpBadInput(t *testing.T) {
	tests := []struct {
		name      string
		ids       []int64
		bias, emb []float32
	}{
		{"no items", nil, nil, nil},
		{"no items, some values", []int64{}, []float32{1}, []float32{1}},
		{"bias short", []int64{1, 2}, []float32{1}, []float32{1, 2}},
		{"bias long", []int64{1}, []float32{1, 2}, []float32{1}},
		{"ragged embedding", []int64{1, 2}, []float32{1, 2}, []float32{1, 2, 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, path := newFile(t, "bad")
			err := f.AppendEntryDump(tc.ids, tc.bias, tc.emb)
			if errkind.Of(err) != errkind.Value {
				t.Fatalf("err = %v (kind %v), want kind Value", err, errkind.Of(err))
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if got := readFile(t, path); len(got) != 0 {
				t.Fatalf("a rejected call wrote %d bytes", len(got))
			}
		})
	}
}

func TestClosedFile(t *testing.T) {
	f, path := newFile(t, "closed")
	if err := f.Append([]byte("kept")); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	ops := map[string]func() error{
		"append":            func() error { return f.Append([]byte("lost")) },
		"append entry dump": func() error { return f.AppendEntryDump([]int64{1}, []float32{1}, nil) },
		"close again":       f.Close,
	}
	for name, op := range ops {
		err := op()
		if !errors.Is(err, ErrClosed) || errkind.Of(err) != errkind.Runtime {
			t.Errorf("%s: err = %v (kind %v), want ErrClosed of kind Runtime", name, err, errkind.Of(err))
		}
	}
	if got := string(readFile(t, path)); got != "kept" {
		t.Fatalf("file = %q, want %q", got, "kept")
	}
}

func TestNewWritableFile(t *testing.T) {
	dir := t.TempDir()
	t.Run("creates parent directories", func(t *testing.T) {
		path := filepath.Join(dir, "a", "b", "c", "f")
		f, err := NewWritableFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if f.Name() != path {
			t.Errorf("Name() = %q, want %q", f.Name(), path)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if st, err := os.Stat(path); err != nil || st.Size() != 0 {
			t.Fatalf("stat %s: %v, %v", path, st, err)
		}
	})
	t.Run("truncates an existing file", func(t *testing.T) {
		path := filepath.Join(dir, "old")
		if err := os.WriteFile(path, []byte("previous content"), 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := NewWritableFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Append([]byte("new")); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if got := string(readFile(t, path)); got != "new" {
			t.Fatalf("file = %q, want %q", got, "new")
		}
	})
	blocker := filepath.Join(dir, "plain")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	bad := []struct {
		name, path string
		kind       errkind.Kind
	}{
		{"empty name", "", errkind.Value},
		{"parent is a file", filepath.Join(blocker, "f"), errkind.Unknown},
		{"name is a directory", dir, errkind.Unknown},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			f, err := NewWritableFile(tc.path)
			if err == nil {
				f.Close()
				t.Fatalf("NewWritableFile(%q) succeeded", tc.path)
			}
			if errkind.Of(err) != tc.kind {
				t.Fatalf("err = %v (kind %v), want kind %v", err, errkind.Of(err), tc.kind)
			}
		})
	}
}

// Concurrent callers share a file as the reference's resource does: every call's records stay
// whole and contiguous.
func TestConcurrentAppends(t *testing.T) {
	const workers, calls, batch, dim = 8, 50, 3, 4
	f, path := newFile(t, "concurrent")
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range calls {
				base := int64((w*calls + c) * batch)
				ids := []int64{base, base + 1, base + 2}
				bias := []float32{float32(base), float32(base + 1), float32(base + 2)}
				emb := make([]float32, batch*dim)
				for i := range emb {
					emb[i] = float32(base) + float32(i)/16
				}
				if err := f.AppendEntryDump(ids, bias, emb); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	dumps, err := ReadEntryDumps(bufio.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(dumps) != workers*calls*batch {
		t.Fatalf("read %d dumps, want %d", len(dumps), workers*calls*batch)
	}
	seen := map[int64]bool{}
	for i := 0; i < len(dumps); i += batch {
		base := dumps[i].GetId()
		for j := range batch {
			d := dumps[i+j]
			if d.GetId() != base+int64(j) {
				t.Fatalf("dump %d has id %d, want %d: a call's records were split", i+j, d.GetId(), base+int64(j))
			}
			if len(d.GetNum()) != 1+dim || d.GetNum()[0] != float32(base+int64(j)) || d.GetNum()[1] != float32(base)+float32(j*dim)/16 {
				t.Fatalf("dump %d = %v: wrong numbers", i+j, d)
			}
			seen[d.GetId()] = true
		}
	}
	if len(seen) != workers*calls*batch {
		t.Fatalf("%d distinct ids, want %d", len(seen), workers*calls*batch)
	}
}

func TestEntryDumpReaderBadRecords(t *testing.T) {
	good := tfrecord.AppendRecord(nil, mustMarshal(t, dump(5, 1, 2)))
	notADump := tfrecord.AppendRecord(bytes.Clone(good), []byte{0xff, 0xff, 0xff})
	corrupt := bytes.Clone(good)
	corrupt[tfrecord.HeaderLen] ^= 0x40
	tests := []struct {
		name    string
		in      []byte
		kind    errkind.Kind
		wantErr error
	}{
		{"record is not an EntryDump", notADump, errkind.Value, nil},
		{"corrupted record", corrupt, errkind.Unknown, tfrecord.ErrCorrupt},
		{"truncated record", good[:len(good)-1], errkind.Unknown, tfrecord.ErrTruncated},
		{"raw bytes", []byte("1234"), errkind.Unknown, tfrecord.ErrTruncated},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadEntryDumps(bytes.NewReader(tc.in))
			if err == nil {
				t.Fatal("no error")
			}
			if errkind.Of(err) != tc.kind {
				t.Errorf("err = %v (kind %v), want kind %v", err, errkind.Of(err), tc.kind)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("err = %v, want %v", err, tc.wantErr)
			}
		})
	}
	r := NewEntryDumpReader(bytes.NewReader(good))
	if d, err := r.Next(); err != nil || !proto.Equal(d, dump(5, 1, 2)) {
		t.Fatalf("Next = %v, %v", d, err)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("Next at the end = %v, want io.EOF", err)
	}
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestAppendEntryDumpDoesNotAllocate(t *testing.T) {
	f, _ := newFile(t, "allocs")
	defer f.Close()
	ids := []int64{1, 2, 3, 4}
	bias := []float32{1, 2, 3, 4}
	emb := make([]float32, 4*16)
	if err := f.AppendEntryDump(ids, bias, emb); err != nil { // sizes the reused buffers
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(50, func() {
		if err := f.AppendEntryDump(ids, bias, emb); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("AppendEntryDump allocates %v times per call", n)
	}
}

// The hook in a run loop: each step appends, the loop stops after three, End closes the file.
func TestFileCloseHookInRunLoop(t *testing.T) {
	f, path := newFile(t, "loop/out")
	step := func(_ context.Context, rc *runhook.RunContext) error {
		if err := f.Append([]byte("s")); err != nil {
			return err
		}
		if rc.Step >= 2 {
			rc.RequestStop()
		}
		return nil
	}
	if err := runhook.Run(context.Background(), []runhook.Hook{NewFileCloseHook([]*WritableFile{f})}, step); err != nil {
		t.Fatal(err)
	}
	if got := string(readFile(t, path)); got != "sss" {
		t.Fatalf("file = %q, want sss", got)
	}
	if err := f.Append([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("file still open after the run: %v", err)
	}
}
