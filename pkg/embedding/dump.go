package embedding

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/proto"

	hashtablepb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/tfrecord"
)

// ShardedFileName is the name of shard i of n of a dump (file_utils' GetShardedFileName).
func ShardedFileName(basename string, i, n int) string {
	return fmt.Sprintf("%s-%05d-of-%05d", basename, i, n)
}

var shardSuffix = regexp.MustCompile(`^-(\d{5})-of-(\d{5})$`)

// ShardedFiles returns the files of the sharded dump basename, in shard order, checking that
// they form one complete set (ValidateShardedFiles): files of basename whose suffix is not
// "-NNNNN-of-NNNNN" (temporary files, say) are ignored.
func ShardedFiles(basename string) ([]string, error) {
	dir, prefix := filepath.Split(basename)
	if dir == "" {
		dir = "."
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, errkind.Wrap(errkind.NotFound, fmt.Errorf("dump %s: %w", basename, err))
	}
	var seen []bool
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		m := shardSuffix.FindStringSubmatch(name[len(prefix):])
		if m == nil {
			continue
		}
		shard, _ := strconv.Atoi(m[1])
		n, _ := strconv.Atoi(m[2])
		if seen == nil {
			seen = make([]bool, n)
		}
		if n != len(seen) {
			return nil, errkind.New(errkind.Value, "dump %s: file %s doesn't match nshards %d", basename, name, len(seen))
		}
		if shard >= n {
			return nil, errkind.New(errkind.Value, "dump %s: shard %d exceeds %d for %s", basename, shard, n, name)
		}
		seen[shard] = true
	}
	if len(seen) == 0 {
		return nil, errkind.New(errkind.NotFound, "there are no valid sharded files for %s", basename)
	}
	files := make([]string, len(seen))
	for i, ok := range seen {
		if !ok {
			return nil, errkind.New(errkind.NotFound, "dump %s: shard %d of %d is missing", basename, i, len(seen))
		}
		files[i] = ShardedFileName(basename, i, len(seen))
	}
	return files, nil
}

// Staged is a sharded dump written to temporary files next to its own, not yet in place: Commit
// puts it in place, Abort removes it. Until Commit, readers of the basename see the dump that was
// there before, if any; so a save that fails or is abandoned half-way leaves no new files that
// look like a dump.
type Staged struct {
	basename string
	tmp      []string // by shard; "" for a shard not written
}

// Files are the names the dump's files have once committed, in shard order.
func (s *Staged) Files() []string {
	out := make([]string, len(s.tmp))
	for i := range s.tmp {
		out[i] = ShardedFileName(s.basename, i, len(s.tmp))
	}
	return out
}

// Commit removes the files of an earlier dump of the basename (of any shard count) and renames
// the staged files into place. A crash half-way leaves shards missing, which ShardedFiles
// reports, never a mix of two dumps.
func (s *Staged) Commit() error {
	if slices.Contains(s.tmp, "") {
		return errkind.New(errkind.Precondition, "commit %s: the dump is not complete", s.basename)
	}
	dir, prefix := filepath.Split(s.basename)
	if dir == "" {
		dir = "."
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		s.Abort()
		return fmt.Errorf("commit %s: %w", s.basename, err)
	}
	for _, e := range entries {
		if name := e.Name(); strings.HasPrefix(name, prefix) && shardSuffix.MatchString(name[len(prefix):]) {
			if err := os.Remove(filepath.Join(dir, name)); err != nil && !os.IsNotExist(err) {
				s.Abort()
				return fmt.Errorf("commit %s: remove the earlier dump: %w", s.basename, err)
			}
		}
	}
	for i, name := range s.Files() {
		if err := os.Rename(s.tmp[i], name); err != nil {
			s.Abort()
			return fmt.Errorf("commit %s: %w", s.basename, err)
		}
		s.tmp[i] = ""
	}
	return nil
}

// Abort removes the staged files that are not in place yet.
func (s *Staged) Abort() {
	for i, tmp := range s.tmp {
		if tmp != "" {
			os.Remove(tmp)
			s.tmp[i] = ""
		}
	}
}

