// Package ckptdir keeps an estimator's checkpoints in a model directory through pkg/runner/checkpoint:
// each checkpoint in the dense format (<dir>/model.ckpt-<step>.data and .index), the "checkpoint"
// state file naming the newest and those retention keeps (max_to_keep, never deleting the exempt
// checkpoints of monolith_checkpoint), and monolith_checkpoint's last save time. A restarted job
// finds its checkpoints again, retention included.
package ckptdir

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/estimator"
	"github.com/monolith-go/monolith/pkg/runner/checkpoint"
)

// Options configure a Checkpointer.
type Options struct {
	// Dir is the model directory; Open creates it.
	Dir string
	// MaxToKeep and KeepEvery are the saver's retention (checkpoint.SaverOptions).
	MaxToKeep int
	KeepEvery time.Duration
	// NoMonolithState leaves monolith_checkpoint alone (the reference writes it on the chief only).
	NoMonolithState bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Log receives progress; nil means slog.Default().
	Log *slog.Logger
}

// Checkpointer is an estimator.Checkpointer over a model directory. It is safe for concurrent use.
type Checkpointer struct {
	o     Options
	saver *checkpoint.Saver

	mu      sync.Mutex
	pending []checkpoint.Tensor // what the saver's Write writes, during Save
}

var _ estimator.Checkpointer = (*Checkpointer)(nil)

// Open creates o.Dir when needed (an error naming it when it cannot be) and returns its
// Checkpointer, which knows the checkpoints its state file lists for retention.
func Open(o Options) (*Checkpointer, error) {
	if o.Dir == "" {
		return nil, errkind.New(errkind.Value, "ckptdir: no model directory")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("ckptdir: create the model directory: %w", err)
	}
	c := &Checkpointer{o: o}
	s, err := checkpoint.NewSaver(checkpoint.SaverOptions{Dir: o.Dir, MaxToKeep: o.MaxToKeep, KeepEvery: o.KeepEvery,
		Write: c.write, Now: o.Now, Log: o.Log})
	if err != nil {
		return nil, fmt.Errorf("ckptdir: %w", err)
	}
	st, err := checkpoint.ReadState(o.Dir, o.Log)
	if err != nil {
		return nil, fmt.Errorf("ckptdir: %w", err)
	}
	if st != nil {
		s.RecoverLastCheckpoints(st.AllModelCheckpointPaths)
	}
	c.saver = s
	return c, nil
}

// Dir is the model directory.
func (c *Checkpointer) Dir() string { return c.o.Dir }

func (c *Checkpointer) write(_ context.Context, prefix string, _ int64) error {
	return checkpoint.WriteDense(prefix, c.pending)
}

// Save writes the checkpoint of step (files, state file, retention), then monolith_checkpoint's
// last save time (creating the file when missing, as the reference's saver hook does).
func (c *Checkpointer) Save(ctx context.Context, step int64, tensors []estimator.Tensor) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending = make([]checkpoint.Tensor, len(tensors))
	for i, t := range tensors {
		c.pending[i] = checkpoint.Tensor{Name: t.Name, Shape: t.Shape, Float32: t.Float32, Float64: t.Float64, Int64: t.Int64}
	}
	prefix, err := c.saver.Save(ctx, step)
	c.pending = nil
	if err != nil {
		return "", fmt.Errorf("ckptdir: %w", err)
	}
	if err := c.touchMonolithState(); err != nil {
		return "", err
	}
	return prefix, nil
}

// touchMonolithState is the saver hook's _create_or_update_monolith_ckpt_state after a save.
func (c *Checkpointer) touchMonolithState() error {
	if c.o.NoMonolithState {
		return nil
	}
	if err := checkpoint.UpdateMonolithState(c.o.Dir, true, false, c.o.Now(), c.o.Log); err != nil {
		return fmt.Errorf("ckptdir: %w", err)
	}
	return nil
}

// Latest is the newest checkpoint the state file names; ok is false when the directory has no
// state file. A state file naming a checkpoint whose files are missing is an error naming it.
func (c *Checkpointer) Latest(context.Context) (string, int64, bool, error) {
	prefix, err := checkpoint.Resolve(c.o.Dir, "", c.o.Log)
	if errors.Is(err, checkpoint.ErrNoCheckpoint) {
		return "", 0, false, nil
	}
	if err != nil {
		return "", 0, false, fmt.Errorf("ckptdir: %w", err)
	}
	step, err := checkpoint.StepOf(prefix)
	if err != nil {
		return "", 0, false, fmt.Errorf("ckptdir: %w", err)
	}
	return prefix, step, true, nil
}

// Restore reads the checkpoint at path (Reader.Restore).
func (c *Checkpointer) Restore(ctx context.Context, path string) ([]estimator.Tensor, error) {
	return Reader{Log: c.o.Log}.Restore(ctx, path)
}

// LastCheckpoints lists the checkpoints retention keeps, oldest first.
func (c *Checkpointer) LastCheckpoints() []string { return c.saver.LastCheckpoints() }

// Reader reads dense checkpoints anywhere: the estimator's warm start reader.
type Reader struct {
	// Log receives warnings about state files; nil means slog.Default().
	Log *slog.Logger
}

var _ estimator.CheckpointReader = Reader{}

// Restore reads the checkpoint at path: a checkpoint prefix (<dir>/model.ckpt-<step>), or a
// directory, whose newest checkpoint is read (warm_start_from takes either). A missing, partial or
// corrupt checkpoint is an error naming the file.
func (r Reader) Restore(_ context.Context, path string) ([]estimator.Tensor, error) {
	prefix := path
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		p, err := checkpoint.Resolve(path, "", r.Log)
		if err != nil {
			return nil, fmt.Errorf("ckptdir: %w", err)
		}
		prefix = p
	}
	ts, err := checkpoint.ReadDense(prefix)
	if err != nil {
		return nil, fmt.Errorf("ckptdir: %w", err)
	}
	out := make([]estimator.Tensor, len(ts))
	for i, t := range ts {
		out[i] = estimator.Tensor{Name: t.Name, Shape: t.Shape, Float32: t.Float32, Float64: t.Float64, Int64: t.Int64}
	}
	return out, nil
}
