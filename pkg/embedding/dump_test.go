package embedding

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	hashtablepb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/tfrecord"
)

// fillTable applies a random gradient to n random ids (several times to some, so that optimizer
// states differ) and returns the ids.
func fillTable(t *testing.T, tb *Table, n int, seed uint64, ts int64) []int64 {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 99))
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(rng.Uint64())
	}
	for round := 0; round < 3; round++ {
		grads := make([]float32, n*tb.Dim())
		for i := range grads {
			grads[i] = rng.Float32() - 0.5
		}
		if err := tb.Apply(ids[:n-round*n/4], grads[:(n-round*n/4)*tb.Dim()], lr(0.1), int64(round), ts+int64(round)); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// sameEntries fails unless every id has the same entry (numbers, optimizer dump, time) in a and b.
func sameEntries(t *testing.T, a, b *Table, ids []int64) {
	t.Helper()
	for _, id := range ids {
		da, oka := a.LookupEntry(id)
		db, okb := b.LookupEntry(id)
		if oka != okb || !proto.Equal(da, db) {
			t.Fatalf("id %d: entry %v (%v), want %v (%v)", id, db, okb, da, oka)
		}
	}
}

func adagradTable(t *testing.T, dim int) *Table {
	return newTable(t, Config{Dim: dim, Optimizer: testAdagrad{dim: dim, init: 0.1}, Initializer: constInit(0.5)})
}

func TestSaveRestoreRoundTrip(t *testing.T) {
	tests := []struct {
		name     string
		nshards  int
		wantFile int
		entries  int
	}{
		{name: "one file", nshards: 1, wantFile: 1, entries: 500},
		{name: "three files", nshards: 3, wantFile: 3, entries: 2000},
		{name: "more files than stripes", nshards: 100, wantFile: 100, entries: 300},
		{name: "automatic: one per million entries, at least one", nshards: -1, wantFile: 1, entries: 1000},
		{name: "empty table", nshards: 2, wantFile: 2, entries: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			src := adagradTable(t, 4)
			var ids []int64
			if tc.entries > 0 {
				ids = fillTable(t, src, tc.entries, 1, 1000)
			}
			base := filepath.Join(t.TempDir(), "model.assets", "table")
			if err := src.Save(context.Background(), base, tc.nshards); err != nil {
				t.Fatal(err)
			}
			files, err := ShardedFiles(base)
			if err != nil {
				t.Fatal(err)
			}
			if len(files) != tc.wantFile {
				t.Fatalf("%d files, want %d", len(files), tc.wantFile)
			}
			if want := ShardedFileName(base, 0, tc.wantFile); files[0] != want || !strings.HasSuffix(want, fmt.Sprintf("-00000-of-%05d", tc.wantFile)) {
				t.Fatalf("first file %s, want %s", files[0], want)
			}
			dst := adagradTable(t, 4)
			// Restore replaces what the table held.
			if err := dst.Assign([]int64{-5}, []float32{1, 2, 3, 4}, 7); err != nil {
				t.Fatal(err)
			}
			n, err := dst.Restore(context.Background(), []string{base}, ShardSpec{})
			if err != nil {
				t.Fatal(err)
			}
			if n != src.Size() || dst.Size() != src.Size() {
				t.Fatalf("restored %d entries, table has %d, want %d", n, dst.Size(), src.Size())
			}
			sameEntries(t, src, dst, append(ids, -5))
			// The latest update time only grows, as the reference's does (the assign's 7 stays).
			if want := max(src.MaxUpdateTsSec(), 7); dst.MaxUpdateTsSec() != want {
				t.Fatalf("max update time %d, want %d", dst.MaxUpdateTsSec(), want)
			}
			if tc.entries == 0 {
				return
			}
			// The optimizer state came back: the same step gives the same result on both.
			grads := make([]float32, 4*len(ids))
			for i := range grads {
				grads[i] = 0.25
			}
			for _, tb := range []*Table{src, dst} {
				if err := tb.Apply(ids, grads, lr(0.1), 9, 2000); err != nil {
					t.Fatal(err)
				}
			}
			sameEntries(t, src, dst, ids)
		})
	}
}

