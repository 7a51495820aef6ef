package ps

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pspb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/ps"
	"github.com/monolith-go/monolith/pkg/embedding"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// The layout of a dump: server i of n writes table t's entries to the sharded EntryDump files of
// basename <dir>/<t>/ps_<i>_of_<n> (<basename>-NNNNN-of-NNNNN, pkg/embedding's Save), and a
// sliding filter's state next to them, filter_ps_<i>_of_<n>-NNNNN-of-NNNNN. Restore reads every
// server's files and keeps its own ids, so a dump written by n servers restores onto any number.

// DumpBasename is the basename of server index of numPS's dump of table in dir.
func DumpBasename(dir, table string, index, numPS int) string {
	return filepath.Join(dir, table, fmt.Sprintf("ps_%d_of_%d", index, numPS))
}

// filterBasename is the basename of the table's filter state.
func filterBasename(dir, table string, index, numPS int) string {
	return filepath.Join(dir, table, fmt.Sprintf("filter_ps_%d_of_%d", index, numPS))
}

// dumpFile matches a file of a server's table dump: ps_<i>_of_<n>-NNNNN-of-NNNNN.
var dumpFile = regexp.MustCompile(`^ps_(\d+)_of_(\d+)-\d{5}-of-\d{5}$`)

// dumpServers returns the number of servers that wrote table's dump in dir, checking that every
// one of them did.
func dumpServers(dir, table string) (int, error) {
	tdir := filepath.Join(dir, table)
	entries, err := os.ReadDir(tdir)
	if err != nil {
		if os.IsNotExist(err) {
			return 0, errkind.New(errkind.NotFound, "no dump of table %q in %s", table, dir)
		}
		return 0, fmt.Errorf("dump of table %q: %w", table, err)
	}
	n := -1
	seen := map[int]bool{}
	for _, e := range entries {
		m := dumpFile.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		i, _ := strconv.Atoi(m[1])
		total, _ := strconv.Atoi(m[2])
		if n >= 0 && total != n {
			return 0, errkind.New(errkind.Value, "dump of table %q in %s mixes dumps of %d and %d servers", table, dir, n, total)
		}
		if i >= total {
			return 0, errkind.New(errkind.Value, "dump of table %q in %s: file %s names server %d of %d", table, dir, e.Name(), i, total)
		}
		n = total
		seen[i] = true
	}
	if n <= 0 {
		return 0, errkind.New(errkind.NotFound, "no dump of table %q in %s", table, tdir)
	}
	if len(seen) < n {
		// n is read from file names: the servers missing are listed up to a few, not all n.
		var missing []int
		for i := 0; i < n && len(missing) < 10; i++ {
			if !seen[i] {
				missing = append(missing, i)
			}
		}
		more := ""
		if len(seen)+len(missing) < n {
			more = fmt.Sprintf(" and %d more", n-len(seen)-len(missing))
		}
		return 0, errkind.New(errkind.NotFound, "dump of table %q in %s lacks servers %v%s of %d", table, tdir, missing, more, n)
	}
	return n, nil
}

// Save dumps the requested tables. Every file is written under a temporary name first and put in
// place once every table is written (replacing the files of an earlier dump of the same tables
// in dir), so a Save that fails, passes its deadline or is cancelled, also by the server's stop,
// leaves no new files: never a dump that looks complete and is not. It looks at its context
// between files and every 1024 entries.
func (s *Server) Save(ctx context.Context, req *pspb.SaveRequest) (*pspb.SaveResponse, error) {
	if err := ctxError(ctx); err != nil {
		return nil, err
	}
	if req.GetDir() == "" {
		return nil, s.rpcError("save", errkind.New(errkind.Value, "no directory"))
	}
	if n := req.GetShardsPerTable(); n > MaxShardsPerTable {
		return nil, status.Errorf(codes.InvalidArgument, "ps %d: save: shards_per_table %d, want at most %d (MaxShardsPerTable; 0 or less: one per million entries, 1 to 4)",
			s.cfg.Index, n, MaxShardsPerTable)
	}
	tables, err := s.selected(req.GetTables())
	if err != nil {
		return nil, err
	}
	ctx, done := s.untilStop(ctx)
	defer done()
	var staged []*embedding.Staged
	abort := func() {
		for _, st := range staged {
			st.Abort()
		}
	}
	resp := &pspb.SaveResponse{}
	for _, tb := range tables {
		st, err := s.stageTable(ctx, tb, req.GetDir(), int(req.GetShardsPerTable()))
		staged = append(staged, st...)
		if err != nil {
			abort()
			if ctx.Err() != nil {
				return nil, s.ctxStatus(ctx, "save table "+tb.name)
			}
			return nil, s.rpcError("save table "+tb.name, err)
		}
		var files []string
		for _, f := range st {
			files = append(files, f.Files()...)
		}
		resp.Tables = append(resp.Tables, &pspb.TableFiles{Table: tb.name, Files: files})
	}
	// Every table is written: the renames are quick, and not cut short.
	for i, st := range staged {
		if err := st.Commit(); err != nil {
			for _, rest := range staged[i+1:] {
				rest.Abort()
			}
			return nil, s.rpcError("save", err)
		}
	}
	for _, t := range resp.Tables {
		s.log.Info("table saved", "table", t.Table, "dir", req.GetDir(), "files", len(t.Files))
	}
	return resp, nil
}

