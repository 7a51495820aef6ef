package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pathutil"
)

// DefaultBasename is the checkpoints' base name: checkpoint <step> is <dir>/model.ckpt-<step>.
const DefaultBasename = "model.ckpt"

// WriteFunc writes the files of checkpoint prefix (<prefix>.<anything>), the variables at step. The
// saver deletes a checkpoint by removing every <prefix>.* path. WriteDense is one such writer.
type WriteFunc func(ctx context.Context, prefix string, step int64) error

// SaverOptions configure a Saver (the reference's PartialRecoverySaver arguments).
type SaverOptions struct {
	// Dir is the checkpoint directory (the model dir); it must exist when Save runs.
	Dir string
	// Basename names the checkpoints <Dir>/<Basename>-<step>; "" means DefaultBasename.
	Basename string
	// MaxToKeep is how many checkpoints retention keeps, not counting exempt ones; 0 keeps every
	// checkpoint (and the state file lists only the newest), as max_to_keep=None does.
	MaxToKeep int
	// KeepEvery keeps, besides the MaxToKeep newest, one checkpoint for every KeepEvery of training
	// (keep_checkpoint_every_n_hours); 0 keeps none.
	KeepEvery time.Duration
	// ExemptPaths are checkpoints (base names count) never deleted, used until the directory's
	// monolith_checkpoint lists some (exempt_checkpoint_paths).
	ExemptPaths []string
	// RelativePaths writes the state file with paths relative to Dir (save_relative_paths).
	RelativePaths bool
	// Write writes a checkpoint's files; required.
	Write WriteFunc
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Log receives progress; nil means slog.Default().
	Log *slog.Logger
}

type savedCheckpoint struct {
	path string
	at   time.Time
}

// Saver writes numbered checkpoints into a directory and keeps its state files: the CheckpointState
// in "checkpoint" (newest checkpoint and those retention keeps, oldest first) written atomically
// after each checkpoint's files, and at most one old checkpoint deleted per save once more than
// MaxToKeep non-exempt ones exist. The checkpoints exempt from deletion are those listed in the
// directory's monolith_checkpoint file (ReadMonolithState), read at each save. It is the save and
// retention half of the reference's PartialRecoverySaver; a Saver is safe for concurrent use.
type Saver struct {
	o SaverOptions

	mu       sync.Mutex
	last     []savedCheckpoint
	toDelete []savedCheckpoint
	exempt   map[string]bool
	nextKeep time.Time
}

// NewSaver checks o and returns a Saver that knows no earlier checkpoints (see
// RecoverLastCheckpoints).
func NewSaver(o SaverOptions) (*Saver, error) {
	if o.Dir == "" {
		return nil, errkind.New(errkind.Value, "checkpoint: saver needs a directory")
	}
	if o.Write == nil {
		return nil, errkind.New(errkind.Value, "checkpoint: saver needs a Write function for the checkpoint files")
	}
	if o.MaxToKeep < 0 {
		return nil, errkind.New(errkind.Value, "checkpoint: max_to_keep %d is negative", o.MaxToKeep)
	}
	if o.Basename == "" {
		o.Basename = DefaultBasename
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	s := &Saver{o: o, exempt: map[string]bool{}}
	for _, p := range o.ExemptPaths {
		s.exempt[filepath.Base(p)] = true
	}
	if o.KeepEvery > 0 {
		s.nextKeep = o.Now().Add(o.KeepEvery)
	}
	return s, nil
}

// Dir is the checkpoint directory.
func (s *Saver) Dir() string { return s.o.Dir }

// Prefix is the path prefix of the checkpoint of step (SaveHelper.get_ckpt_prefix).
func (s *Saver) Prefix(step int64) string {
	return pathutil.Join(s.o.Dir, s.o.Basename) + "-" + strconv.FormatInt(step, 10)
}

// Save writes the checkpoint of step: its files (Write), then the state file naming it, then
// retention. It returns the checkpoint's prefix. A missing directory is an error of kind Value.
func (s *Saver) Save(ctx context.Context, step int64) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	prefix := s.Prefix(step)
	if fi, err := os.Stat(s.o.Dir); err != nil || !fi.IsDir() {
		return "", errkind.New(errkind.Value, "Parent directory of %s doesn't exist, can't save.", prefix)
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("checkpoint: save %s: %w", prefix, err)
	}
	if err := s.o.Write(ctx, prefix, step); err != nil {
		return "", fmt.Errorf("checkpoint: write %s: %w", prefix, err)
	}
	if err := s.record(prefix); err != nil {
		return "", err
	}
	paths := make([]string, len(s.last))
	for i, c := range s.last {
		paths[i] = c.path
	}
	if err := WriteState(s.o.Dir, prefix, paths, WriteStateOptions{RelativePaths: s.o.RelativePaths}); err != nil {
		return "", err
	}
	s.deleteOld()
	return prefix, nil
}

