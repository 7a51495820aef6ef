// Package checkpoint is the one package that reads and writes a training job's checkpoint
// directory, as TensorFlow and Monolith's save_utils/runner_utils do:
//
//   - the state files: "checkpoint", TensorFlow's text-format CheckpointState naming the newest
//     checkpoint and those kept (ReadState, GetState with runner_utils' retries and restore_ckpt
//     override, WriteState), and "monolith_checkpoint", Monolith's MonolithCheckpointState listing the
//     checkpoints retention must never delete (ReadMonolithState, WriteMonolithState); both written
//     atomically (WriteFileAtomic);
//   - saving: Saver writes numbered checkpoints (<dir>/model.ckpt-<step>.*) through a caller's
//     WriteFunc with max_to_keep retention, and SaverHook (NoFirstSaveCheckpointSaverHook) runs it
//     from a run loop every N steps or seconds, at the end and on demand (the controller's
//     SaveCheckpoint), with saver listeners;
//   - the dense checkpoint format (WriteDense, ReadDense) and restoring (Resolve, RestoreDense), where
//     a corrupt or partial checkpoint is an error naming the file;
//   - runner_utils' restore flow (CopyRestoreState, WaitForFile);
//   - finding checkpoints as tf.train.latest_checkpoint and checkpoints_iterator do (Latest, Iterator).
//
// Time is injected (Clock, Now) so that tests never sleep.
package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/prototext"

	tftraining "github.com/monolith-go/monolith/gen/pb/tensorflow/python/training"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pathutil"
	"github.com/monolith-go/monolith/pkg/pyint"
)

// StateFile is the name of the CheckpointState file in a checkpoint directory.
const StateFile = "checkpoint"

// ReadState is tf.train.get_checkpoint_state(dir): the CheckpointState in dir/checkpoint with
// relative paths joined to dir, or nil when there is no such file. As in TensorFlow, a file that
// cannot be read or parsed is logged and ignored (nil, nil), and a state without
// model_checkpoint_path is an error of kind Value. Paths starting with hdfs:/ count as absolute
// (IsAbs), as they do once the reference's runner_utils is imported.
func ReadState(dir string, log *slog.Logger) (*tftraining.CheckpointState, error) {
	st, _, err := readStateFile(dir, StateFile, log)
	return st, err
}

