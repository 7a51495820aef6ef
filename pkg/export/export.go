// Package export writes a trained dnn model (a checkpoint of cmd/train: the dense checkpoint and
// the tables' dump beside it) as the layout the agent serves, and reads it back for a model
// server. It is the reference's model_export (DistributedExporter, ExportSaverListener,
// export_state_utils) for a model that has no TensorFlow graph, so the files are this project's own:
//
//	<export_base>/
//	  .export.lock                    held while an export writes
//	  entry/
//	    ExportSaverListenerState      text-format ServingModelState: {export_dir, global_step} per version
//	    <version>/
//	      model.json                  EntryManifest: model name, step, num_ps, features, MLP shape, tables
//	      dense.index, dense.data     the dense parameters (pkg/runner/checkpoint's dense format, float64)
//	      saved_model.pb              a SavedModel naming the PS sub-graphs (TfServingRemotePredict nodes)
//	  ps_<i>/                         i in 0 .. num_ps-1
//	    ExportSaverListenerState
//	    <version>/
//	      shard.json                  PSManifest: index, num_ps, tables, files, entry counts
//	      embeddings/<table>/part-00000-of-00001   EntryDump TFRecords of the ids with floormod(id, num_ps) == i
//
// A version is the checkpoint's global step (VersionGlobalStep, the reference's
// global_step_as_timestamp) or the export's Unix time in seconds (VersionTimestamp, the reference's
// default). Each version directory is written under a temporary name ("temp-<version>-...") in its
// sub-graph's directory, synced, and renamed once complete, the PS shards first and the entry last;
// a failed export removes what it wrote, so no part of it is visible. Export keeps the last Keep
// versions of each sub-graph (and their state entries).
//
// LoadEntry and LoadPSShard read a version back for serving: the entry's model (NewModel: a
// dnn.Model over any embedding store, computing the trainer's predictions) and a PS shard's tables.
// Listener exports from a trainer every N checkpoints.
package export

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/monolith-go/monolith/pkg/embedding"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/fileops"
	"github.com/monolith-go/monolith/pkg/resource"
	"github.com/monolith-go/monolith/pkg/runner/checkpoint"
)

// VersionType is what names an export's version.
type VersionType string

// The version types.
const (
	// VersionGlobalStep names a version by the checkpoint's global step: the same checkpoint is
	// always the same version (exporting it twice is refused), and every sub-graph has it.
	VersionGlobalStep VersionType = "global_step"
	// VersionTimestamp names it by the export's Unix time in seconds.
	VersionTimestamp VersionType = "timestamp"
)

// DefaultKeep is how many versions of each sub-graph an export keeps by default.
const DefaultKeep = 5

// ErrVersionExists is wrapped by the error of an export whose version the entry has already.
var ErrVersionExists = errors.New("version already exported")

// Options configure an export.
type Options struct {
	// ModelDir is the checkpoint directory (cmd/train's --model_dir).
	ModelDir string
	// Checkpoint names the checkpoint: a base name (model.ckpt-<step>) or a path; "" is the newest
	// the directory's state file names.
	Checkpoint string
	// ExportBase is the export's base directory (created when missing).
	ExportBase string
	// ModelName is what the entry's remote predict nodes call the model ("<name>:ps_<i>"), which
	// agentctl decl declares; "" is the base name of ExportBase.
	ModelName string
	// Spec is the model's configuration (SpecFromDNN); it must fit the checkpoint.
	Spec ModelSpec
	// NumPS is the number of PS sub-graphs; 0 is the number of parameter servers that wrote the
	// checkpoint. Ids are routed to them by floormod(id, NumPS).
	NumPS int
	// VersionType names the version (default VersionGlobalStep).
	VersionType VersionType
	// Keep is how many versions of each sub-graph are kept (the newest); 0 keeps all.
	Keep int
	// WithOptimizerState keeps the optimizers' state: the dense optimizer's slots and the tables'
	// optimizer dumps (to go on training from an export); serving needs neither.
	WithOptimizerState bool
	// Now is the clock (exported_at, timestamp versions); nil means time.Now.
	Now func() time.Time
	// Log receives progress; nil means slog.Default().
	Log *slog.Logger

	// fs creates the files; nil means the os package (tests: a full disk).
	fs fileSystem
}

