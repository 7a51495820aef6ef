package export

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	hashtablepb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table"
	initializerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/initializer"
	optimizerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/optimizer"
	"github.com/monolith-go/monolith/pkg/embedding"
	"github.com/monolith-go/monolith/pkg/embedding/initializer"
	"github.com/monolith-go/monolith/pkg/embedding/optimizer"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/fileops"
	"github.com/monolith-go/monolith/pkg/runner/checkpoint"
	"github.com/monolith-go/monolith/pkg/trainer/dnn"
)

// Entry is a loaded entry version: the model's configuration and dense parameters.
type Entry struct {
	// Dir is the version directory.
	Dir      string
	Manifest EntryManifest
	// Tensors are the dense tensors as exported (float64 parameters, the step, and with
	// optimizer state the optimizer's slots).
	Tensors []checkpoint.Tensor
}

// LoadEntry reads the entry version directory dir (<export_base>/entry/<version>). A missing file
// is an error of kind NotFound, a manifest of another format, a dense file failing its checksums
// or tensors that do not fit the model of kind Value; each names the file.
func LoadEntry(dir string) (*Entry, error) {
	var m EntryManifest
	if err := readManifest(filepath.Join(dir, EntryManifestFile), &m); err != nil {
		return nil, err
	}
	file := filepath.Join(dir, EntryManifestFile)
	bad := func(format string, args ...any) error {
		return errkind.New(errkind.Value, "export entry %s: "+format, append([]any{file}, args...)...)
	}
	switch {
	case m.Format != EntryFormat:
		return nil, bad("format %q, want %q", m.Format, EntryFormat)
	case m.NumPS <= 0:
		return nil, bad("%d PS sub-graphs", m.NumPS)
	case m.ShardRule != ShardRule:
		return nil, bad("shard rule %q, want %q", m.ShardRule, ShardRule)
	case m.Dense.Prefix == "" || filepath.Base(m.Dense.Prefix) != m.Dense.Prefix:
		return nil, bad("dense prefix %q is not a file name", m.Dense.Prefix)
	}
	if err := checkVersion(dir, m.Version); err != nil {
		return nil, err
	}
	if err := m.Model.Validate(); err != nil {
		return nil, bad("%v", err)
	}
	tables := m.Model.Tables()
	if len(tables) != len(m.Tables) {
		return nil, bad("%d tables listed, the model reads %d", len(m.Tables), len(tables))
	}
	for i, t := range tables {
		if m.Tables[i].Name != t.Name || m.Tables[i].Dim != t.Dim {
			return nil, bad("table %d is %q of dimension %d, the model reads %q of dimension %d", i, m.Tables[i].Name, m.Tables[i].Dim, t.Name, t.Dim)
		}
	}
	tensors, err := checkpoint.ReadDense(filepath.Join(dir, m.Dense.Prefix))
	if err != nil {
		return nil, fmt.Errorf("export entry %s: %w", dir, err)
	}
	names := make([]string, len(tensors))
	for i, t := range tensors {
		names[i] = t.Name
	}
	if !slices.Equal(names, m.Dense.Tensors) {
		return nil, bad("the dense file holds tensors %v, the manifest lists %v", names, m.Dense.Tensors)
	}
	e := &Entry{Dir: dir, Manifest: m, Tensors: tensors}
	if _, err := e.NewModel(noStore{}); err != nil {
		return nil, fmt.Errorf("export entry %s: %w", dir, err)
	}
	return e, nil
}

// NewModel returns the entry's model over the embedding tables of store (the PS shards): a
// dnn.Model whose Predict computes the trainer's predictions. Its optimizer's state, when the
// export holds none, is a fresh one (serving does not train).
func (e *Entry) NewModel(store dnn.EmbeddingStore) (*dnn.Model, error) {
	m, err := dnn.New(e.Manifest.Model.DNNConfig(), store)
	if err != nil {
		return nil, err
	}
	exported := map[string]checkpoint.Tensor{}
	for _, t := range e.Tensors {
		exported[t.Name] = t
	}
	all := m.Tensors()
	for i, t := range all {
		if x, ok := exported[t.Name]; ok {
			all[i] = toEstimator([]checkpoint.Tensor{x})[0]
		} else if denseParam.MatchString(t.Name) || t.Name == dnn.StepName {
			return nil, errkind.New(errkind.Value, "the export has no dense tensor %s", t.Name)
		}
	}
	if err := m.Assign(all); err != nil {
		return nil, err
	}
	return m, nil
}