// stageShards writes the n shard files of basename to temporary files, fill writing shard i's
// records, at most limit at a time (0: no limit), until ctx ends: then, or at an error, it removes
// what it wrote.
func stageShards(ctx context.Context, basename string, n, limit int, fill func(ctx context.Context, i int, write func(proto.Message) error) error) (*Staged, error) {
	st := &Staged{basename: basename, tmp: make([]string, n)}
	g, gctx := errgroup.WithContext(ctx)
	if limit > 0 {
		g.SetLimit(limit)
	}
	for i := 0; i < n && gctx.Err() == nil; i++ {
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			tmp, err := writeTemp(basename, i, n, func(write func(proto.Message) error) error { return fill(gctx, i, write) })
			st.tmp[i] = tmp
			return err
		})
	}
	err := g.Wait()
	if err == nil {
		// The loop stops early when ctx ends, maybe before any shard saw it.
		err = ctx.Err()
	}
	if err != nil {
		st.Abort()
		return nil, err
	}
	return st, nil
}

// writeTemp writes shard file i of n of basename to a temporary file next to it and returns its
// name ("" after an error, when it is removed).
func writeTemp(basename string, i, n int, fill func(write func(proto.Message) error) error) (_ string, err error) {
	name := ShardedFileName(basename, i, n)
	tmp := fmt.Sprintf("%s-tmp-%d", name, rand.Uint64())
	f, err := os.Create(tmp)
	if err != nil {
		return "", fmt.Errorf("write %s: %w", name, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	w := tfrecord.NewWriter(bw)
	var buf []byte
	write := func(m proto.Message) error {
		b, err := proto.MarshalOptions{}.MarshalAppend(buf[:0], m)
		if err != nil {
			return err
		}
		buf = b
		return w.Write(b)
	}
	if err := fill(write); err != nil {
		return "", fmt.Errorf("write %s: %w", name, err)
	}
	if err := bw.Flush(); err != nil {
		return "", fmt.Errorf("write %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("write %s: %w", name, err)
	}
	return tmp, nil
}

// readRecords calls fn with each record of file and its offset; a bad record, or an error of fn,
// is returned naming the file and the record's offset.
func readRecords(ctx context.Context, file string, fn func(data []byte) error) error {
	f, err := os.Open(file)
	if err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	defer f.Close()
	sc := tfrecord.NewScanner(f, tfrecord.DefaultScanBufferSize)
	for n := 0; ; n++ {
		if n%readCheckEvery == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("read %s: %w", file, err)
			}
		}
		data, err := sc.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			// A RecordError names the offset itself.
			return fmt.Errorf("read %s: %w", file, err)
		}
		if err := fn(data); err != nil {
			return fmt.Errorf("read %s: record at offset %d: %w", file, sc.RecordOffset(), err)
		}
	}
}

// readCheckEvery is how many records a reader reads between looks at its context (a filter's
// record is 40 kB: 256 of them are read in a few milliseconds).
const readCheckEvery = 256

// defaultShards is the reference's automatic shard count (nshards=-1): one per million entries,
// between 1 and 4.
func defaultShards(size int) int { return min(4, max(1, size/1000000)) }

// Save dumps the table to nshards files basename-NNNNN-of-NNNNN (nshards < 0: one per million
// entries, 1 to 4), each holding the EntryDump records (id, embedding, optimizer dump, last
// update time) of its share of the stripes. Entries expired as of MaxUpdateTsSec are left out,
// as the reference's save does. The table is read-locked throughout, so the dump is one
// consistent snapshot; lookups go on meanwhile. It is SaveStaged and Commit: until ctx ends,
// and a save that fails or is cut short leaves the files of basename as they were.
func (t *Table) Save(ctx context.Context, basename string, nshards int) error {
	st, err := t.SaveStaged(ctx, basename, nshards)
	if err != nil {
		return err
	}
	return st.Commit()
}

