package dataset

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	examplepb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/example"
	parserpb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/parser"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/instance"
	"github.com/monolith-go/monolith/pkg/tfrecord"
)

// frame is one record of a PBFrames file and its headers.
type frame struct {
	lagrangex uint64
	sortID    string
	data      []byte
}

// appendFrame frames f as Monolith's writers do for the headers h says.
func appendFrame(b []byte, h instance.Header, f frame) []byte {
	u64 := binary.LittleEndian.AppendUint64
	switch {
	case h.Lagrangex:
		b = u64(b, f.lagrangex)
	default:
		if h.KafkaDumpPrefix {
			// A zero prefix, then a size the reader skips (data_reader.h reads it and then the
			// sort id size again).
			b = u64(u64(b, 0), 99)
		}
		if h.HasSortID {
			b = append(u64(b, uint64(len(f.sortID))), f.sortID...)
		}
		if h.KafkaDump {
			b = u64(b, 0x1122334455667788)
		}
	}
	return append(u64(b, uint64(len(f.data))), f.data...)
}

// compress returns b compressed with c.
func compress(t testing.TB, b []byte, c Compression) []byte {
	t.Helper()
	var out bytes.Buffer
	var w io.WriteCloser
	switch c {
	case NoCompression:
		return b
	case GZIP:
		w = gzip.NewWriter(&out)
	case ZLIB:
		w = zlib.NewWriter(&out)
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// writeRecords writes records as one file of the framing and compression of opts, and returns
// the offset of each record in the (decompressed) stream.
func writeRecords(t testing.TB, path string, opts Options, records [][]byte) []int64 {
	t.Helper()
	var b []byte
	var offsets []int64
	for i, r := range records {
		offsets = append(offsets, int64(len(b)))
		switch opts.Framing {
		case TFRecord:
			b = tfrecord.AppendRecord(b, r)
		case PBFrames:
			b = appendFrame(b, opts.Header, frame{lagrangex: uint64(i)<<8 | 0x07, sortID: "sid", data: r})
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, compress(t, b, opts.Compression), 0o644); err != nil {
		t.Fatal(err)
	}
	return offsets
}

// readAll reads every record of r (copies) and closes it.
func readAll(t testing.TB, r *Reader) ([]Record, error) {
	t.Helper()
	defer r.Close()
	var out []Record
	for {
		rec, err := r.Next(context.Background())
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, rec.Clone())
	}
}

func recordsOf(prefix string, n int) [][]byte {
	var out [][]byte
	for i := range n {
		out = append(out, fmt.Appendf(nil, "%s-%d", prefix, i))
	}
	return out
}

func TestReaderFramingsAndCompressions(t *testing.T) {
	headers := map[string]instance.Header{
		"plain":            {},
		"lagrangex":        {Lagrangex: true},
		"sort id":          {HasSortID: true},
		"kafka dump":       {KafkaDumpPrefix: true, HasSortID: true, KafkaDump: true},
		"sort id no kafka": {HasSortID: true, KafkaDump: false},
	}
	type variant struct {
		name string
		opts Options
	}
	var variants []variant
	for _, c := range []Compression{NoCompression, GZIP, ZLIB} {
		variants = append(variants, variant{fmt.Sprintf("tfrecord/%q", c), Options{Framing: TFRecord, Compression: c}})
		for hn, h := range headers {
			variants = append(variants, variant{fmt.Sprintf("pb %s/%q", hn, c), Options{Framing: PBFrames, Header: h, Compression: c}})
		}
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			dir := t.TempDir()
			a := filepath.Join(dir, "part-0")
			b := filepath.Join(dir, "part-1")
			offA := writeRecords(t, a, v.opts, append(recordsOf("a", 3), []byte{}))
			offB := writeRecords(t, b, v.opts, [][]byte{bytes.Repeat([]byte("big"), 100000)})
			// A small buffer, so records also straddle refills.
			opts := v.opts
			opts.BufferSize = 64
			r, err := Open([]string{filepath.Join(dir, "part-*")}, opts)
			if err != nil {
				t.Fatal(err)
			}
			got, err := readAll(t, r)
			if err != nil {
				t.Fatal(err)
			}
			want := []Record{
				{File: a, Offset: offA[0], Data: []byte("a-0")},
				{File: a, Offset: offA[1], Data: []byte("a-1")},
				{File: a, Offset: offA[2], Data: []byte("a-2")},
				{File: a, Offset: offA[3], Data: []byte{}},
				{File: b, Offset: offB[0], Data: bytes.Repeat([]byte("big"), 100000)},
			}
			if len(got) != len(want) {
				t.Fatalf("read %d records, want %d", len(got), len(want))
			}
			for i := range want {
				g, w := got[i], want[i]
				if g.File != w.File || g.Offset != w.Offset || !bytes.Equal(g.Data, w.Data) {
					t.Errorf("record %d: %s@%d (%d bytes), want %s@%d (%d bytes)", i, g.File, g.Offset, len(g.Data), w.File, w.Offset, len(w.Data))
				}
				if opts.Framing == PBFrames && opts.Header.Lagrangex {
					idx := uint64(i)
					if i == 4 {
						idx = 0
					}
					if g.Lagrangex != idx<<8|0x07 || g.PBType() != 0x07 || g.DataSourceKey() != uint32(idx<<8) {
						t.Errorf("record %d: lagrangex %#x (type %#x, source %#x)", i, g.Lagrangex, g.PBType(), g.DataSourceKey())
					}
				} else if g.Lagrangex != 0 {
					t.Errorf("record %d: lagrangex %#x without a lagrangex header", i, g.Lagrangex)
				}
			}
		})
	}
}