// readStateFile reads dir/name as ReadState does; unreadable is the reason a file that exists was
// ignored (nil when it was read, or is absent).
func readStateFile(dir, name string, log *slog.Logger) (st *tftraining.CheckpointState, unreadable error, err error) {
	if log == nil {
		log = slog.Default()
	}
	file := pathutil.Join(dir, name)
	if readHook != nil {
		readHook(file)
	}
	data, rerr := os.ReadFile(file)
	if errors.Is(rerr, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if rerr != nil {
		log.Warn("checkpoint state ignored", "file", file, "err", rerr)
		return nil, rerr, nil
	}
	st = &tftraining.CheckpointState{}
	if perr := prototext.Unmarshal(data, st); perr != nil {
		log.Warn("checkpoint state ignored", "file", file, "err", perr)
		return nil, perr, nil
	}
	if st.ModelCheckpointPath == "" {
		return nil, nil, errkind.New(errkind.Value, "Invalid checkpoint state loaded from %s", dir)
	}
	st.ModelCheckpointPath = joinUnlessAbs(dir, st.ModelCheckpointPath)
	for i, p := range st.AllModelCheckpointPaths {
		st.AllModelCheckpointPaths[i] = joinUnlessAbs(dir, p)
	}
	return st, nil, nil
}

// readHook runs before each read of a state file; tests set it to change the file between reads.
var readHook func(file string)

// IsAbs is the reference's patched os.path.isabs (runner_utils.isabs, and agent_service's utils):
// a path starting with "hdfs:/" is absolute, as is one starting with "/".
func IsAbs(path string) bool {
	return strings.HasPrefix(path, "hdfs:/") || strings.HasPrefix(path, "/")
}

// joinUnlessAbs is TensorFlow's "if not os.path.isabs(p): p = os.path.join(dir, p)" with IsAbs.
func joinUnlessAbs(dir, p string) string {
	if IsAbs(p) {
		return p
	}
	return pathutil.Join(dir, p)
}

// Latest is tf.train.latest_checkpoint(dir): the newest checkpoint's path prefix when its files
// exist (a V2 checkpoint's <prefix>.index, or a V1 checkpoint matching the prefix as a pattern),
// "" when there is none.
func Latest(dir string, log *slog.Logger) (string, error) {
	if log == nil {
		log = slog.Default()
	}
	st, err := ReadState(dir, log)
	if err != nil || st == nil {
		return "", err
	}
	p := st.ModelCheckpointPath
	for _, pattern := range []string{p + ".index", p} {
		matches, err := filepath.Glob(pattern)
		if err != nil {
			return "", errkind.New(errkind.Value, "checkpoint path %q is not a valid pattern: %w", pattern, err)
		}
		if len(matches) > 0 {
			return p, nil
		}
	}
	log.Error("Couldn't match files for checkpoint " + p)
	return "", nil
}

// StepOf is the global step a checkpoint path ends with: the saver names checkpoints
// <prefix>-<global step>. The number after the base name's last '-' is taken (the reference takes
// the part after the first '-', which fails on prefixes holding a '-'); a name without one is an
// error of kind Value.
func StepOf(path string) (int64, error) {
	base := filepath.Base(path)
	i := strings.LastIndexByte(base, '-')
	if i < 0 {
		return 0, errkind.New(errkind.Value, "checkpoint %q has no -<global step> suffix", path)
	}
	step, err := pyint.Parse(base[i+1:])
	if err != nil {
		return 0, errkind.New(errkind.Value, "checkpoint %q has no -<global step> suffix: %w", path, err)
	}
	return step, nil
}

// Clock is the time an Iterator waits by.
type Clock interface {
	Now() time.Time
	// Sleep waits for d, or until ctx is done (then it returns ctx's error).
	Sleep(ctx context.Context, d time.Duration) error
}

// SystemClock is the real clock.
type SystemClock struct{}

// Now is time.Now.
func (SystemClock) Now() time.Time { return time.Now() }

// Sleep waits for d or ctx.
func (SystemClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ErrTimeout is what Iterator.Next returns when no new checkpoint appeared within the timeout (the
// end of tf.train.checkpoints_iterator).
var ErrTimeout = errors.New("checkpoint: timed out waiting for a new checkpoint")

// DefaultPollInterval is how often an Iterator looks for a new checkpoint
// (wait_for_new_checkpoint's seconds_to_sleep).
const DefaultPollInterval = time.Second

// Iterator yields each new checkpoint of a directory as it appears (tf.train.checkpoints_iterator).
// It is not safe for concurrent use.
type Iterator struct {
	// Latest finds the newest checkpoint, "" when there is none.
	Latest func() (string, error)
	// Clock waits; nil means SystemClock.
	Clock Clock
	// Timeout bounds the wait for each new checkpoint; 0 waits forever (timeout=None).
	Timeout time.Duration
	// PollInterval is the time between looks; 0 means DefaultPollInterval.
	PollInterval time.Duration
	// MinInterval is the least time between two yields (min_interval_secs).
	MinInterval time.Duration
	// Logger receives the progress messages; nil means slog.Default().
	Logger *slog.Logger

	last      string
	lastStart time.Time
}

// NewIterator returns an Iterator of dir's checkpoints (Latest(dir)) that gives up after waiting
// timeout for a new one.
func NewIterator(dir string, timeout time.Duration, log *slog.Logger) *Iterator {
	return &Iterator{
		Latest:  func() (string, error) { return Latest(dir, log) },
		Timeout: timeout,
		Logger:  log,
	}
}

// Next waits for a checkpoint other than the one it returned last and returns it. It returns
// ErrTimeout when none appeared within Timeout, the error of Latest, or ctx's error.
func (it *Iterator) Next(ctx context.Context) (string, error) {
	clk := it.Clock
	if clk == nil {
		clk = SystemClock{}
	}
	log := it.Logger
	if log == nil {
		log = slog.Default()
	}
	poll := it.PollInterval
	if poll <= 0 {
		poll = DefaultPollInterval
	}
	if it.Latest == nil {
		return "", errkind.New(errkind.Value, "checkpoint: Iterator.Latest is not set")
	}
	if it.last != "" && it.MinInterval > 0 {
		if wait := it.lastStart.Add(it.MinInterval).Sub(clk.Now()); wait > 0 {
			if err := clk.Sleep(ctx, wait); err != nil {
				return "", fmt.Errorf("checkpoint: waiting between checkpoints: %w", err)
			}
		}
	}
	log.Info("Waiting for new checkpoint")
	var stop time.Time
	if it.Timeout > 0 {
		stop = clk.Now().Add(it.Timeout)
	}
	for {
		if err := ctx.Err(); err != nil {
			return "", fmt.Errorf("checkpoint: waiting for a new checkpoint: %w", err)
		}
		p, err := it.Latest()
		if err != nil {
			return "", fmt.Errorf("checkpoint: %w", err)
		}
		if p != "" && p != it.last {
			log.Info("Found new checkpoint at " + p)
			it.last = p
			it.lastStart = clk.Now()
			return p, nil
		}
		if !stop.IsZero() && clk.Now().Add(poll).After(stop) {
			log.Info("Timed-out waiting for a checkpoint.")
			return "", ErrTimeout
		}
		if err := clk.Sleep(ctx, poll); err != nil {
			return "", fmt.Errorf("checkpoint: waiting for a new checkpoint: %w", err)
		}
	}
}
