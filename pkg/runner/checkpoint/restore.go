package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"time"

	tftraining "github.com/monolith-go/monolith/gen/pb/tensorflow/python/training"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pathutil"
)

// ErrNoCheckpoint is what Resolve returns for a directory without a state file: nothing to restore
// (a first start), unlike a state file that cannot be read or names missing files.
var ErrNoCheckpoint = errkind.New(errkind.NotFound, "checkpoint: no checkpoint state")

// Resolve finds the checkpoint to restore from dir: the one named (a base name such as
// model.ckpt-100, joined to dir, or a path), or with name "" the newest in dir's state file (read as
// GetState reads it). A directory without a state file gives ErrNoCheckpoint (wrapped, naming the
// directory); a state file that cannot be read, or a checkpoint whose files are missing, is an error
// naming the file.
func Resolve(dir, name string, log *slog.Logger) (string, error) {
	if name != "" {
		p := joinUnlessAbs(dir, name)
		if !Exists(p) {
			return "", errkind.New(errkind.NotFound, "checkpoint %s: no such checkpoint (%s.index does not exist)", p, p)
		}
		return p, nil
	}
	st, err := GetState(dir, GetStateOptions{Log: log})
	if err != nil {
		return "", fmt.Errorf("checkpoint: restore from %s: %w", dir, err)
	}
	if st == nil {
		return "", fmt.Errorf("%w in %s", ErrNoCheckpoint, dir)
	}
	if !Exists(st.ModelCheckpointPath) {
		return "", errkind.New(errkind.NotFound, "checkpoint state %s names %s, whose files (%s.index) are missing",
			pathutil.Join(dir, StateFile), st.ModelCheckpointPath, st.ModelCheckpointPath)
	}
	return st.ModelCheckpointPath, nil
}

// RestoreDense resolves the checkpoint to restore (Resolve) and reads its dense tensors
// (ReadDense); the step is the checkpoint's -<step> suffix.
func RestoreDense(dir, name string, log *slog.Logger) (prefix string, step int64, tensors []Tensor, err error) {
	prefix, err = Resolve(dir, name, log)
	if err != nil {
		return "", 0, nil, err
	}
	step, err = StepOf(prefix)
	if err != nil {
		return "", 0, nil, err
	}
	tensors, err = ReadDense(prefix)
	if err != nil {
		return "", 0, nil, err
	}
	return prefix, step, tensors, nil
}