func TestFileWriterRoundTrip(t *testing.T) {
	for _, c := range []Compression{NoCompression, GZIP, ZLIB} {
		t.Run(fmt.Sprintf("%q", c), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "out.tfrecord")
			w, err := CreateFile(path, c)
			if err != nil {
				t.Fatal(err)
			}
			recs := recordsOf("r", 50)
			for _, r := range recs {
				if err := w.Write(r); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			// The file is compressed as asked: a plain TFRecord stream only without compression.
			plain := tfrecord.AppendRecord(nil, recs[0])
			if isPlain := bytes.HasPrefix(raw, plain); isPlain != (c == NoCompression) {
				t.Fatalf("file starts with a plain record: %v, compression %q", isPlain, c)
			}
			r, err := OpenFiles([]string{path}, Options{Compression: c})
			if err != nil {
				t.Fatal(err)
			}
			got, err := readAll(t, r)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(recs) {
				t.Fatalf("read %d records, want %d", len(got), len(recs))
			}
			for i := range recs {
				if !bytes.Equal(got[i].Data, recs[i]) {
					t.Fatalf("record %d = %q, want %q", i, got[i].Data, recs[i])
				}
			}
		})
	}
	if _, err := CreateFile(filepath.Join(t.TempDir(), "x"), "SNAPPY"); errkind.Of(err) != errkind.Value {
		t.Fatalf("CreateFile with SNAPPY: err = %v, want a Value error", err)
	}
	if _, err := CreateFile(filepath.Join(t.TempDir(), "no", "such", "dir"), NoCompression); err == nil || !strings.Contains(err.Error(), "dir") {
		t.Fatalf("CreateFile in a missing directory: err = %v", err)
	}
}