// record is _RecordLastCheckpoint: prefix becomes the newest checkpoint; when more than MaxToKeep
// non-exempt ones are listed, the oldest non-exempt one is queued for deletion.
func (s *Saver) record(prefix string) error {
	if s.o.MaxToKeep == 0 {
		return nil
	}
	kept := s.last[:0]
	for _, c := range s.last {
		if c.path != prefix {
			kept = append(kept, c)
		}
	}
	s.last = append(kept, savedCheckpoint{path: prefix, at: s.o.Now()})
	exempt, err := s.exemptLocked()
	if err != nil {
		return err
	}
	listedExempt := 0
	for _, c := range s.last {
		if exempt[filepath.Base(c.path)] {
			listedExempt++
		}
	}
	if len(s.last)-listedExempt <= s.o.MaxToKeep {
		return nil
	}
	for i, c := range s.last {
		if !exempt[filepath.Base(c.path)] {
			s.toDelete = append(s.toDelete, c)
			s.last = append(s.last[:i:i], s.last[i+1:]...)
			break
		}
	}
	return nil
}

// ExemptCheckpoints returns the base names of the checkpoints retention never deletes.
func (s *Saver) ExemptCheckpoints() (map[string]bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exemptLocked()
}

// exemptLocked is the exempt_checkpoint_paths property: the exempt paths of the directory's
// monolith_checkpoint when it lists any, else the ones known before. An unreadable file is an error,
// so a save never deletes what it may protect.
func (s *Saver) exemptLocked() (map[string]bool, error) {
	st, err := ReadMonolithState(s.o.Dir, true, s.o.Log)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: exempt checkpoints: %w", err)
	}
	if st != nil && len(st.ExemptModelCheckpointPaths) > 0 {
		s.exempt = map[string]bool{}
		for _, p := range st.ExemptModelCheckpointPaths {
			s.exempt[filepath.Base(p)] = true
		}
	}
	out := make(map[string]bool, len(s.exempt))
	for k := range s.exempt {
		out[k] = true
	}
	return out, nil
}

// deleteOld is _MaybeDeleteOldCheckpoints: it deletes the files of the first queued checkpoint,
// unless KeepEvery keeps it.
func (s *Saver) deleteOld() {
	if len(s.toDelete) == 0 {
		return
	}
	c := s.toDelete[0]
	s.toDelete = s.toDelete[1:]
	if s.o.KeepEvery > 0 && c.at.After(s.nextKeep) {
		s.nextKeep = s.nextKeep.Add(s.o.KeepEvery)
		s.o.Log.Info("checkpoint kept (keep every)", "checkpoint", c.path)
		return
	}
	files, err := filepath.Glob(c.path + ".*")
	if err != nil {
		s.o.Log.Error("checkpoint: delete: bad pattern", "checkpoint", c.path, "err", err)
		return
	}
	for _, f := range files {
		if err := os.RemoveAll(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.o.Log.Warn("checkpoint: delete failed", "file", f, "err", err)
		}
	}
	s.o.Log.Info("Deleted checkpoint", "checkpoint", c.path)
}

// LastCheckpoints lists the checkpoints retention keeps, oldest first (last_checkpoints).
func (s *Saver) LastCheckpoints() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.last))
	for i, c := range s.last {
		out[i] = c.path
	}
	return out
}

// RecoverLastCheckpoints makes the saver know the checkpoints of paths (oldest first) that still
// exist, with their files' modification times, after a restart (recover_last_checkpoints, which the
// session manager calls with the restored state's all_model_checkpoint_paths).
func (s *Saver) RecoverLastCheckpoints(paths []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = s.last[:0]
	for _, p := range paths {
		var at time.Time
		for _, f := range []string{p + ".index", p} {
			if fi, err := os.Stat(f); err == nil {
				at = fi.ModTime()
				break
			}
		}
		if at.IsZero() {
			continue
		}
		s.last = append(s.last, savedCheckpoint{path: p, at: at})
	}
	s.o.Log.Info("recovered last checkpoints", "checkpoints", len(s.last))
}