// PSShard is a loaded PS version: its tables, ready to serve lookups.
type PSShard struct {
	// Dir is the version directory.
	Dir      string
	Manifest PSManifest
	// Tables are the shard's tables by name: an id without an entry looks up as zeros. They take
	// Assign (parameter sync); their optimizer is plain SGD, not the trainer's.
	Tables map[string]*embedding.Table
}

// Lookup writes the embeddings of ids in table to out (dim floats each) and returns how many
// have an entry.
func (s *PSShard) Lookup(table string, ids []int64, out []float32) (int, error) {
	t, ok := s.Tables[table]
	if !ok {
		return 0, errkind.New(errkind.NotFound, "PS shard %s has no table %q", s.Dir, table)
	}
	return t.Lookup(ids, out)
}

// LoadPSShard reads the PS version directory dir (<export_base>/ps_<i>/<version>) into tables.
// Every file is checked against the manifest (size, entries, each id's shard, the dimension); a
// missing file is an error of kind NotFound, any mismatch or bad record of kind Value, each naming
// the file.
func LoadPSShard(ctx context.Context, dir string) (*PSShard, error) {
	m, err := ReadPSManifest(dir)
	if err != nil {
		return nil, err
	}
	s := &PSShard{Dir: dir, Manifest: *m, Tables: map[string]*embedding.Table{}}
	for _, t := range m.Tables {
		tab, err := servingTable(t.Dim, t.Entries)
		if err != nil {
			return nil, fmt.Errorf("PS shard %s: table %q: %w", dir, t.Name, err)
		}
		ids := make([]int64, 0, assignBatch)
		values := make([]float32, 0, assignBatch*t.Dim)
		ts := int64(-1)
		flush := func() error {
			if len(ids) == 0 {
				return nil
			}
			err := tab.Assign(ids, values, ts)
			ids, values = ids[:0], values[:0]
			return err
		}
		err = readTable(ctx, dir, m, t, func(d *hashtablepb.EntryDump) error {
			// Assign takes one update time per call: runs of equal times go together.
			if d.GetLastUpdateTsSec() != ts || len(ids) == assignBatch {
				if err := flush(); err != nil {
					return err
				}
				ts = d.GetLastUpdateTsSec()
			}
			ids = append(ids, d.GetId())
			values = append(values, d.GetNum()...)
			return nil
		})
		if err == nil {
			err = flush()
		}
		if err != nil {
			return nil, err
		}
		if int64(tab.Size()) != t.Entries {
			return nil, errkind.New(errkind.Value, "PS shard %s: table %q has %d distinct ids, its manifest says %d entries (repeated ids?)", dir, t.Name, tab.Size(), t.Entries)
		}
		s.Tables[t.Name] = tab
	}
	return s, nil
}

// assignBatch is how many entries LoadPSShard assigns at once.
const assignBatch = 4096

// ReadPSManifest reads and checks the manifest of the PS version directory dir.
func ReadPSManifest(dir string) (*PSManifest, error) {
	file := filepath.Join(dir, PSManifestFile)
	var m PSManifest
	if err := readManifest(file, &m); err != nil {
		return nil, err
	}
	bad := func(format string, args ...any) error {
		return errkind.New(errkind.Value, "export PS shard %s: "+format, append([]any{file}, args...)...)
	}
	switch {
	case m.Format != PSFormat:
		return nil, bad("format %q, want %q", m.Format, PSFormat)
	case m.NumPS <= 0 || m.Index < 0 || m.Index >= m.NumPS:
		return nil, bad("shard %d of %d", m.Index, m.NumPS)
	case m.ShardRule != ShardRule:
		return nil, bad("shard rule %q, want %q", m.ShardRule, ShardRule)
	}
	if sg := filepath.Base(filepath.Dir(dir)); psSubGraph.MatchString(sg) && sg != PSSubGraph(m.Index) {
		return nil, bad("shard %d in the directory of %s", m.Index, sg)
	}
	if err := checkVersion(dir, m.Version); err != nil {
		return nil, err
	}
	for _, t := range m.Tables {
		if t.Dim <= 0 {
			return nil, bad("table %q of dimension %d", t.Name, t.Dim)
		}
		var n int64
		for _, f := range t.Files {
			if !filepath.IsLocal(f.Path) {
				return nil, bad("table %q: file %q is not inside the version directory", t.Name, f.Path)
			}
			n += f.Entries
		}
		if n != t.Entries {
			return nil, bad("table %q: %d entries, its files hold %d", t.Name, t.Entries, n)
		}
	}
	return &m, nil
}