// TestSharding checks which records each of n workers reads, for more, as many and fewer files
// than workers: by file (worker i takes files i, i+n, ...) when there are at least n files, by
// record (record j of all files, in order, to worker j % n) otherwise.
func TestSharding(t *testing.T) {
	tests := []struct {
		name    string
		files   int
		perFile int
		workers int
		want    [][]string // per worker
	}{
		{name: "no sharding", files: 2, perFile: 2, workers: 1, want: [][]string{{"f0-0", "f0-1", "f1-0", "f1-1"}}},
		{name: "more files than workers", files: 5, perFile: 1, workers: 2, want: [][]string{{"f0-0", "f2-0", "f4-0"}, {"f1-0", "f3-0"}}},
		{name: "as many files as workers", files: 3, perFile: 2, workers: 3, want: [][]string{{"f0-0", "f0-1"}, {"f1-0", "f1-1"}, {"f2-0", "f2-1"}}},
		{name: "fewer files than workers: by record", files: 2, perFile: 3, workers: 4,
			want: [][]string{{"f0-0", "f1-1"}, {"f0-1", "f1-2"}, {"f0-2"}, {"f1-0"}}},
		{name: "one file and many workers", files: 1, perFile: 5, workers: 3, want: [][]string{{"f0-0", "f0-3"}, {"f0-1", "f0-4"}, {"f0-2"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for f := range tc.files {
				// Names that sort in file order.
				writeRecords(t, filepath.Join(dir, fmt.Sprintf("f%02d", f)), Options{}, recordsOf(fmt.Sprintf("f%d", f), tc.perFile))
			}
			var all []string
			for w := range tc.workers {
				r, err := Open([]string{dir + "/f*"}, Options{Shard: Shard{Index: w, Count: tc.workers}})
				if err != nil {
					t.Fatal(err)
				}
				recs, err := readAll(t, r)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, rec := range recs {
					got = append(got, string(rec.Data))
				}
				if !slices.Equal(got, tc.want[w]) {
					t.Errorf("worker %d read %q, want %q", w, got, tc.want[w])
				}
				all = append(all, got...)
			}
			// Together the workers read every record exactly once.
			slices.Sort(all)
			if len(all) != tc.files*tc.perFile || len(slices.Compact(all)) != len(all) {
				t.Errorf("workers read %d records (%d distinct), want each of %d once", len(all), len(slices.Compact(slices.Clone(all))), tc.files*tc.perFile)
			}
		})
	}
}

func TestShardValidation(t *testing.T) {
	for _, s := range []Shard{{Index: 2, Count: 2}, {Index: -1, Count: 3}, {Index: 1, Count: 1}, {Index: 0, Count: -2}} {
		if _, err := OpenFiles(nil, Options{Shard: s}); errkind.Of(err) != errkind.Value {
			t.Errorf("%+v: err = %v, want a Value error", s, err)
		}
	}
	for _, s := range []Shard{{}, {Index: 0, Count: 1}, {Index: 2, Count: 3}} {
		if _, err := OpenFiles(nil, Options{Shard: s}); err != nil {
			t.Errorf("%+v: %v", s, err)
		}
	}
}

func TestExclude(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"a", "b_tmp", "c"} {
		writeRecords(t, filepath.Join(dir, f), Options{}, [][]byte{[]byte(f)})
	}
	// Exclusion comes before sharding: the two files left are shared by file.
	opts := Options{Shard: Shard{Index: 1, Count: 2}, Exclude: func(p string) bool { return strings.HasSuffix(p, "_tmp") }}
	r, err := Open([]string{dir + "/*"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	got, err := readAll(t, r)
	if err != nil || len(got) != 1 || string(got[0].Data) != "c" {
		t.Fatalf("read %v, %v; want the record of c", got, err)
	}
}

// TestReadErrors checks that every bad input ends the reading with a *FileError naming the file
// and the offset of the bad record, after the good records before it.
func TestReadErrors(t *testing.T) {
	good := recordsOf("rec", 3)
	tf := tfrecord.AppendRecord(tfrecord.AppendRecord(nil, good[0]), good[1])
	second := int64(len(tfrecord.AppendRecord(nil, good[0])))
	pb := appendFrame(appendFrame(nil, instance.Header{}, frame{data: good[0]}), instance.Header{}, frame{data: good[1]})
	pbSecond := int64(8 + len(good[0]))
	flip := func(b []byte, i int) []byte { c := bytes.Clone(b); c[i] ^= 0x40; return c }
	gz := compress(t, tf, GZIP)
	gzBadCRC := bytes.Clone(gz)
	gzBadCRC[len(gzBadCRC)-8] ^= 0xff // the stream's CRC-32 in the gzip trailer
	tests := []struct {
		name    string
		content []byte // nil: the file does not exist
		dir     bool   // the path is a directory
		opts    Options
		records int
		offset  int64
		is      error
		msg     string
	}{
		{name: "data checksum mismatch", content: flip(tf, int(second)+tfrecord.HeaderLen+1), records: 1, offset: second, is: tfrecord.ErrCorrupt, msg: "corrupted record: data checksum"},
		{name: "length checksum mismatch", content: flip(tf, 2), offset: 0, is: tfrecord.ErrCorrupt, msg: "corrupted record: length checksum"},
		{name: "truncated record", content: tf[:len(tf)-3], records: 1, offset: second, is: tfrecord.ErrTruncated, msg: "truncated record: data checksum: got 1 of 4 bytes"},
		{name: "truncated header", content: tf[:second+5], records: 1, offset: second, is: tfrecord.ErrTruncated, msg: "header: got 5 of 12 bytes"},
		{name: "missing file", content: nil, offset: 0, is: os.ErrNotExist, msg: "open: no such file or directory"},
		{name: "directory", dir: true, offset: 0, msg: "is a directory"},
		{name: "empty gzip file", content: []byte{}, opts: Options{Compression: GZIP}, is: tfrecord.ErrTruncated, msg: "gzip header"},
		{name: "not gzip", content: tf, opts: Options{Compression: GZIP}, msg: "bad.data at offset 0: gzip header: gzip: invalid header"},
		{name: "not zlib", content: tf, opts: Options{Compression: ZLIB}, msg: "zlib header: zlib: invalid header"},
		{name: "truncated gzip stream", content: gz[:len(gz)-10], opts: Options{Compression: GZIP}, records: -1, is: tfrecord.ErrTruncated},
		{name: "gzip checksum mismatch", content: gzBadCRC, opts: Options{Compression: GZIP}, records: 2, offset: int64(len(tf)), is: gzip.ErrChecksum},
		{name: "corrupt record in a zlib file", content: compress(t, flip(tf, int(second)+tfrecord.HeaderLen), ZLIB), opts: Options{Compression: ZLIB}, records: 1, offset: second, is: tfrecord.ErrCorrupt, msg: "of the decompressed ZLIB stream"},
		{name: "truncated frame", content: pb[:len(pb)-2], opts: Options{Framing: PBFrames}, records: 1, offset: pbSecond, is: io.ErrUnexpectedEOF, msg: "truncated record of 5 bytes (got 3)"},
		{name: "fallback frame size", content: binary.LittleEndian.AppendUint64(bytes.Clone(pb), instance.FallbackSize), opts: Options{Framing: PBFrames}, records: 2, offset: int64(len(pb)), is: instance.ErrFallbackSize},
		{name: "gzip file read without compression", content: gz, offset: 0, is: tfrecord.ErrCorrupt, msg: "(the file starts with gzip's magic bytes: read it with compression GZIP (--compression=GZIP))"},
		{name: "zlib file read without compression", content: compress(t, tf, ZLIB), offset: 0, is: tfrecord.ErrCorrupt, msg: "(the file starts with a zlib header: read it with compression ZLIB (--compression=ZLIB))"},
		{name: "frame with a sort id too long", content: append(binary.LittleEndian.AppendUint64(nil, 100), "short"...), opts: Options{Framing: PBFrames, Header: instance.Header{HasSortID: true}}, is: io.ErrUnexpectedEOF, msg: "truncated sort id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.data")
			switch {
			case tc.dir:
				if err := os.Mkdir(path, 0o755); err != nil {
					t.Fatal(err)
				}
			case tc.content != nil:
				if err := os.WriteFile(path, tc.content, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			r, err := OpenFiles([]string{path}, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			recs, err := readAll(t, r)
			if tc.records >= 0 && len(recs) != tc.records {
				t.Errorf("read %d good records, want %d", len(recs), tc.records)
			}
			var fe *FileError
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v (%T), want a *FileError", err, err)
			}
			if fe.File != path || !strings.Contains(err.Error(), path) {
				t.Errorf("error names %q (%v), want %s", fe.File, err, path)
			}
			if tc.records >= 0 {
				if fe.Offset != tc.offset || !strings.Contains(err.Error(), fmt.Sprintf(" at offset %d", tc.offset)) {
					t.Errorf("error at offset %d (%v), want %d", fe.Offset, err, tc.offset)
				}
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("err = %v, want it to wrap %v", err, tc.is)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("err = %v, want it to contain %q", err, tc.msg)
			}
			// Errors are sticky.
			if _, again := r.Next(context.Background()); again == nil || again == io.EOF {
				t.Errorf("Next after the error = %v, want the error again", again)
			}
		})
	}
}

// After a bad file the Reader stops: later files are not read, and the error stays.
func TestReaderStopsAtTheFirstBadFile(t *testing.T) {
	dir := t.TempDir()
	writeRecords(t, filepath.Join(dir, "1"), Options{}, recordsOf("one", 2))
	if err := os.WriteFile(filepath.Join(dir, "2"), []byte("garbage, not a record"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeRecords(t, filepath.Join(dir, "3"), Options{}, recordsOf("three", 2))
	r, err := Open([]string{dir + "/*"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := readAll(t, r)
	if len(recs) != 2 || !errors.Is(err, tfrecord.ErrCorrupt) || !strings.Contains(err.Error(), filepath.Join(dir, "2")+" at offset 0") {
		t.Fatalf("read %d records, err %v; want 2 and a corrupt record in %s at offset 0", len(recs), err, filepath.Join(dir, "2"))
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name     string
		patterns []string
		opts     Options
		kind     errkind.Kind
	}{
		{"no file", []string{dir + "/*"}, Options{}, errkind.NotFound},
		{"bad pattern", []string{dir + "/[x"}, Options{}, errkind.Value},
		{"bad compression", []string{dir + "/*"}, Options{Compression: "LZ4"}, errkind.Value},
		{"bad framing", []string{dir + "/*"}, Options{Framing: 7}, errkind.Value},
		{"bad shard", []string{dir + "/*"}, Options{Shard: Shard{Index: 3, Count: 2}}, errkind.Value},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Open(tc.patterns, tc.opts); errkind.Of(err) != tc.kind {
				t.Fatalf("err = %v (kind %v), want kind %v", err, errkind.Of(err), tc.kind)
			}
		})
	}
	// NewReader defers the checks to the first Next.
	l := fileList{dir + "/x"}
	if _, err := NewReader(&l, Options{Compression: "LZ4"}).Next(context.Background()); errkind.Of(err) != errkind.Value {
		t.Fatalf("NewReader with a bad compression: Next = %v, want a Value error", err)
	}
}

func TestReaderContext(t *testing.T) {
	dir := t.TempDir()
	writeRecords(t, filepath.Join(dir, "a"), Options{}, recordsOf("a", 2*ctxCheckEvery))
	writeRecords(t, filepath.Join(dir, "b"), Options{}, recordsOf("b", 1))
	r, err := Open([]string{dir + "/*"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := r.Next(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	// The cancellation is seen within ctxCheckEvery records.
	n := 0
	for ; n <= ctxCheckEvery; n++ {
		if _, err = r.Next(ctx); err != nil {
			break
		}
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("after cancel: %d records, then %v; want context.Canceled", n, err)
	}
	// A context error is not sticky: with a live context, reading goes on.
	rest, err := readAll(t, r)
	if err != nil || len(rest) != 2*ctxCheckEvery-1-n+1 {
		t.Fatalf("after the cancel, read %d more records, %v; want %d", len(rest), err, 2*ctxCheckEvery-n)
	}
}

func TestReaderClose(t *testing.T) {
	dir := t.TempDir()
	writeRecords(t, filepath.Join(dir, "a"), Options{}, recordsOf("a", 3))
	r, err := Open([]string{dir + "/a"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(context.Background()); err != io.EOF {
		t.Fatalf("Next after Close = %v, want io.EOF", err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
}

// TestMessages reads each record kind from both framings, with the lagrangex header's data source
// key set on the protos as the reference's reader does.
func TestMessages(t *testing.T) {
	leakcheck.Check(t)
	inst := &parserpb.Instance{Fid: []uint64{1, 2, 3}, Label: []float32{1}}
	ex := &examplepb.Example{Label: []float32{0.5}, InstanceWeight: 2}
	eb := &examplepb.ExampleBatch{BatchSize: 7}
	for _, opts := range []Options{
		{Framing: TFRecord},
		{Framing: PBFrames, Header: instance.Header{Lagrangex: true}, Compression: GZIP},
		{Framing: PBFrames, Header: instance.Header{HasSortID: true}},
	} {
		lagrangex := opts.Framing == PBFrames && opts.Header.Lagrangex
		t.Run(fmt.Sprintf("%v %+v", opts.Framing, opts.Header), func(t *testing.T) {
			dir := t.TempDir()
			write := func(name string, m proto.Message) string {
				b, err := proto.Marshal(m)
				if err != nil {
					t.Fatal(err)
				}
				p := filepath.Join(dir, name)
				writeRecords(t, p, opts, [][]byte{b, b})
				return p
			}
			ctx := context.Background()
			open := func(p string) *Reader {
				r, err := OpenFiles([]string{p}, opts)
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			// The second record's lagrangex header is 1<<8 | 7: data source key 0x100.
			var key uint32
			if lagrangex {
				key = 0x100
			}
			is := Instances(open(write("inst", inst)))
			is.Next(ctx)
			gotInst, err := is.Next(ctx)
			if err != nil || !slices.Equal(gotInst.GetFid(), inst.Fid) || gotInst.GetDataSourceKey() != key || (gotInst.DataSourceKey != nil) != lagrangex {
				t.Errorf("Instance = %v, %v; want fids %v, data source key %#x", gotInst, err, inst.Fid, key)
			}
			es := Examples(open(write("ex", ex)))
			es.Next(ctx)
			gotEx, err := es.Next(ctx)
			if err != nil || gotEx.GetInstanceWeight() != 2 || gotEx.GetDataSourceKey() != key {
				t.Errorf("Example = %v, %v; want weight 2, data source key %#x", gotEx, err, key)
			}
			bs := ExampleBatches(open(write("eb", eb)))
			bs.Next(ctx)
			gotEB, err := bs.Next(ctx)
			if err != nil || gotEB.GetBatchSize() != 7 || gotEB.GetDataSourceKey() != key {
				t.Errorf("ExampleBatch = %v, %v; want batch size 7, data source key %#x", gotEB, err, key)
			}
			if _, err := bs.Next(ctx); err != io.EOF {
				t.Errorf("after the last record: %v, want io.EOF", err)
			}
			for _, m := range []interface{ Reader() *Reader }{is, es, bs} {
				m.Reader().Close()
			}
		})
	}
}

func TestMessagesParseError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.gz")
	good, _ := proto.Marshal(&parserpb.Instance{Fid: []uint64{9}})
	offs := writeRecords(t, path, Options{Compression: GZIP}, [][]byte{good, {0xff, 0xff, 0xff}})
	r, err := OpenFiles([]string{path}, Options{Compression: GZIP})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	m := Instances(r)
	if _, err := m.Next(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, err = m.Next(context.Background())
	var fe *FileError
	want := fmt.Sprintf("dataset: %s at offset %d of the decompressed GZIP stream: parse parser.proto.Instance", path, offs[1])
	if !errors.As(err, &fe) || fe.Offset != offs[1] || errkind.Of(err) != errkind.Value || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("err = %v, want a Value *FileError starting %q", err, want)
	}
}

// The reference-written lagrangex dump (a copy of pkg/instance's fixture, written by the
// reference's tools): header 0xdeadbeef, so data source key 0xdeadbe00.
func TestReferenceDump(t *testing.T) {
	r, err := Open([]string{"testdata/example_batch.lagrangex.pb"}, Options{Framing: PBFrames, Header: instance.Header{Lagrangex: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	eb, err := ExampleBatches(r).Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if eb.GetDataSourceKey() != 0xdeadbe00 || eb.GetBatchSize() == 0 || len(eb.GetNamedFeatureList()) == 0 {
		t.Fatalf("ExampleBatch: data source key %#x, batch size %d, %d feature lists", eb.GetDataSourceKey(), eb.GetBatchSize(), len(eb.GetNamedFeatureList()))
	}
}

func TestNewMessage(t *testing.T) {
	for k, want := range map[Kind]string{KindInstance: "parser.proto.Instance", KindExample: "monolith.io.proto.Example", KindExampleBatch: "monolith.io.proto.ExampleBatch"} {
		m, err := NewMessage(k)
		if err != nil || string(m.ProtoReflect().Descriptor().FullName()) != want {
			t.Errorf("%v: %v, %v; want %s", k, m, err, want)
		}
	}
	if _, err := NewMessage(KindPlainText); errkind.Of(err) != errkind.Value {
		t.Errorf("plaintext: err = %v, want a Value error", err)
	}
}
