package modelmgr

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// SubModel is one sub model of a downloaded version: Name is "<sub_model>/<version>" (e.g.
// "ps_0/1234567"), Source the directory "<source>/<model>@<version>/<model>/<sub_model>/<version>".
type SubModel struct {
	Name   string
	Source string
}

// SourceVersion is the latest complete download of a model found in the source path.
type SourceVersion struct {
	Version   string
	SubModels []SubModel
	// RealPath is "<source>/<model>@<version>/<model>".
	RealPath string
}

// DoneFile returns the name of the marker that says dir is completely downloaded (the reference's
// get_done_file).
func DoneFile(dir string) string { return dir + WriteDone }

// SourceData scans the top level of the source path (the reference's get_source_data). Every
// directory there gets a read lock "<dir>.read.lock", remembered for RemoveReadLocks. Among the
// directories "<model>@<version>" whose marker "<dir>.write.done" exists and starts with the model
// name, it returns, per model, the greatest version (as a string) whose sub models all hold the
// version: "<dir>/<model>/<sub_model>/<version>". Names that do not split into exactly a model and
// a version (or that would leave the receive path: "", ".", "..") are logged and skipped. The error
// is NotFound when the source path does not exist, Runtime when it cannot be read.
func (m *Manager) SourceData() (map[string]SourceVersion, error) {
	m.op.Lock()
	defer m.op.Unlock()
	return m.sourceData()
}

func (m *Manager) sourceData() (map[string]SourceVersion, error) {
	root := m.cfg.SourcePath
	dirs, files, err := listDir(root)
	if err != nil {
		return nil, err
	}
	done := map[string]bool{}
	for _, f := range files {
		if m.isDoneMarker(f) {
			done[f] = true
		}
	}
	out := map[string]SourceVersion{}
	for _, dir := range dirs {
		full := filepath.Join(root, dir)
		lock := m.createReadLock(full)
		m.mu.Lock()
		m.lockFiles[lock] = struct{}{}
		m.mu.Unlock()
		if !done[DoneFile(dir)] {
			continue
		}
		parts := strings.Split(dir, "@")
		if len(parts) != 2 || !pathElem(parts[0]) || !pathElem(parts[1]) {
			m.log.Warn("download directory name is not <model>@<version>, skipped", "path", full)
			continue
		}
		model, version := parts[0], parts[1]
		realPath := filepath.Join(full, model)
		subs := m.versionData(realPath, version)
		if len(subs) == 0 {
			continue
		}
		if cur, ok := out[model]; !ok || cur.Version < version {
			out[model] = SourceVersion{Version: version, SubModels: subs, RealPath: realPath}
		}
	}
	return out, nil
}

// isDoneMarker reports whether the source path's file f marks a complete download of the model: its
// name starts with the model name, as the reference matches it, and ends in WriteDone.
func (m *Manager) isDoneMarker(f string) bool {
	return strings.HasSuffix(f, WriteDone) && strings.HasPrefix(f, m.cfg.ModelName)
}

// pathElem reports whether s names one entry of a directory (so joining it cannot leave it).
func pathElem(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsRune(s, filepath.Separator)
}

// versionData lists the sub models of "<realPath>/<sub_model>/<version>" (the reference's
// get_version_data): none when realPath cannot be read, has no sub model directory, or one of them
// lacks the version.
func (m *Manager) versionData(realPath, version string) []SubModel {
	dirs, _, err := listDir(realPath)
	if err != nil {
		m.log.Error("get version data failed", "path", realPath, "err", err)
		return nil
	}
	if len(dirs) == 0 {
		m.log.Warn("no sub model directory", "path", realPath)
		return nil
	}
	subs := make([]SubModel, 0, len(dirs))
	for _, sub := range dirs {
		vdir := filepath.Join(realPath, sub, version)
		if _, err := os.Stat(vdir); err != nil {
			m.log.Error("version directory does not exist", "path", vdir, "err", err)
			return nil
		}
		subs = append(subs, SubModel{Name: filepath.Join(sub, version), Source: vdir})
	}
	return subs
}

// listDir splits the entries of dir into directories (symbolic links to directories included, as
// os.walk does) and other files, each sorted by name.
func listDir(dir string) (dirs, files []string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, classify(fmt.Errorf("read directory: %w", err))
	}
	for _, e := range entries {
		isDir := e.IsDir()
		if e.Type()&fs.ModeSymlink != 0 {
			if st, err := os.Stat(filepath.Join(dir, e.Name())); err == nil {
				isDir = st.IsDir()
			}
		}
		if isDir {
			dirs = append(dirs, e.Name())
		} else {
			files = append(files, e.Name())
		}
	}
	return dirs, files, nil
}