// Result describes a finished export.
type Result struct {
	// Checkpoint is the checkpoint exported, GlobalStep its step.
	Checkpoint string
	GlobalStep int64
	// Version is the version written, NumPS the number of PS sub-graphs.
	Version int64
	NumPS   int
	// Dirs are the version directories, by sub-graph.
	Dirs map[string]string
	// Entries are the embedding entries exported, Bytes the size of the files written.
	Entries int64
	Bytes   int64
	// Removed are the older version directories retention deleted.
	Removed []string
}

func (o Options) withDefaults() (Options, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.fs == nil {
		o.fs = osFS{}
	}
	if o.VersionType == "" {
		o.VersionType = VersionGlobalStep
	}
	switch {
	case o.ModelDir == "":
		return o, errkind.New(errkind.Value, "export: no checkpoint directory")
	case o.ExportBase == "":
		return o, errkind.New(errkind.Value, "export: no export base directory")
	case o.NumPS < 0:
		return o, errkind.New(errkind.Value, "export: %d PS sub-graphs", o.NumPS)
	case o.Keep < 0:
		return o, errkind.New(errkind.Value, "export: keep %d versions", o.Keep)
	case o.VersionType != VersionGlobalStep && o.VersionType != VersionTimestamp:
		return o, errkind.New(errkind.Value, "export: version type %q (global_step, timestamp)", o.VersionType)
	}
	base, err := filepath.Abs(o.ExportBase)
	if err != nil {
		return o, fmt.Errorf("export base: %w", err)
	}
	o.ExportBase = base
	if o.ModelName == "" {
		o.ModelName = filepath.Base(base)
	}
	if err := o.Spec.Validate(); err != nil {
		return o, err
	}
	return o, nil
}

// Export writes the checkpoint of o as a new version of every sub-graph of o.ExportBase (see the
// package doc). Errors name the path at fault: a missing checkpoint (kind NotFound), a corrupt one
// or one that does not fit the spec (Value), a version the entry has already (Precondition,
// wrapping ErrVersionExists), an export base that cannot be written; after an error nothing of the
// export is left visible.
func Export(ctx context.Context, o Options) (*Result, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	src, err := openCheckpoint(o.ModelDir, o.Checkpoint, o.Spec, o.Log)
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	numPS := o.NumPS
	if numPS == 0 {
		numPS = src.dumpNumPS
	}
	version := src.step
	if o.VersionType == VersionTimestamp {
		version = o.Now().Unix()
	}
	if version < 0 {
		return nil, errkind.New(errkind.Value, "export: version %d of checkpoint %s is negative", version, src.prefix)
	}
	w := &writer{o: o, src: src, numPS: numPS, version: version, vname: strconv.FormatInt(version, 10)}
	created, err := mkdirAll(o.ExportBase)
	w.created = created
	if err != nil {
		return nil, fmt.Errorf("export: create the export base: %w", err)
	}
	unlock, err := lockBase(ctx, o.ExportBase)
	if err != nil {
		w.rollback()
		return nil, fmt.Errorf("export: %w", err)
	}
	defer unlock()
	res, err := w.run(ctx)
	if err != nil {
		w.rollback()
		return nil, fmt.Errorf("export: %w", err)
	}
	return res, nil
}

// writer is one export in progress, and what to undo if it fails.
type writer struct {
	o       Options
	src     *source
	numPS   int
	version int64
	vname   string

	subs    []string          // the sub-graphs, PS first, entry last
	temps   map[string]string // sub-graph -> its temporary version directory
	created []string          // directories created, parents first
	// published are the version directories renamed into place; states the state files
	// rewritten, with their former text ("" for none).
	published []string
	states    map[string]string
}

func (w *writer) subDir(sg string) string     { return filepath.Join(w.o.ExportBase, sg) }
func (w *writer) versionDir(sg string) string { return filepath.Join(w.subDir(sg), w.vname) }

