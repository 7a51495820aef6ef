package modelmgr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// copyChunk is how much of a file is copied at a time; a Stop is noticed between chunks.
const copyChunk = 8 << 20

// copyModel is CopyModel without the operation lock. The sub models are copied to their temp
// directories together (one pool of workers, largest files first), and only when all are complete
// are they renamed to their final names.
func (m *Manager) copyModel(ctx context.Context, model, version string, subs []SubModel) ([]string, error) {
	if !pathElem(model) || !pathElem(version) {
		return nil, errkind.New(errkind.Value, "copy model: %q@%q is not a model and a version", model, version)
	}
	type staged struct {
		temp, dst string
		dirs      []treeEntry
	}
	var ready []staged
	discard := func(ss []staged) {
		for _, s := range ss {
			if err := Delete(s.temp); err != nil {
				m.log.Error("remove temp copy failed", "path", s.temp, "err", err)
			}
		}
	}
	result := make([]string, 0, len(subs))
	var files []fileJob
	for _, sub := range subs {
		dst := filepath.Join(m.cfg.ReceivePath, model, sub.Name)
		temp := dst + TempSuffix
		result = append(result, dst)
		if _, err := os.Stat(dst); err == nil {
			m.log.Warn("version already in the receive path", "path", dst)
			continue
		}
		// A leftover temp copy (of an interrupted run) may be incomplete: never trust it.
		err := Delete(temp)
		var dirs []treeEntry
		if err == nil {
			dirs, files, err = prepareTree(sub.Source, temp, files)
		}
		if err != nil {
			discard(append(ready, staged{temp: temp}))
			return nil, fmt.Errorf("copy %s -> %s: %w", sub.Source, temp, err)
		}
		ready = append(ready, staged{temp: temp, dst: dst, dirs: dirs})
	}
	// Largest first: the big variables shards start (and their writeback with them) at once, the
	// small files fill the gaps.
	sort.SliceStable(files, func(i, j int) bool { return files[i].info.Size() > files[j].info.Size() })
	start := time.Now()
	prog := m.startProgress(model, version, files)
	err := m.copyFiles(withProgress(ctx, &prog.copied), files)
	prog.stop()
	if err != nil {
		discard(ready)
		return nil, fmt.Errorf("copy model %s@%s: %w", model, version, err)
	}
	m.copied(model, version, len(files), prog.copied.Load(), time.Since(start))
	for _, s := range ready {
		if err := finishTree(s.temp, s.dirs); err != nil {
			discard(ready)
			return nil, fmt.Errorf("copy model %s@%s: %w", model, version, err)
		}
	}
	for i, s := range ready {
		if err := os.Rename(s.temp, s.dst); err != nil {
			// Take back what was published (atomically, by renaming it away) and drop the rest.
			for _, p := range ready[:i] {
				if err := os.Rename(p.dst, p.temp); err != nil {
					m.log.Error("withdraw copied version failed", "path", p.dst, "err", err)
				}
			}
			discard(ready)
			return nil, classify(fmt.Errorf("copy model: rename %s: %w", s.temp, err))
		}
	}
	return result, nil
}

// treeEntry is a file or directory of a tree being copied, relative to its root.
type treeEntry struct {
	rel  string
	info fs.FileInfo // of the source, symbolic links followed
}

// fileJob is one file to copy.
type fileJob struct {
	src, dst string
	info     fs.FileInfo
}

// prepareTree starts a copy of the directory src to dst (which must not exist) the way
// shutil.copytree does (symbolic links followed): it creates dst and its directories and appends
// the files to copy to files. It returns the directories, parents first, for finishTree.
func prepareTree(src, dst string, files []fileJob) ([]treeEntry, []fileJob, error) {
	root, err := os.Stat(src)
	if err != nil {
		return nil, files, classify(fmt.Errorf("copy tree: %w", err))
	}
	if !root.IsDir() {
		return nil, files, errkind.New(errkind.Value, "copy tree: %s is not a directory", src)
	}
	dirs := []treeEntry{{rel: ".", info: root}}
	var entries []treeEntry
	if err := walk(src, ".", []fs.FileInfo{root}, &dirs, &entries); err != nil {
		return nil, files, err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o777); err != nil {
		return nil, files, classify(fmt.Errorf("copy tree: %w", err))
	}
	for _, d := range dirs {
		if err := os.Mkdir(filepath.Join(dst, d.rel), 0o700); err != nil {
			return nil, files, classify(fmt.Errorf("copy tree: %w", err))
		}
	}
	for _, e := range entries {
		files = append(files, fileJob{src: filepath.Join(src, e.rel), dst: filepath.Join(dst, e.rel), info: e.info})
	}
	return dirs, files, nil
}

// finishTree gives the directories of a copied tree their modes and times (shutil.copystat).
func finishTree(dst string, dirs []treeEntry) error {
	// Children come after their parent in dirs: finish them first, so the parent's times hold.
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := setMeta(filepath.Join(dst, dirs[i].rel), dirs[i].info); err != nil {
			return err
		}
	}
	return nil
}