// classify gives a filesystem error its kind, unless it has one: NotFound for a missing path,
// Runtime otherwise.
func classify(err error) error {
	if errkind.Of(err) != errkind.Unknown {
		return err
	}
	if errors.Is(err, fs.ErrNotExist) {
		return errkind.Wrap(errkind.NotFound, err)
	}
	return errkind.Wrap(errkind.Runtime, err)
}

// createReadLock touches "<name>.read.lock" and returns its path; a failure is logged (the path is
// still returned, as in the reference).
func (m *Manager) createReadLock(name string) string {
	lock := name + ReadLock
	f, err := os.OpenFile(lock, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o666)
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		m.log.Error("create read lock failed", "path", lock, "err", err)
	}
	return lock
}

// RemoveReadLocks deletes the read locks written by SourceData and every other "*.read.lock" file
// at the top of the source path (the reference's remove_read_lock, whose second part raised
// AttributeError on os.join). A missing source path is no error; the error joins the deletions
// that failed.
func (m *Manager) RemoveReadLocks() error {
	m.op.Lock()
	defer m.op.Unlock()
	m.mu.Lock()
	locks := slices.Sorted(maps.Keys(m.lockFiles))
	clear(m.lockFiles)
	m.mu.Unlock()

	var errs []error
	for _, l := range locks {
		if err := Delete(l); err != nil {
			m.log.Error("delete read lock failed", "path", l, "err", err)
			errs = append(errs, err)
		}
	}
	_, files, err := listDir(m.cfg.SourcePath)
	if err != nil {
		if errkind.Of(err) == errkind.NotFound {
			return errors.Join(errs...)
		}
		m.log.Error("list read locks failed", "path", m.cfg.SourcePath, "err", err)
		return errors.Join(append(errs, fmt.Errorf("remove read locks in %s: %w", m.cfg.SourcePath, err))...)
	}
	for _, f := range files {
		if !strings.HasSuffix(f, ReadLock) {
			continue
		}
		p := filepath.Join(m.cfg.SourcePath, f)
		m.log.Info("delete lock file", "path", p)
		if err := Delete(p); err != nil {
			m.log.Error("delete read lock failed", "path", p, "err", err)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// WaitForDownload waits, polling every PollInterval for at most WaitTimeout, until the source path
// exists and holds a marker "<model>...write.done" (the reference's wait_for_download). The error is
// NotFound on timeout, Runtime when ctx is done or Stop is called.
func (m *Manager) WaitForDownload(ctx context.Context) error {
	ctx, release := m.bind(ctx)
	defer release()
	deadline := time.Now().Add(m.cfg.WaitTimeout)
	// wait pauses until the next poll; false when the deadline has passed.
	wait := func() (bool, error) {
		left := time.Until(deadline)
		if left <= 0 {
			return false, nil
		}
		return true, sleep(ctx, min(left, m.cfg.PollInterval))
	}
	src := m.cfg.SourcePath
	for {
		if _, err := os.Stat(src); err == nil {
			break
		}
		m.log.Info("waiting for the source path to be created", "path", src)
		more, err := wait()
		if err != nil {
			return fmt.Errorf("wait for %s: %w", src, err)
		}
		if !more {
			m.log.Error("source path is not ready", "path", src)
			return errkind.New(errkind.NotFound, "wait for download: %s not created within %v", src, m.cfg.WaitTimeout)
		}
	}
	for {
		_, files, err := listDir(src)
		if err != nil {
			m.log.Error("read source path failed", "path", src, "err", err)
		}
		for _, f := range files {
			if m.isDoneMarker(f) {
				m.log.Info("download is ready", "path", filepath.Join(src, f))
				return nil
			}
		}
		m.log.Info("no ready model found", "path", src)
		more, err := wait()
		if err != nil {
			return fmt.Errorf("wait for a download in %s: %w", src, err)
		}
		if !more {
			m.log.Error("no ready model found", "path", src)
			return errkind.New(errkind.NotFound, "wait for download: no %s*%s in %s within %v",
				m.cfg.ModelName, WriteDone, src, m.cfg.WaitTimeout)
		}
	}
}

// Delete removes a file or a directory tree (the reference's delete); a missing path is no error.
func Delete(path string) error {
	if err := os.RemoveAll(path); err != nil {
		return classify(fmt.Errorf("delete %s: %w", path, err))
	}
	return nil
}

// retire deletes a version directory that TF Serving may be watching: it is first renamed to a name
// TF Serving ignores, so it never sees it half-deleted.
func retire(path string) error {
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	gone := path + ".deleting"
	_ = os.RemoveAll(gone) // a leftover of an interrupted deletion
	if err := os.Rename(path, gone); err != nil {
		return Delete(path)
	}
	return Delete(gone)
}
