package csvconvert

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/monolith-go/monolith/pkg/dataset"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// PartName is the name of shard i of n: part-00000-of-00004.tfrecord.
func PartName(i, n int) string { return fmt.Sprintf("part-%05d-of-%05d.tfrecord", i, n) }

// partGlob matches the names PartName gives, of any shard count.
const partGlob = "part-*.tfrecord"

// Output is a directory's shards being written: each is a temporary file of the directory
// (".part-...tfrecord.*.tmp", which part-* globs do not match) until Commit renames them all into
// place. Abort removes them, and the directory when Output created it and it is empty: a failed
// conversion leaves nothing behind, and nothing Output did not write is touched.
type Output struct {
	dir        string
	overwrite  bool
	createdDir bool
	names      []string // final paths
	temps      []string // temporary paths, "" once renamed or removed
	writers    []*dataset.FileWriter
	// old are the part files the directory held when the Output was made (with overwrite).
	old []string
}

// File is a shard written.
type File struct {
	Path  string
	Bytes int64
}

// CreateOutput starts shards part files in dir (made when missing), compressed with c. A dir
// already holding part-*.tfrecord files is an error of kind Value unless overwrite: then Commit
// replaces them.
func CreateOutput(dir string, shards int, c dataset.Compression, overwrite bool) (out *Output, err error) {
	if shards <= 0 {
		return nil, errkind.New(errkind.Value, "csvconvert: %d shards: want at least 1", shards)
	}
	if _, err := dataset.ParseCompression(string(c)); err != nil {
		return nil, err
	}
	o := &Output{dir: dir, overwrite: overwrite}
	if fi, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("csvconvert: create output directory: %w", err)
		}
		o.createdDir = true
	} else if err != nil {
		return nil, fmt.Errorf("csvconvert: output directory: %w", err)
	} else if !fi.IsDir() {
		return nil, errkind.New(errkind.Value, "csvconvert: output %s is not a directory", dir)
	}
	old, err := filepath.Glob(filepath.Join(dir, partGlob))
	if err != nil {
		return nil, fmt.Errorf("csvconvert: list %s: %w", dir, err)
	}
	if len(old) > 0 && !overwrite {
		return nil, errkind.New(errkind.Value, "csvconvert: output directory %s already holds %d part files (%s...): choose another directory, or replace them with --overwrite", dir, len(old), filepath.Base(old[0]))
	}
	o.old = old
	defer func() {
		if err != nil {
			o.Abort()
		}
	}()
	for i := range shards {
		name := PartName(i, shards)
		// CreateTemp makes a name no other file has (O_EXCL); CreateFile then truncates that
		// file of ours.
		tf, err := os.CreateTemp(dir, "."+name+".*.tmp")
		if err != nil {
			return nil, fmt.Errorf("csvconvert: create shard %d: %w", i, err)
		}
		tmp := tf.Name()
		tf.Close()
		// CreateTemp's mode is 0600; the shards are data files like any other.
		if err := os.Chmod(tmp, 0o644); err != nil {
			os.Remove(tmp)
			return nil, fmt.Errorf("csvconvert: create shard %d: %w", i, err)
		}
		o.names = append(o.names, filepath.Join(dir, name))
		o.temps = append(o.temps, tmp)
		w, err := dataset.CreateFile(tmp, c)
		if err != nil {
			return nil, err
		}
		o.writers = append(o.writers, w)
	}
	return o, nil
}

// Writers are the shards' record writers, shard i at i.
func (o *Output) Writers() []RecordWriter {
	ws := make([]RecordWriter, len(o.writers))
	for i, w := range o.writers {
		ws[i] = w
	}
	return ws
}

// Commit completes every shard and renames them into place, then (with overwrite) removes the part
// files the directory held that no new shard replaced, so that the directory holds one data set.
// On error what is left of the temporary files is removed.
func (o *Output) Commit() ([]File, error) {
	var errs []error
	for i, w := range o.writers {
		if w == nil {
			continue
		}
		o.writers[i] = nil
		errs = append(errs, w.Close())
	}
	if err := errors.Join(errs...); err != nil {
		o.Abort()
		return nil, fmt.Errorf("csvconvert: complete the shards: %w", err)
	}
	var files []File
	for i, tmp := range o.temps {
		fi, err := os.Stat(tmp)
		if err == nil {
			err = os.Rename(tmp, o.names[i])
		}
		if err != nil {
			o.Abort()
			return nil, fmt.Errorf("csvconvert: put shard %d in place (%d of %d are): %w", i, i, len(o.temps), err)
		}
		o.temps[i] = ""
		files = append(files, File{Path: o.names[i], Bytes: fi.Size()})
	}
	for _, old := range o.old {
		if slices.Contains(o.names, old) {
			continue
		}
		if err := os.Remove(old); err != nil && !errors.Is(err, os.ErrNotExist) {
			return files, fmt.Errorf("csvconvert: remove the replaced part file: %w", err)
		}
	}
	return files, nil
}

// Replaced are the part files that were in the directory before (removed or overwritten by
// Commit, with overwrite).
func (o *Output) Replaced() []string { return o.old }

// Abort closes and removes the shards not yet renamed, and the directory when CreateOutput made it
// and it is now empty.
func (o *Output) Abort() error {
	var errs []error
	for i, w := range o.writers {
		if w != nil {
			w.Close() // its error does not matter: the file goes
			o.writers[i] = nil
		}
	}
	for i, tmp := range o.temps {
		if tmp == "" {
			continue
		}
		if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
		o.temps[i] = ""
	}
	if o.createdDir {
		os.Remove(o.dir) // fails, as it should, when the directory is not empty
	}
	return errors.Join(errs...)
}