// walk lists the tree under base/rel in pre-order, following symbolic links; ancestors detects a
// link back to an enclosing directory.
func walk(base, rel string, ancestors []fs.FileInfo, dirs, files *[]treeEntry) error {
	dir := filepath.Join(base, rel)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return classify(fmt.Errorf("copy tree: %w", err))
	}
	for _, e := range entries {
		r := filepath.Join(rel, e.Name())
		info, err := os.Stat(filepath.Join(base, r))
		if err != nil {
			return classify(fmt.Errorf("copy tree: %w", err))
		}
		if !info.IsDir() {
			*files = append(*files, treeEntry{rel: r, info: info})
			continue
		}
		for _, a := range ancestors {
			if os.SameFile(a, info) {
				return errkind.New(errkind.Value, "copy tree: %s links back to an enclosing directory", filepath.Join(base, r))
			}
		}
		*dirs = append(*dirs, treeEntry{rel: r, info: info})
		if err := walk(base, r, append(ancestors, info), dirs, files); err != nil {
			return err
		}
	}
	return nil
}

// copyFiles copies files with CopyWorkers workers; the first failure stops the others.
func (m *Manager) copyFiles(ctx context.Context, files []fileJob) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(m.cfg.CopyWorkers)
	for _, f := range files {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			if err := m.copyFile(gctx, f.src, f.dst, f.info); err != nil {
				return classify(err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return alive(ctx)
}

// copyRegularFile copies the regular file src (info: its os.Stat) to the new file dst with its mode
// and times. Special files (pipes, devices, sockets) are refused, as
// shutil.copyfile does.
func copyRegularFile(ctx context.Context, src, dst string, info fs.FileInfo) (err error) {
	if !info.Mode().IsRegular() {
		return errkind.New(errkind.Value, "copy file: %s is not a regular file (%v)", src, info.Mode().Type())
	}
	in, err := os.Open(src)
	if err != nil {
		return classify(fmt.Errorf("copy file: %w", err))
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return classify(fmt.Errorf("copy file: %w", err))
	}
	defer func() {
		if cerr := out.Close(); err == nil && cerr != nil {
			err = classify(fmt.Errorf("copy file: close %s: %w", dst, cerr))
		}
	}()
	for {
		if err := alive(ctx); err != nil {
			return err
		}
		// io.CopyN reaches (*os.File).ReadFrom: copy_file_range/sendfile, no user-space buffer.
		n, err := io.CopyN(out, in, copyChunk)
		addProgress(ctx, n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return classify(fmt.Errorf("copy file %s: %w", src, err))
		}
	}
	if err := setMeta(dst, info); err != nil {
		return err
	}
	return nil
}

// setMeta gives path the permission bits and access/modification times of info (shutil.copystat).
func setMeta(path string, info fs.FileInfo) error {
	mode := info.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
	if err := os.Chmod(path, mode); err != nil {
		return classify(fmt.Errorf("copy: %w", err))
	}
	if err := os.Chtimes(path, atime(info), info.ModTime()); err != nil {
		return classify(fmt.Errorf("copy: %w", err))
	}
	return nil
}

// CopyObserver is implemented by Metrics that also take each model copy's size and duration (a
// histogram of copy durations on the agent's /metrics).
type CopyObserver interface {
	ObserveCopy(model string, bytes int64, d time.Duration)
}

// DefaultProgressInterval is how often a model copy in progress is logged.
const DefaultProgressInterval = 10 * time.Second

// progress reports a model copy in progress: bytes copied so far against the total, every
// ProgressInterval, so a long copy of a big model is visible in the log.
type progress struct {
	copied atomic.Int64
	done   chan struct{}
	wg     sync.WaitGroup
}

func (m *Manager) startProgress(model, version string, files []fileJob) *progress {
	var total int64
	for _, f := range files {
		total += f.info.Size()
	}
	p := &progress{done: make(chan struct{})}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(m.cfg.ProgressInterval)
		defer t.Stop()
		start := time.Now()
		for {
			select {
			case <-p.done:
				return
			case <-t.C:
				c := p.copied.Load()
				m.log.Info("copying model", "model", model, "version", version, "copied_bytes", c,
					"total_bytes", total, "files", len(files), "elapsed", time.Since(start).Round(time.Millisecond),
					"mb_per_s", mbPerSec(c, time.Since(start)))
			}
		}
	}()
	return p
}

// stop ends the reports and waits for the reporter.
func (p *progress) stop() {
	close(p.done)
	p.wg.Wait()
}

// copied logs a finished model copy and observes it in the metrics.
func (m *Manager) copied(model, version string, files int, bytes int64, d time.Duration) {
	m.log.Info("model copied", "model", model, "version", version, "files", files, "bytes", bytes,
		"duration", d.Round(time.Millisecond), "mb_per_s", mbPerSec(bytes, d))
	if o, ok := m.cfg.Metrics.(CopyObserver); ok {
		o.ObserveCopy(model, bytes, d)
	}
}

func mbPerSec(bytes int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(int64(float64(bytes)/d.Seconds()/1e4)) / 100 // two decimals
}

type progressKey struct{}

// withProgress makes copyRegularFile add the bytes it copies to c.
func withProgress(ctx context.Context, c *atomic.Int64) context.Context {
	return context.WithValue(ctx, progressKey{}, c)
}

func addProgress(ctx context.Context, n int64) {
	if c, ok := ctx.Value(progressKey{}).(*atomic.Int64); ok && n > 0 {
		c.Add(n)
	}
}