// stageTable writes the table's dump (and its filter's) to temporary files, to be committed.
func (s *Server) stageTable(ctx context.Context, tb *table, dir string, shards int) ([]*embedding.Staged, error) {
	if err := os.MkdirAll(filepath.Dir(DumpBasename(dir, tb.name, 0, 1)), 0o755); err != nil {
		return nil, err
	}
	if shards <= 0 {
		shards = -1
	}
	st, err := tb.t.SaveStaged(ctx, DumpBasename(dir, tb.name, s.cfg.Index, s.cfg.NumPS), shards)
	if err != nil {
		return nil, err
	}
	out := []*embedding.Staged{st}
	if tb.filter != nil {
		fst, err := embedding.SaveFilterStaged(ctx, tb.filter, filterBasename(dir, tb.name, s.cfg.Index, s.cfg.NumPS))
		if err != nil {
			return out, fmt.Errorf("filter: %w", err)
		}
		out = append(out, fst)
	}
	return out, nil
}

// Restore restores the requested tables from a dump, keeping this server's ids. It looks at its
// context between files and every 256 records; a table whose restore is cut short (its deadline,
// a cancel, the server's stop) is left partly restored, and the error says so.
func (s *Server) Restore(ctx context.Context, req *pspb.RestoreRequest) (*pspb.RestoreResponse, error) {
	if err := ctxError(ctx); err != nil {
		return nil, err
	}
	if req.GetDir() == "" {
		return nil, s.rpcError("restore", errkind.New(errkind.Value, "no directory"))
	}
	tables, err := s.selected(req.GetTables())
	if err != nil {
		return nil, err
	}
	ctx, done := s.untilStop(ctx)
	defer done()
	resp := &pspb.RestoreResponse{}
	for _, tb := range tables {
		if ctx.Err() != nil {
			return nil, s.ctxStatus(ctx, "restore")
		}
		n, err := dumpServers(req.GetDir(), tb.name)
		if err != nil {
			return nil, s.rpcError("restore table "+tb.name, err)
		}
		if resp.DumpNumPs != 0 && int(resp.DumpNumPs) != n {
			return nil, s.rpcError("restore", errkind.New(errkind.Value, "the tables of %s were dumped by %d and %d servers", req.GetDir(), resp.DumpNumPs, n))
		}
		resp.DumpNumPs = int32(n)
		files, restored, err := s.restoreTable(ctx, tb, req.GetDir(), n)
		if err != nil {
			if ctx.Err() != nil {
				return nil, s.ctxStatus(ctx, "restore table "+tb.name+" (partly restored)")
			}
			return nil, s.rpcError("restore table "+tb.name, err)
		}
		resp.Tables = append(resp.Tables, &pspb.TableFiles{Table: tb.name, Files: files, Entries: int64(restored)})
	}
	return resp, nil
}

// restoreTable reads the dump of n servers: with as many servers as now, only this server's
// files (the same rule routed the same ids to it); else every server's, keeping this server's ids.
func (s *Server) restoreTable(ctx context.Context, tb *table, dir string, n int) ([]string, int, error) {
	var bases []string
	if n == s.cfg.NumPS {
		bases = []string{DumpBasename(dir, tb.name, s.cfg.Index, n)}
	} else {
		for i := 0; i < n; i++ {
			bases = append(bases, DumpBasename(dir, tb.name, i, n))
		}
	}
	var files []string
	for _, b := range bases {
		f, err := embedding.ShardedFiles(b)
		if err != nil {
			return nil, 0, err
		}
		files = append(files, f...)
	}
	restored, err := tb.t.Restore(ctx, bases, embedding.ShardSpec{Index: s.cfg.Index, Total: s.cfg.NumPS})
	if err != nil {
		return nil, 0, err
	}
	if tb.filter != nil {
		// A filter's state is a hash of the ids it saw, which cannot be split by id: it is
		// restored only onto the same server of a job of the same size.
		fbase := filterBasename(dir, tb.name, s.cfg.Index, n)
		if n != s.cfg.NumPS {
			s.log.Warn("table's filter state not restored: the dump was written by another number of servers",
				"table", tb.name, "dump_num_ps", n, "num_ps", s.cfg.NumPS)
		} else if ff, err := embedding.ShardedFiles(fbase); err != nil {
			s.log.Warn("table's filter state not restored: no filter dump", "table", tb.name, "err", err)
		} else if err := embedding.RestoreFilter(ctx, tb.filter, fbase); err != nil {
			return nil, 0, fmt.Errorf("filter: %w", err)
		} else {
			files = append(files, ff...)
		}
	}
	sort.Strings(files)
	s.log.Info("table restored", "table", tb.name, "dir", dir, "entries", restored, "dump_num_ps", n)
	return files, restored, nil
}
