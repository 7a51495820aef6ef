package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	tftraining "github.com/monolith-go/monolith/gen/pb/tensorflow/python/training"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pathutil"
	"github.com/monolith-go/monolith/pkg/pytext"
)

// ModeTrain is the mode (tf.estimator.ModeKeys.TRAIN) in which a restore_ckpt override is applied
// once only.
const ModeTrain = "train"

// RestoreCkptMarker is the file in a checkpoint directory that records a restore_ckpt override
// applied in train mode, so that a restarted job resumes from its own newer checkpoints.
const RestoreCkptMarker = "restore_ckpt"

// DefaultReadRetries is how often GetState reads a state file again that exists but cannot be read
// (the reference's max_retry).
const DefaultReadRetries = 5

// FormatState is the CheckpointState in TensorFlow's text format, as
// text_format.MessageToString writes it (what tf.train.get_checkpoint_state reads).
func FormatState(st *tftraining.CheckpointState) string { return pytext.Format(st) }

// WriteStateOptions tune WriteState.
type WriteStateOptions struct {
	// LatestFilename is the state file's name; "" means StateFile.
	LatestFilename string
	// RelativePaths writes absolute checkpoint paths relative to the directory (the saver's
	// save_relative_paths).
	RelativePaths bool
}

// WriteState is TensorFlow's update_checkpoint_state_internal: it writes the CheckpointState naming
// modelPath as the newest checkpoint and all (oldest first) as those not yet deleted into
// dir/<state file>, atomically. modelPath is appended to all unless all ends with it. When dir is
// relative, relative paths are written relative to dir. A modelPath that is the state file itself is
// an error of kind Runtime.
func WriteState(dir, modelPath string, all []string, o WriteStateOptions) error {
	name := o.LatestFilename
	if name == "" {
		name = StateFile
	}
	if strings.Contains(name, "/") {
		return errkind.New(errkind.Value, "'latest_filename' must not contain path components")
	}
	file := pathutil.Join(dir, name)
	paths := append([]string(nil), all...)
	if o.RelativePaths {
		modelPath = relIfAbs(modelPath, dir)
		for i, p := range paths {
			paths[i] = relIfAbs(p, dir)
		}
	}
	if len(paths) == 0 || paths[len(paths)-1] != modelPath {
		paths = append(paths, modelPath)
	}
	if !IsAbs(dir) {
		if !IsAbs(modelPath) {
			modelPath = relTo(modelPath, dir)
		}
		for i, p := range paths {
			if !IsAbs(p) {
				paths[i] = relTo(p, dir)
			}
		}
	}
	if file == modelPath {
		return errkind.New(errkind.Runtime, "Save path '%s' conflicts with path used for checkpoint state.  Please use a different save path.", modelPath)
	}
	st := &tftraining.CheckpointState{ModelCheckpointPath: modelPath, AllModelCheckpointPaths: paths}
	if err := WriteFileAtomic(file, []byte(FormatState(st))); err != nil {
		return fmt.Errorf("checkpoint: write state: %w", err)
	}
	return nil
}

func relIfAbs(p, dir string) string {
	if IsAbs(p) {
		return relTo(p, dir)
	}
	return p
}

// relTo is os.path.relpath(p, dir) for local paths (both relative or both absolute); an hdfs path
// or one that has no relative form is kept.
func relTo(p, dir string) string {
	if strings.HasPrefix(p, "hdfs:/") || strings.HasPrefix(dir, "hdfs:/") {
		return p
	}
	r, err := filepath.Rel(dir, p)
	if err != nil {
		return p
	}
	return r
}

// renameHook runs between writing the temporary file and renaming it over the target; tests set it
// to simulate a crash at that point.
var renameHook func(tmp, target string) error

// WriteFileAtomic writes data to path through a temporary file in the same directory, synced and
// renamed over path (TensorFlow's atomic_write_string_to_file), so a reader sees the old content or
// the new, never a part. The temporary file is removed on failure.
func WriteFileAtomic(path string, data []byte) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, base+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("write %s: %w", path, werr)
	}
	if renameHook != nil {
		if err := renameHook(tmp, path); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	syncDir(dir)
	return nil
}

// syncDir makes a rename in dir durable; a file system that cannot sync directories is fine.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// GetStateOptions are what runner_utils' get_checkpoint_state adds to TensorFlow's.
type GetStateOptions struct {
	// LatestFilename is the state file's name; "" means StateFile.
	LatestFilename string
	// RestoreCkpt is the restore_ckpt flag: a checkpoint (its base name counts) to start from instead
	// of the newest; nil means none.
	RestoreCkpt *string
	// Mode is the mode flag (train, eval, infer). In train mode the override is applied once: the
	// state file is rewritten and RestoreCkptMarker written; other modes apply it on every call.
	Mode string
	// Retries is how often a state file that exists but cannot be read is read again; 0 means
	// DefaultReadRetries.
	Retries int
	// Log receives warnings; nil means slog.Default().
	Log *slog.Logger
}