// CopyRestoreState is the chief's half of runner_utils' restore flow (RunnerConfig._copy_ckpt_file):
// it points modelDir at a checkpoint of restoreDir by writing modelDir's state files, unless
// modelDir has a "checkpoint" file already (a restarted job keeps its own). The checkpoint is
// restoreDir's newest, or restoreCkpt's base name when that is one of restoreDir's checkpoints.
// modelDir/checkpoint lists it alone; modelDir/monolith_checkpoint keeps restoreDir's (its exempt
// paths replaced), merged with one modelDir has, and lists it as exempt, so retention never deletes
// it. monolith_checkpoint is written last: other workers wait for it (WaitForFile).
//
// Where the reference logs and carries on, it does so too: restoreDir without a state file (nothing
// is written); a state file naming no checkpoint. Failing to read or write files is an error, which
// the reference only logs.
func CopyRestoreState(restoreDir, modelDir string, restoreCkpt *string, log *slog.Logger) error {
	if log == nil {
		log = slog.Default()
	}
	src := pathutil.Join(restoreDir, StateFile)
	if _, err := os.Stat(src); errors.Is(err, fs.ErrNotExist) {
		log.Warn("no checkpoint in restore_dir", "restore_dir", restoreDir)
		return nil
	} else if err != nil {
		return fmt.Errorf("checkpoint: restore_dir: %w", err)
	}
	if err := os.MkdirAll(modelDir, 0o755); err != nil {
		return fmt.Errorf("checkpoint: restore: create model dir: %w", err)
	}
	rs, err := ReadState(restoreDir, log)
	if err != nil {
		log.Warn("restore_dir state not usable", "restore_dir", restoreDir, "err", err)
		return nil
	}
	if rs == nil {
		log.Warn("restore_dir state not readable", "file", src)
		return nil
	}
	path := rs.ModelCheckpointPath
	if restoreCkpt != nil {
		p := pathutil.Join(pathutil.Dirname(rs.ModelCheckpointPath), baseName(*restoreCkpt))
		known := false
		for _, q := range rs.AllModelCheckpointPaths {
			known = known || q == p
		}
		if known {
			path = p
		} else {
			log.Warn("restore_ckpt is not among restore_dir's checkpoints; using the newest", "restore_ckpt", p, "checkpoint", path)
		}
	}
	stateFile := pathutil.Join(modelDir, StateFile)
	if _, err := os.Stat(stateFile); err == nil {
		log.Info("model_dir has a checkpoint state already; restore_dir not applied", "file", stateFile)
		return nil
	}
	st := &tftraining.CheckpointState{ModelCheckpointPath: path, AllModelCheckpointPaths: []string{path}}
	if err := WriteFileAtomic(stateFile, []byte(FormatState(st))); err != nil {
		return fmt.Errorf("checkpoint: restore: %w", err)
	}
	ms, err := ReadMonolithState(restoreDir, true, log)
	if err != nil {
		return fmt.Errorf("checkpoint: restore: %w", err)
	}
	if ms == nil {
		ms = &MonolithState{}
	}
	ms.ExemptModelCheckpointPaths = nil
	if own, err := ReadMonolithState(modelDir, false, log); err != nil {
		return fmt.Errorf("checkpoint: restore: %w", err)
	} else if own != nil {
		// text_format.Merge: repeated fields append, set scalars replace.
		ms.ExemptModelCheckpointPaths = append(ms.ExemptModelCheckpointPaths, own.ExemptModelCheckpointPaths...)
		if own.LastCheckpointSaveTimestamp != nil {
			ms.LastCheckpointSaveTimestamp = own.LastCheckpointSaveTimestamp
		}
		if own.BuiltinHashTableType != nil {
			ms.BuiltinHashTableType = own.BuiltinHashTableType
		}
	}
	for _, p := range st.AllModelCheckpointPaths {
		listed := false
		for _, q := range ms.ExemptModelCheckpointPaths {
			listed = listed || q == p
		}
		if !listed {
			ms.ExemptModelCheckpointPaths = append(ms.ExemptModelCheckpointPaths, p)
		}
	}
	if err := WriteMonolithState(modelDir, ms); err != nil {
		return fmt.Errorf("checkpoint: restore: %w", err)
	}
	log.Info("restore_dir checkpoint state copied", "restore_dir", restoreDir, "model_dir", modelDir, "checkpoint", path)
	return nil
}

// ErrWaitTimeout marks WaitForFile giving up.
var ErrWaitTimeout = errors.New("timed out")

// WaitForFile waits until path exists, looking every poll, for at most timeout (0: until ctx is
// done). It is the other workers' half of the restore flow, waiting for the chief's
// monolith_checkpoint; the reference waits forever. Giving up is an error of kind Runtime wrapping
// ErrWaitTimeout that names the file, what was waited for and how long.
func WaitForFile(ctx context.Context, path, what string, timeout, poll time.Duration, log *slog.Logger) error {
	if log == nil {
		log = slog.Default()
	}
	if poll <= 0 {
		poll = time.Second
	}
	start := time.Now()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("checkpoint: waiting for %s: %w", path, err)
		}
		log.Info("waiting", "for", what, "file", path)
		select {
		case <-t.C:
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return errkind.Wrap(errkind.Runtime, fmt.Errorf("checkpoint: %s: %s did not appear within %v: %w",
					what, path, time.Since(start).Round(time.Millisecond), ErrWaitTimeout))
			}
			return fmt.Errorf("checkpoint: waiting for %s: %w", path, ctx.Err())
		}
	}
}
