// Package fsutil copies files and directory trees with retries (monolith/utils.py's CopyFile and
// CopyRecursively) on the local file system.
//
// The reference goes through tf.io.gfile, which also reaches HDFS and GCS; those file systems are
// not part of this port. Unlike the reference, failures of the parallel copy are returned (its
// ThreadPoolExecutor.map results were never read, so they were lost), and everything stops when
// ctx ends.
package fsutil

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// CopyOptions are CopyFile's keyword arguments.
type CopyOptions struct {
	// Overwrite replaces an existing dst; without it an existing dst is an error (fs.ErrExist).
	Overwrite bool
	// SkipNonexist makes a missing source a no-op (after the retries), as the reference's default.
	SkipNonexist bool
	// MaxRetries is how many attempts a missing source gets (the reference's max_retries, default
	// 5; eventually consistent stores may show a file late). Other errors are not retried.
	MaxRetries int
	// RetryDelay is the pause between attempts (the reference has none).
	RetryDelay time.Duration
}

// DefaultCopyOptions are the reference's defaults: overwrite=True, skip_nonexist=True,
// max_retries=5.
func DefaultCopyOptions() CopyOptions {
	return CopyOptions{Overwrite: true, SkipNonexist: true, MaxRetries: 5}
}

// CopyFile copies the regular file src to dst (mode kept), as CopyFile does: a missing src is
// retried up to MaxRetries times, then skipped (SkipNonexist) or returned as an error wrapping
// fs.ErrNotExist. The copy goes through a temporary file renamed into place, so dst is never seen
// half-written.
func CopyFile(ctx context.Context, src, dst string, o CopyOptions) error {
	attempts := max(o.MaxRetries, 1)
	for i := range attempts {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("copy %s: %w", src, err)
		}
		err := copyOnce(src, dst, o.Overwrite)
		if err == nil {
			return nil
		}
		if !errors.Is(err, fs.ErrNotExist) || !isMissingSource(src) {
			return err
		}
		if !o.SkipNonexist {
			return errkind.Wrap(errkind.NotFound, err)
		}
		if i+1 < attempts && o.RetryDelay > 0 {
			t := time.NewTimer(o.RetryDelay)
			select {
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("copy %s: %w", src, ctx.Err())
			case <-t.C:
			}
		}
	}
	return nil
}

func isMissingSource(src string) bool {
	_, err := os.Stat(src)
	return errors.Is(err, fs.ErrNotExist)
}

func copyOnce(src, dst string, overwrite bool) (err error) {
	// Stat before opening: opening a FIFO would block until a writer comes.
	st, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	if !st.Mode().IsRegular() {
		return errkind.New(errkind.Value, "copy: %s is not a regular file", src)
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	defer in.Close()
	if !overwrite {
		if _, err := os.Lstat(dst); err == nil {
			return fmt.Errorf("copy %s: %s: %w", src, dst, fs.ErrExist)
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp*")
	if err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := io.Copy(tmp, in); err != nil {
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	if err := tmp.Chmod(st.Mode().Perm()); err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	if !overwrite {
		// Link fails if dst appeared meanwhile, so an existing file is never replaced.
		if err := os.Link(tmp.Name(), dst); err != nil {
			return fmt.Errorf("copy %s: %w", src, err)
		}
		return os.Remove(tmp.Name())
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return nil
}

// TreeOptions are CopyRecursively's keyword arguments.
type TreeOptions struct {
	// MaxWorkers copies files in parallel when above 1 (the reference's max_workers, default 1).
	MaxWorkers int
	// SkipNonexist, MaxRetries and RetryDelay are passed to CopyFile; a missing src tree is a
	// no-op with SkipNonexist, an error of kind Value otherwise ("<src> doesn't exist!").
	SkipNonexist bool
	MaxRetries   int
	RetryDelay   time.Duration
}

// DefaultTreeOptions are the reference's defaults: max_workers=1, skip_nonexist=True,
// max_retries=5.
func DefaultTreeOptions() TreeOptions {
	return TreeOptions{MaxWorkers: 1, SkipNonexist: true, MaxRetries: 5}
}

// CopyRecursively copies src to dst as CopyRecursively does: a file is copied (overwriting); for
// a directory, an existing dst is removed first, then the tree is recreated and its files copied,
// by MaxWorkers workers. The first error stops the copy and is returned.
func CopyRecursively(ctx context.Context, src, dst string, o TreeOptions) error {
	fileOpts := CopyOptions{Overwrite: true, SkipNonexist: o.SkipNonexist, MaxRetries: o.MaxRetries, RetryDelay: o.RetryDelay}
	type job struct{ src, dst string }
	var jobs []job
	var walk func(src, dst string) error
	walk = func(src, dst string) error {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("copy tree: %w", err)
		}
		st, err := os.Stat(src)
		if errors.Is(err, fs.ErrNotExist) {
			if o.SkipNonexist {
				return nil
			}
			return errkind.New(errkind.Value, "%s doesn't exist!", src)
		}
		if err != nil {
			return fmt.Errorf("copy tree: %w", err)
		}
		if !st.IsDir() {
			jobs = append(jobs, job{src, dst})
			return nil
		}
		if err := os.RemoveAll(dst); err != nil {
			return fmt.Errorf("copy tree: replace %s: %w", dst, err)
		}
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return fmt.Errorf("copy tree: %w", err)
		}
		entries, err := os.ReadDir(src)
		if err != nil {
			return fmt.Errorf("copy tree: %w", err)
		}
		for _, e := range entries {
			if err := walk(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(src, dst); err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(o.MaxWorkers, 1))
	for _, j := range jobs {
		g.Go(func() error { return CopyFile(gctx, j.src, j.dst, fileOpts) })
	}
	return g.Wait()
}