// ErrUnreadableState is what GetState's error Is when the state file stays unreadable: the model
// dir's content is wrong (bad input), not a passing failure.
var ErrUnreadableState = errors.New("checkpoint state file unreadable")

// unreadableState is the read's error, which also Is ErrUnreadableState.
type unreadableState struct{ err error }

func (u unreadableState) Error() string   { return u.err.Error() }
func (u unreadableState) Unwrap() []error { return []error{u.err, ErrUnreadableState} }

// getStateMu makes GetState calls of one process see each other's marker and state writes, as the
// reference's lock does.
var getStateMu sync.Mutex

// GetState is runner_utils' replacement of tf.train.get_checkpoint_state: ReadState, read again up
// to Retries times while the state file exists but cannot be read, then an error of kind Generic
// ("read ckpt error!") naming the file; then the restore_ckpt override of o (see GetStateOptions).
// No state file gives (nil, nil).
//
// Two differences from the reference, on purpose: a read that succeeds on the last retry is used (the
// reference raises after its fifth retry even when it succeeded), and a restore_ckpt that is not
// among the state's checkpoints is never applied (the reference warns, then applies it in train mode
// anyway, pointing the state at a checkpoint that does not exist).
func GetState(dir string, o GetStateOptions) (*tftraining.CheckpointState, error) {
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	name := o.LatestFilename
	if name == "" {
		name = StateFile
	}
	retries := o.Retries
	if retries <= 0 {
		retries = DefaultReadRetries
	}
	getStateMu.Lock()
	defer getStateMu.Unlock()
	file := pathutil.Join(dir, name)
	st, unreadable, err := readStateFile(dir, name, log)
	// The retries warn no more than the first read did.
	quiet := slog.New(slog.DiscardHandler)
	for i := 0; err == nil && st == nil && unreadable != nil && i < retries; i++ {
		st, unreadable, err = readStateFile(dir, name, quiet)
	}
	if err != nil {
		return nil, err
	}
	if st == nil && unreadable != nil {
		return nil, errkind.New(errkind.Generic, "read ckpt error!: %s still unreadable after %d retries: %w", file, retries, unreadableState{unreadable})
	}
	if o.RestoreCkpt == nil || name != StateFile || st == nil {
		return st, nil
	}
	applyRestoreCkpt(dir, st, *o.RestoreCkpt, o.Mode, log)
	return st, nil
}

// applyRestoreCkpt points st at restoreCkpt (its base name in the directory of st's newest
// checkpoint) when that is one of st's checkpoints: in train mode only while RestoreCkptMarker is
// absent, and then it writes the marker and the state file; in other modes always, in memory.
// Failures to write are logged, as in the reference: the override is best effort.
func applyRestoreCkpt(dir string, st *tftraining.CheckpointState, restoreCkpt, mode string, log *slog.Logger) {
	restore := pathutil.Join(pathutil.Dirname(st.ModelCheckpointPath), baseName(restoreCkpt))
	marker := pathutil.Join(dir, RestoreCkptMarker)
	known := false
	for _, p := range st.AllModelCheckpointPaths {
		known = known || p == restore
	}
	switch {
	case !known:
		log.Warn("restore_ckpt is not a checkpoint of the directory; keeping the newest", "restore_ckpt", restoreCkpt, "dir", dir, "checkpoint", st.ModelCheckpointPath)
		return
	case restore == st.ModelCheckpointPath:
		log.Warn("model_checkpoint_path and restore_ckpt are the same", "restore_ckpt", restoreCkpt)
	case mode != ModeTrain:
		log.Info("restore_ckpt applied", "mode", mode, "checkpoint", restore)
		st.ModelCheckpointPath = restore
		return
	}
	if mode != ModeTrain {
		return
	}
	if _, err := os.Stat(marker); err == nil {
		log.Info("restore_ckpt already applied once; keeping the newest", "marker", marker, "checkpoint", st.ModelCheckpointPath)
		return
	} else if !errors.Is(err, fs.ErrNotExist) {
		log.Error("restore_ckpt: cannot check the marker", "marker", marker, "err", err)
		return
	}
	st.ModelCheckpointPath = restore
	if err := os.WriteFile(marker, []byte(restore), 0o644); err != nil {
		log.Error("restore_ckpt: write marker", "marker", marker, "err", err)
		return
	}
	if err := WriteFileAtomic(pathutil.Join(dir, StateFile), []byte(FormatState(st))); err != nil {
		log.Error("restore_ckpt: write state", "err", err)
		return
	}
	log.Info("restore_ckpt applied once", "mode", mode, "checkpoint", restore, "marker", marker)
}

// baseName is os.path.basename: what follows the last "/" ("" for a path ending in one).
func baseName(p string) string { return p[strings.LastIndexByte(p, '/')+1:] }