// SaveStaged writes the dump Save writes to temporary files, for the caller to Commit (once
// every part of a larger dump is staged, say) or Abort. It stops when ctx ends, removing what it
// wrote.
func (t *Table) SaveStaged(ctx context.Context, basename string, nshards int) (*Staged, error) {
	if nshards == 0 {
		return nil, errkind.New(errkind.Value, "save %s: 0 shards", basename)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("save %s: %w", basename, err)
	}
	if err := os.MkdirAll(filepath.Dir(basename), 0o755); err != nil {
		return nil, fmt.Errorf("save %s: %w", basename, err)
	}
	unlock := t.lockAll(false)
	defer unlock()
	if nshards < 0 {
		n := 0
		for i := range t.stripes {
			n += t.stripes[i].count
		}
		nshards = defaultShards(n)
	}
	maxTs := t.MaxUpdateTsSec()
	st, err := stageShards(ctx, basename, nshards, int(t.workers.Load()), func(ctx context.Context, i int, write func(proto.Message) error) error {
		n := 0
		var err error
		for si := i; si < len(t.stripes) && err == nil; si += nshards {
			s := &t.stripes[si]
			s.each(t.g, func(hd *slotHeader, p int) bool {
				if t.expire.expired(hd.key, hd.ts, maxTs) {
					return true
				}
				if n++; n%1024 == 0 {
					if err = ctx.Err(); err != nil {
						return false
					}
				}
				err = write(t.entryDump(s, p))
				return err == nil
			})
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("save %s: %w", basename, err)
	}
	return st, nil
}

// ShardSpec selects the ids a restoring table keeps: those with Shard(id, Total) == Index. A
// Total of 0 or 1 keeps every id.
type ShardSpec struct {
	Index, Total int
}

func (s ShardSpec) keeps(id int64) bool { return s.Total <= 1 || Shard(id, s.Total) == s.Index }

// Restore replaces the table's entries with those of the dumps basenames (each a complete set of
// sharded files, possibly written with another shard count) that shard keeps (and, with
// SkipZeroEmbedding, whose embedding is not zero). Restoring a
// parameter server's table from the dumps of all servers of a job with another number of
// servers re-routes the ids. An entry without an optimizer dump gets a fresh optimizer state.
// A bad file is an error naming it and the record's offset; the table is then partly restored.
// It returns the number of entries restored.
func (t *Table) Restore(ctx context.Context, basenames []string, shard ShardSpec) (int, error) {
	if shard.Total > 1 && (shard.Index < 0 || shard.Index >= shard.Total) {
		return 0, errkind.New(errkind.Value, "restore: shard %d of %d", shard.Index, shard.Total)
	}
	var files []string
	for _, b := range basenames {
		fs, err := ShardedFiles(b)
		if err != nil {
			return 0, fmt.Errorf("restore: %w", err)
		}
		files = append(files, fs...)
	}
	t.Clear()
	counts := make([]int, len(files))
	maxTs := make([]int64, len(files))
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(int(t.workers.Load()))
	for fi, file := range files {
		g.Go(func() error {
			d := &hashtablepb.EntryDump{}
			return readRecords(ctx, file, func(data []byte) error {
				d.Reset()
				if err := proto.Unmarshal(data, d); err != nil {
					return errkind.Wrap(errkind.Value, fmt.Errorf("not an EntryDump: %w", err))
				}
				if !shard.keeps(d.GetId()) || t.skipZero && isZero(d.GetNum()) {
					return nil
				}
				if err := t.restoreEntry(d); err != nil {
					return err
				}
				counts[fi]++
				maxTs[fi] = max(maxTs[fi], d.GetLastUpdateTsSec())
				return nil
			})
		})
	}
	err := g.Wait()
	n := 0
	for fi := range files {
		n += counts[fi]
		t.noteUpdate(maxTs[fi])
	}
	if err != nil {
		return n, fmt.Errorf("restore: %w", err)
	}
	return n, nil
}

// restoreEntry writes one dumped entry into the table.
func (t *Table) restoreEntry(d *hashtablepb.EntryDump) error {
	g := t.g
	if len(d.GetNum()) != g.dim {
		return errkind.New(errkind.Value, "entry %d has %d numbers, the table's dimension is %d", d.GetId(), len(d.GetNum()), g.dim)
	}
	id := d.GetId()
	h := mix(id)
	s := t.stripeOf(h)
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.find(g, id, h)
	if p < 0 {
		p = s.insert(g, id, h)
	}
	copy(s.emb(g, p), d.GetNum())
	if st := s.state(g, p); d.Opt == nil {
		t.opt.Init(st)
	} else if err := t.opt.Load(st, d.Opt); err != nil {
		// The entry must not keep a half-restored state.
		s.remove(g, p)
		return fmt.Errorf("entry %d: optimizer dump: %w", id, err)
	}
	s.hdr(p).ts = uint32(d.GetLastUpdateTsSec())
	return nil
}

// SaveFilter writes the sliding filter's splits to basename-NNNNN-of-NNNNN, one file per split
// (MonolithHashFilterSave): a HashFilterSplitMetaDump record, then HashFilterSplitDataDump
// records. It is SaveFilterStaged and Commit.
func SaveFilter(ctx context.Context, f *SlidingHashFilter, basename string) error {
	st, err := SaveFilterStaged(ctx, f, basename)
	if err != nil {
		return err
	}
	return st.Commit()
}

// SaveFilterStaged writes the files SaveFilter writes to temporary files, for the caller to
// Commit or Abort, until ctx ends.
func SaveFilterStaged(ctx context.Context, f *SlidingHashFilter, basename string) (*Staged, error) {
	if err := os.MkdirAll(filepath.Dir(basename), 0o755); err != nil {
		return nil, fmt.Errorf("save hash filter %s: %w", basename, err)
	}
	st, err := stageShards(ctx, basename, f.SplitNum(), 0, func(ctx context.Context, i int, write func(proto.Message) error) error {
		return f.saveSplit(ctx, i, write)
	})
	if err != nil {
		return nil, fmt.Errorf("save hash filter: %w", err)
	}
	return st, nil
}

// RestoreFilter restores the sliding filter's splits from the files SaveFilter wrote; their
// number and the filter's shape must match.
func RestoreFilter(ctx context.Context, f *SlidingHashFilter, basename string) error {
	files, err := ShardedFiles(basename)
	if err != nil {
		return fmt.Errorf("restore hash filter: %w", err)
	}
	if len(files) != f.SplitNum() {
		return errkind.New(errkind.Value, "restore hash filter %s: %d split files, the filter has %d splits", basename, len(files), f.SplitNum())
	}
	g, ctx := errgroup.WithContext(ctx)
	for i, file := range files {
		g.Go(func() error { return restoreFilterSplit(ctx, f, i, file) })
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("restore hash filter: %w", err)
	}
	return nil
}

func restoreFilterSplit(ctx context.Context, f *SlidingHashFilter, i int, file string) error {
	// The split's records are read whole first: a split is small (about 2.4 bytes per id of its
	// share of the capacity), and restoring then holds the filter's lock only briefly.
	var meta *hashtablepb.HashFilterSplitMetaDump
	var data []*hashtablepb.HashFilterSplitDataDump
	err := readRecords(ctx, file, func(b []byte) error {
		if meta == nil {
			meta = &hashtablepb.HashFilterSplitMetaDump{}
			if err := proto.Unmarshal(b, meta); err != nil {
				return errkind.Wrap(errkind.Value, fmt.Errorf("not a HashFilterSplitMetaDump: %w", err))
			}
			return nil
		}
		d := &hashtablepb.HashFilterSplitDataDump{}
		if err := proto.Unmarshal(b, d); err != nil {
			return errkind.Wrap(errkind.Value, fmt.Errorf("not a HashFilterSplitDataDump: %w", err))
		}
		data = append(data, d)
		return nil
	})
	if err != nil {
		return err
	}
	if meta == nil {
		return errkind.New(errkind.Value, "read %s: no meta record", file)
	}
	k := 0
	next := func() (*hashtablepb.HashFilterSplitDataDump, error) {
		if k == len(data) {
			return nil, nil
		}
		k++
		return data[k-1], nil
	}
	if err := f.restoreSplit(i, meta, next); err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	return nil
}