// TestSaveWritesEntryDumps reads a dump back with pkg/tfrecord alone: the records are EntryDump
// protos with the id, the embedding, the optimizer dump and the last update time.
func TestSaveWritesEntryDumps(t *testing.T) {
	tb := adagradTable(t, 2)
	if err := tb.Assign([]int64{42}, []float32{1.5, -2}, 1234); err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(t.TempDir(), "t")
	if err := tb.Save(context.Background(), base, 1); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(ShardedFileName(base, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data, err := tfrecord.NewReader(f).Next()
	if err != nil {
		t.Fatal(err)
	}
	var d hashtablepb.EntryDump
	if err := proto.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	want := &hashtablepb.EntryDump{Id: proto.Int64(42), Num: []float32{1.5, -2}, Opt: testAdagrad{dim: 2, init: 0.1}.Dump([]float32{0.1, 0.1}), LastUpdateTsSec: proto.Int64(1234)}
	if !proto.Equal(&d, want) {
		t.Fatalf("record %v, want %v", &d, want)
	}
}

// TestRestoreReshards dumps the tables of 2 parameter servers (ids routed by Shard(id, 2)) and
// restores them into 3: each new table holds exactly the ids with Shard(id, 3) == its index,
// with their entries unchanged.
func TestRestoreReshards(t *testing.T) {
	leakcheck.Check(t)
	dir := t.TempDir()
	all := adagradTable(t, 3)
	ids := fillTable(t, all, 3000, 5, 100)
	var bases []string
	for ps := 0; ps < 2; ps++ {
		part := adagradTable(t, 3)
		for _, id := range ids {
			if Shard(id, 2) != ps {
				continue
			}
			d, _ := all.LookupEntry(id)
			if err := part.restoreEntry(d); err != nil {
				t.Fatal(err)
			}
		}
		base := filepath.Join(dir, fmt.Sprintf("ps_%d", ps), "table")
		if err := part.Save(context.Background(), base, 2+ps); err != nil {
			t.Fatal(err)
		}
		bases = append(bases, base)
	}
	total := 0
	for ps := 0; ps < 3; ps++ {
		part := adagradTable(t, 3)
		n, err := part.Restore(context.Background(), bases, ShardSpec{Index: ps, Total: 3})
		if err != nil {
			t.Fatal(err)
		}
		total += n
		for _, id := range ids {
			if got, want := part.Contains(id), Shard(id, 3) == ps; got != want {
				t.Fatalf("ps %d of 3: contains(%d) = %v, want %v", ps, id, got, want)
			}
			if part.Contains(id) {
				sameEntries(t, all, part, []int64{id})
			}
		}
	}
	if total != len(ids) {
		t.Fatalf("restored %d entries over 3 tables, want %d", total, len(ids))
	}
}

func TestShardedFiles(t *testing.T) {
	tests := []struct {
		name     string
		files    []string
		want     []string
		wantKind errkind.Kind
		wantMsg  string
	}{
		{name: "complete set; temporary and other files ignored", files: []string{"t-00000-of-00002", "t-00001-of-00002", "t-00001-of-00002-tmp-99", "t2-00000-of-00001", "t-x"}, want: []string{"t-00000-of-00002", "t-00001-of-00002"}},
		{name: "no file", files: []string{"other-00000-of-00001"}, wantKind: errkind.NotFound, wantMsg: "no valid sharded files"},
		{name: "missing shard", files: []string{"t-00000-of-00003", "t-00002-of-00003"}, wantKind: errkind.NotFound, wantMsg: "shard 1 of 3 is missing"},
		{name: "two shard counts", files: []string{"t-00000-of-00002", "t-00000-of-00003", "t-00001-of-00002"}, wantKind: errkind.Value, wantMsg: "doesn't match nshards"},
		{name: "shard past the count", files: []string{"t-00005-of-00002"}, wantKind: errkind.Value, wantMsg: "exceeds"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := ShardedFiles(filepath.Join(dir, "t"))
			if tc.wantMsg != "" {
				if err == nil || errkind.Of(err) != tc.wantKind || !strings.Contains(err.Error(), tc.wantMsg) {
					t.Fatalf("error %v (kind %v), want kind %v with %q", err, errkind.Of(err), tc.wantKind, tc.wantMsg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i := range got {
				got[i] = filepath.Base(got[i])
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("files %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRestoreCorruptDump checks that a bad dump file is an error naming the file and where in it
// the bad record starts.
func TestRestoreCorruptDump(t *testing.T) {
	record := func(m proto.Message) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return tfrecord.AppendRecord(nil, b)
	}
	good := record(&hashtablepb.EntryDump{Id: proto.Int64(1), Num: []float32{1, 2}})
	tests := []struct {
		name    string
		content func() []byte
		wantMsg string
	}{
		{name: "flipped data byte in the second record", content: func() []byte {
			b := append(append([]byte{}, good...), good...)
			b[len(good)+14] ^= 0x40
			return b
		}, wantMsg: fmt.Sprintf("at offset %d", len(good))},
		{name: "truncated record", content: func() []byte {
			b := append(append([]byte{}, good...), good...)
			return b[:len(b)-3]
		}, wantMsg: fmt.Sprintf("truncated record at offset %d", len(good))},
		{name: "record that is not an EntryDump", content: func() []byte {
			return append(append([]byte{}, good...), tfrecord.AppendRecord(nil, []byte{0xff, 0xff, 0xff})...)
		}, wantMsg: fmt.Sprintf("record at offset %d: not an EntryDump", len(good))},
		{name: "entry of another dimension", content: func() []byte {
			return append(append([]byte{}, good...), record(&hashtablepb.EntryDump{Id: proto.Int64(2), Num: []float32{1, 2, 3}})...)
		}, wantMsg: fmt.Sprintf("record at offset %d: entry 2 has 3 numbers, the table's dimension is 2", len(good))},
		{name: "optimizer dump of another optimizer", content: func() []byte {
			return append(append([]byte{}, good...), record(&hashtablepb.EntryDump{Id: proto.Int64(3), Num: []float32{1, 2}, Opt: testSGD{}.Dump(nil)})...)
		}, wantMsg: fmt.Sprintf("record at offset %d: entry 3: optimizer dump", len(good))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			dir := t.TempDir()
			base := filepath.Join(dir, "t")
			if err := os.WriteFile(ShardedFileName(base, 0, 2), good, 0o644); err != nil {
				t.Fatal(err)
			}
			bad := ShardedFileName(base, 1, 2)
			if err := os.WriteFile(bad, tc.content(), 0o644); err != nil {
				t.Fatal(err)
			}
			tb := adagradTable(t, 2)
			_, err := tb.Restore(context.Background(), []string{base}, ShardSpec{})
			if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Fatalf("error %v, want one naming %s and %q", err, bad, tc.wantMsg)
			}
		})
	}
}

func TestRestoreStopsWithContext(t *testing.T) {
	leakcheck.Check(t)
	src := adagradTable(t, 2)
	fillTable(t, src, 10000, 3, 10)
	base := filepath.Join(t.TempDir(), "t")
	if err := src.Save(context.Background(), base, 2); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := adagradTable(t, 2).Restore(ctx, []string{base}, ShardSpec{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	if err := src.Save(ctx, filepath.Join(t.TempDir(), "u"), 2); !errors.Is(err, context.Canceled) {
		t.Fatalf("save error %v, want context.Canceled", err)
	}
}

func TestRestoreSkipsZeroEmbeddings(t *testing.T) {
	src := adagradTable(t, 2)
	if err := src.Assign([]int64{1, 2}, []float32{0, 0, 1, 0}, 5); err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(t.TempDir(), "t")
	if err := src.Save(context.Background(), base, 1); err != nil {
		t.Fatal(err)
	}
	dst := newTable(t, Config{Dim: 2, Optimizer: testAdagrad{dim: 2, init: 0.1}, Initializer: constInit(0.5), SkipZeroEmbedding: true})
	if n, err := dst.Restore(context.Background(), []string{base}, ShardSpec{}); err != nil || n != 1 || dst.Contains(1) || !dst.Contains(2) {
		t.Fatalf("restored %d (%v): contains(1)=%v contains(2)=%v, want only id 2", n, err, dst.Contains(1), dst.Contains(2))
	}
	// Assigning zeros erases.
	if err := dst.Assign([]int64{2}, []float32{0, 0}, 6); err != nil || dst.Contains(2) {
		t.Fatalf("assign zeros: %v, contains(2)=%v", err, dst.Contains(2))
	}
}