func (w *writer) run(ctx context.Context) (*Result, error) {
	for i := range w.numPS {
		w.subs = append(w.subs, PSSubGraph(i))
	}
	w.subs = append(w.subs, EntrySubGraph)
	if dir := w.versionDir(EntrySubGraph); exists(dir) {
		return nil, errkind.Wrap(errkind.Precondition, fmt.Errorf("%w: %s exists (version %s, checkpoint %s)", ErrVersionExists, dir, w.vname, w.src.prefix))
	}
	// The entry is published last, so PS versions without it are what an interrupted export left:
	// this export replaces them.
	for _, sg := range w.subs[:w.numPS] {
		if dir := w.versionDir(sg); exists(dir) {
			w.o.Log.Warn("replacing a PS version an interrupted export left (its entry version is missing)", "dir", dir)
			if err := os.RemoveAll(dir); err != nil {
				return nil, fmt.Errorf("remove the leftover %s: %w", dir, err)
			}
		}
	}
	old := map[string]*resource.ServingModelState{}
	for _, sg := range w.subs {
		st, err := ReadState(w.subDir(sg))
		if err != nil {
			return nil, err
		}
		old[sg] = st
	}
	w.temps = map[string]string{}
	for _, sg := range w.subs {
		created, err := mkdirAll(w.subDir(sg))
		w.created = append(w.created, created...)
		if err != nil {
			return nil, fmt.Errorf("create the sub-graph directory: %w", err)
		}
		tmp, err := os.MkdirTemp(w.subDir(sg), TempPrefix+w.vname+"-")
		if err != nil {
			return nil, fmt.Errorf("create the version directory: %w", err)
		}
		w.temps[sg] = tmp
		// MkdirTemp makes it private; the model server may run as another user.
		if err := os.Chmod(tmp, 0o755); err != nil {
			return nil, fmt.Errorf("create the version directory: %w", err)
		}
	}
	exportedAt := w.o.Now().UTC().Format(time.RFC3339)
	shards, err := w.writeTables(ctx)
	if err != nil {
		return nil, err
	}
	res := &Result{Checkpoint: w.src.prefix, GlobalStep: w.src.step, Version: w.version, NumPS: w.numPS, Dirs: map[string]string{}}
	totals := map[string]int64{}
	for i, tables := range shards {
		for _, t := range tables {
			totals[t.Name] += t.Entries
			res.Entries += t.Entries
		}
		m := PSManifest{Format: PSFormat, ModelName: w.o.ModelName, Version: w.version, GlobalStep: w.src.step,
			Checkpoint: w.src.prefix, ExportedAt: exportedAt, Index: i, NumPS: w.numPS, ShardRule: ShardRule,
			WithOptimizerState: w.o.WithOptimizerState, Tables: tables}
		if err := w.writeJSON(filepath.Join(w.temps[PSSubGraph(i)], PSManifestFile), m); err != nil {
			return nil, err
		}
	}
	if err := w.writeEntry(exportedAt, totals); err != nil {
		return nil, err
	}
	for _, sg := range w.subs {
		size, err := syncTree(w.temps[sg])
		if err != nil {
			return nil, err
		}
		res.Bytes += size
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, sg := range w.subs {
		dst := w.versionDir(sg)
		if err := os.Rename(w.temps[sg], dst); err != nil {
			return nil, fmt.Errorf("publish %s: %w", dst, err)
		}
		delete(w.temps, sg)
		w.published = append(w.published, dst)
		if err := syncDir(w.subDir(sg)); err != nil {
			return nil, err
		}
		res.Dirs[sg] = dst
	}
	w.states = map[string]string{}
	for _, sg := range w.subs {
		st := old[sg]
		before, err := formatState(st)
		if err != nil {
			return nil, err
		}
		if !exists(filepath.Join(w.subDir(sg), resource.ExportStateFile)) {
			before = ""
		}
		next := &resource.ServingModelState{}
		for _, e := range st.Entries {
			if e.ExportDir != w.versionDir(sg) {
				next.Entries = append(next.Entries, e)
			}
		}
		next.Entries = append(next.Entries, resource.ServingEntry{ExportDir: w.versionDir(sg), GlobalStep: w.src.step})
		w.states[sg] = before
		if err := writeState(w.o.fs, w.subDir(sg), next); err != nil {
			return nil, err
		}
		old[sg] = next
	}
	w.states = nil // the export is complete: nothing to undo
	w.published = nil
	w.created = nil
	if w.o.Keep > 0 {
		for _, sg := range w.subs {
			res.Removed = append(res.Removed, w.retain(sg, old[sg])...)
		}
	}
	w.o.Log.Info("model exported", "checkpoint", w.src.prefix, "version", w.version, "export_base", w.o.ExportBase,
		"num_ps", w.numPS, "entries", res.Entries, "bytes", res.Bytes)
	return res, nil
}

// writeTables writes every table's entries into the PS shards' temporary directories, the tables
// in parallel, and returns each shard's tables (sorted by name).
func (w *writer) writeTables(ctx context.Context) ([][]PSTable, error) {
	tables := w.o.Spec.Tables()
	out := make([][]PSTable, w.numPS)
	for i := range out {
		out[i] = make([]PSTable, len(tables))
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for ti, t := range tables {
		g.Go(func() error {
			shards, err := w.writeTable(gctx, t)
			if err != nil {
				return err
			}
			for i, s := range shards {
				out[i][ti] = s
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// writeTable routes the entries of table t from the checkpoint's dump to the PS shards.
func (w *writer) writeTable(ctx context.Context, t TableInfo) (_ []PSTable, err error) {
	files := make([]*recordFile, w.numPS)
	defer func() {
		if err != nil {
			for _, f := range files {
				if f != nil {
					f.abandon()
				}
			}
		}
	}()
	rel := tablePart(t.Name, 0, 1)
	for i := range files {
		name := filepath.Join(w.temps[PSSubGraph(i)], rel)
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", filepath.Dir(name), err)
		}
		if files[i], err = createRecordFile(w.o.fs, name); err != nil {
			return nil, err
		}
	}
	for _, file := range w.src.files[t.Name] {
		if err := w.copyEntries(ctx, file, t, files); err != nil {
			return nil, err
		}
	}
	out := make([]PSTable, w.numPS)
	for i, f := range files {
		size, err := f.finish()
		if err != nil {
			return nil, err
		}
		out[i] = PSTable{Name: t.Name, Dim: t.Dim, Entries: f.entries, Files: []PSFile{{Path: rel, Entries: f.entries, Bytes: size}}}
	}
	return out, nil
}

// copyEntries copies the entries of one dump file to the shards' files; a bad record or an entry
// of another dimension is an error naming the file.
func (w *writer) copyEntries(ctx context.Context, file string, t TableInfo, shards []*recordFile) error {
	f, err := os.Open(file)
	if err != nil {
		return fmt.Errorf("read the checkpoint's dump: %w", err)
	}
	defer f.Close()
	r := fileops.NewEntryDumpReader(bufio.NewReaderSize(f, 1<<20))
	for n := 0; ; n++ {
		if n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		d, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return errkind.Wrap(errkind.Value, fmt.Errorf("checkpoint dump %s (corrupt?): %w", file, err))
		}
		if len(d.GetNum()) != t.Dim {
			return errkind.New(errkind.Value, "checkpoint dump %s: entry %d has %d numbers, table %q has dimension %d",
				file, d.GetId(), len(d.GetNum()), t.Name, t.Dim)
		}
		if !w.o.WithOptimizerState {
			d.Opt = nil
		}
		if err := shards[embedding.Shard(d.GetId(), len(shards))].write(d); err != nil {
			return err
		}
	}
}

// writeEntry writes the entry's files: the dense parameters, the saved model naming the PS
// sub-graphs, and model.json.
func (w *writer) writeEntry(exportedAt string, totals map[string]int64) error {
	dir := w.temps[EntrySubGraph]
	tensors := servingTensors(w.src.tensors, w.o.WithOptimizerState)
	if err := checkpoint.WriteDense(filepath.Join(dir, DensePrefix), tensors); err != nil {
		return err
	}
	for _, ext := range []string{".data", ".index"} {
		// WriteDense's temporary files are private, as a checkpoint's may be; an export is read
		// by the model server.
		if err := os.Chmod(filepath.Join(dir, DensePrefix+ext), 0o644); err != nil {
			return fmt.Errorf("write the dense parameters: %w", err)
		}
	}
	sm, err := entrySavedModel(w.o.ModelName, w.numPS)
	if err != nil {
		return err
	}
	if err := writeFileSync(w.o.fs, filepath.Join(dir, SavedModelFile), sm); err != nil {
		return err
	}
	m := EntryManifest{Format: EntryFormat, ModelName: w.o.ModelName, Version: w.version, GlobalStep: w.src.step,
		Checkpoint: w.src.prefix, ExportedAt: exportedAt, NumPS: w.numPS, ShardRule: ShardRule, Model: w.o.Spec,
		Dense: DenseInfo{Prefix: DensePrefix}, WithOptimizerState: w.o.WithOptimizerState}
	for _, t := range w.o.Spec.Tables() {
		m.Tables = append(m.Tables, TableEntries{Name: t.Name, Dim: t.Dim, Entries: totals[t.Name]})
	}
	for _, t := range tensors {
		m.Dense.Tensors = append(m.Dense.Tensors, t.Name)
	}
	return w.writeJSON(filepath.Join(dir, EntryManifestFile), m)
}

func (w *writer) writeJSON(name string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return writeFileSync(w.o.fs, name, append(data, '\n'))
}

// rollback undoes a failed export: its temporary and published directories, the state files it
// rewrote, the directories it created.
func (w *writer) rollback() {
	for sg, before := range w.states {
		file := filepath.Join(w.subDir(sg), resource.ExportStateFile)
		var err error
		if before == "" {
			err = os.Remove(file)
		} else {
			err = checkpoint.WriteFileAtomic(file, []byte(before))
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			w.o.Log.Error("export: restoring a state file failed", "file", file, "err", err)
		}
	}
	for _, dir := range slices.Concat(w.published, mapValues(w.temps)) {
		if err := os.RemoveAll(dir); err != nil {
			w.o.Log.Error("export: removing a partial version failed", "dir", dir, "err", err)
		}
	}
	for i := len(w.created) - 1; i >= 0; i-- {
		os.Remove(w.created[i]) // only when empty: another export may have filled it meanwhile
	}
}

// retain deletes all but the newest Keep versions of sub-graph sg that its state lists, and their
// entries, and returns the directories deleted. A failure is logged: the export itself is done.
func (w *writer) retain(sg string, st *resource.ServingModelState) []string {
	type versioned struct {
		e resource.ServingEntry
		v int64
	}
	var numbered []versioned
	for _, e := range st.Entries {
		v, err := strconv.ParseInt(filepath.Base(e.ExportDir), 10, 64)
		if err != nil || filepath.Dir(e.ExportDir) != w.subDir(sg) || e.ExportDir == w.versionDir(sg) {
			continue // not one of this base's versions, or the one just written: left alone
		}
		numbered = append(numbered, versioned{e, v})
	}
	// The version just written counts as one of those kept.
	if len(numbered) <= w.o.Keep-1 {
		return nil
	}
	slices.SortFunc(numbered, func(a, b versioned) int { return cmp.Compare(a.v, b.v) })
	drop := map[string]bool{}
	var removed []string
	for _, n := range numbered[:len(numbered)-(w.o.Keep-1)] {
		if err := os.RemoveAll(n.e.ExportDir); err != nil {
			w.o.Log.Warn("export: deleting an old version failed", "dir", n.e.ExportDir, "err", err)
			continue
		}
		drop[n.e.ExportDir] = true
		removed = append(removed, n.e.ExportDir)
		w.o.Log.Info("deleted an old export version", "dir", n.e.ExportDir)
	}
	next := &resource.ServingModelState{}
	for _, e := range st.Entries {
		if !drop[e.ExportDir] {
			next.Entries = append(next.Entries, e)
		}
	}
	if err := writeState(w.o.fs, w.subDir(sg), next); err != nil {
		w.o.Log.Warn("export: rewriting the state after retention failed", "sub_graph", sg, "err", err)
	}
	return removed
}

func mapValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// mkdirAll creates dir and its missing parents and returns those it created, parents first.
func mkdirAll(dir string) ([]string, error) {
	var missing []string
	for p := dir; !exists(p); p = filepath.Dir(p) {
		missing = append(missing, p)
		if filepath.Dir(p) == p {
			break
		}
	}
	slices.Reverse(missing)
	var created []string
	for _, p := range missing {
		if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return created, err
		}
		created = append(created, p)
	}
	if fi, err := os.Stat(dir); err != nil {
		return created, err
	} else if !fi.IsDir() {
		return created, &fs.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
	}
	return created, nil
}

// syncTree syncs the directories under dir (its files were synced when written) and returns the
// size of its files.
func syncTree(dir string) (int64, error) {
	var size int64
	var dirs []string
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			dirs = append(dirs, p)
			return nil
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		size += fi.Size()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sync %s: %w", dir, err)
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := syncDir(dirs[i]); err != nil {
			return 0, err
		}
	}
	return size, nil
}