// ReadTableEntries calls fn with each entry of table in the PS version directory dir (with its
// optimizer dump when the export kept them), checking the files as LoadPSShard does. fn may keep
// the entry.
func ReadTableEntries(ctx context.Context, dir, table string, fn func(*hashtablepb.EntryDump) error) error {
	m, err := ReadPSManifest(dir)
	if err != nil {
		return err
	}
	for _, t := range m.Tables {
		if t.Name == table {
			return readTable(ctx, dir, m, t, fn)
		}
	}
	return errkind.New(errkind.NotFound, "PS shard %s has no table %q", dir, table)
}

// readTable reads the files of t, checking each against the manifest m.
func readTable(ctx context.Context, dir string, m *PSManifest, t PSTable, fn func(*hashtablepb.EntryDump) error) error {
	for _, pf := range t.Files {
		file := filepath.Join(dir, pf.Path)
		fi, err := os.Stat(file)
		if errors.Is(err, fs.ErrNotExist) {
			return errkind.New(errkind.NotFound, "PS shard %s: table %q: file %s is missing", dir, t.Name, file)
		}
		if err != nil {
			return fmt.Errorf("PS shard %s: %w", dir, err)
		}
		if fi.Size() != pf.Bytes {
			return errkind.New(errkind.Value, "PS shard %s: %s has %d bytes, the manifest says %d (truncated or overwritten)", dir, file, fi.Size(), pf.Bytes)
		}
		if err := readFile(ctx, file, m, t, pf, fn); err != nil {
			return err
		}
	}
	return nil
}

func readFile(ctx context.Context, file string, m *PSManifest, t PSTable, pf PSFile, fn func(*hashtablepb.EntryDump) error) error {
	f, err := os.Open(file)
	if err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	defer f.Close()
	r := fileops.NewEntryDumpReader(bufio.NewReaderSize(f, 1<<20))
	var n int64
	for ; ; n++ {
		if n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		d, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return errkind.Wrap(errkind.Value, fmt.Errorf("read %s: %w", file, err))
		}
		switch {
		case len(d.GetNum()) != t.Dim:
			return errkind.New(errkind.Value, "read %s: entry %d has %d numbers, table %q has dimension %d", file, d.GetId(), len(d.GetNum()), t.Name, t.Dim)
		case embedding.Shard(d.GetId(), m.NumPS) != m.Index:
			return errkind.New(errkind.Value, "read %s: id %d belongs to shard %d of %d, not %d", file, d.GetId(), embedding.Shard(d.GetId(), m.NumPS), m.NumPS, m.Index)
		}
		if err := fn(d); err != nil {
			return fmt.Errorf("read %s: %w", file, err)
		}
	}
	if n != pf.Entries {
		return errkind.New(errkind.Value, "read %s: %d entries, the manifest says %d", file, n, pf.Entries)
	}
	return nil
}

// servingTable is an empty table of dimension dim for about n entries: zeros for missing ids, a
// plain SGD optimizer (a serving table is assigned, not trained).
func servingTable(dim int, n int64) (*embedding.Table, error) {
	opt, err := optimizer.New(&optimizerpb.OptimizerConfig{Type: &optimizerpb.OptimizerConfig_Sgd{Sgd: &optimizerpb.SgdOptimizerConfig{}}}, dim)
	if err != nil {
		return nil, err
	}
	init, err := initializer.New(&initializerpb.InitializerConfig{Type: &initializerpb.InitializerConfig_Zeros{Zeros: &initializerpb.ZerosInitializerConfig{}}}, dim)
	if err != nil {
		return nil, err
	}
	return embedding.New(embedding.Config{Dim: dim, Optimizer: opt, Initializer: init, InitialCapacity: int(min(n, 1<<40))})
}

// readManifest decodes the JSON file name into v, refusing unknown fields.
func readManifest(name string, v any) error {
	data, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return errkind.New(errkind.NotFound, "export manifest %s does not exist", name)
	}
	if err != nil {
		return fmt.Errorf("export manifest: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errkind.New(errkind.Value, "export manifest %s: %v", name, err)
	}
	return nil
}

// checkVersion checks that a version directory's name, when it is a number, is the manifest's
// version (a temporary or copied directory may have another name).
func checkVersion(dir string, version int64) error {
	if v, err := strconv.ParseInt(filepath.Base(dir), 10, 64); err == nil && v != version {
		return errkind.New(errkind.Value, "export version directory %s holds version %d", dir, version)
	}
	return nil
}
