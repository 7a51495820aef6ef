// Package dnnckpt is the checkpoint of a dnn job: the dense checkpoint of pkg/estimator/ckptdir
// (<model_dir>/model.ckpt-<step>.data and .index: the MLP, its optimizer's slots, the step) and,
// beside it, the embedding tables' dump of the same step, written by the parameter servers
// themselves (pkg/ps: EntryDump TFRecord shards, <prefix>.embeddings/<table>/ps_<i>_of_<n>-NNNNN-of-NNNNN,
// which pkg/export reads). The dump is written first and the dense checkpoint, whose state file
// names the checkpoint, last: a checkpoint the state file names is complete. Retention deletes
// <prefix>.* and so the dump with its checkpoint. A restore onto another number of parameter
// servers re-shards the dump (floormod(id, num_ps)).
//
// The chief saves and restores both (Tables); the other workers restore the dense parameters and
// save nothing (RestoreOnly): the tables are the parameter servers', restored by the chief.
package dnnckpt

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"

	"github.com/monolith-go/monolith/pkg/estimator"
	"github.com/monolith-go/monolith/pkg/export"
	"github.com/monolith-go/monolith/pkg/ps"
)

// checkpointBasename is the base name of ckptdir's checkpoints (the saver's default).
const checkpointBasename = "model.ckpt"

// EmbeddingsDir is the directory of the tables' dump of the checkpoint at prefix, absolute: the
// parameter servers (other processes, maybe with another working directory) write and read it.
func EmbeddingsDir(prefix string) (string, error) {
	dir, err := filepath.Abs(prefix + export.EmbeddingsSuffix)
	if err != nil {
		return "", fmt.Errorf("the embeddings of checkpoint %s: %w", prefix, err)
	}
	return dir, nil
}

// Tables is the chief's checkpointer: the dense checkpointer's checkpoints with the embedding
// tables saved and restored beside them.
type Tables struct {
	estimator.Checkpointer
	dir    string // the model dir
	router *ps.Router
	log    *slog.Logger
}

// NewTables saves and restores the tables router routes to with dense's checkpoints, which are
// ckptdir's in modelDir.
func NewTables(dense estimator.Checkpointer, modelDir string, router *ps.Router, log *slog.Logger) *Tables {
	return &Tables{Checkpointer: dense, dir: modelDir, router: router, log: log}
}

// Save has the parameter servers dump the tables, then saves the dense checkpoint.
func (c *Tables) Save(ctx context.Context, step int64, tensors []estimator.Tensor) (string, error) {
	prefix := filepath.Join(c.dir, checkpointBasename) + "-" + strconv.FormatInt(step, 10)
	dir, err := EmbeddingsDir(prefix)
	if err != nil {
		return "", err
	}
	// A failed save of the same step may have left part of a dump.
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("save the embedding tables of step %d: %w", step, err)
	}
	resp, err := c.router.Save(ctx, dir)
	if err != nil {
		return "", fmt.Errorf("save the embedding tables of step %d to %s: %w", step, dir, err)
	}
	path, err := c.Checkpointer.Save(ctx, step, tensors)
	if err != nil {
		return "", err
	}
	if path != prefix {
		return "", fmt.Errorf("the dense checkpoint of step %d is %s, the tables were saved for %s", step, path, prefix)
	}
	files := 0
	for _, r := range resp {
		for _, t := range r.GetTables() {
			files += len(t.GetFiles())
		}
	}
	c.log.Info("embedding tables saved", "dir", dir, "files", files, "global_step", step)
	return path, nil
}

// Restore reads the dense checkpoint at path and has the parameter servers restore the tables of
// the same checkpoint.
func (c *Tables) Restore(ctx context.Context, path string) ([]estimator.Tensor, error) {
	ts, err := c.Checkpointer.Restore(ctx, path)
	if err != nil {
		return nil, err
	}
	dir, err := EmbeddingsDir(path)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("checkpoint %s has no embedding tables (%s): was it written by --model=dnn?", path, dir)
	}
	resp, err := c.router.Restore(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("restore the embedding tables of checkpoint %s: %w", path, err)
	}
	var entries int64
	dumpPS := int32(0)
	for _, r := range resp {
		dumpPS = r.GetDumpNumPs()
		for _, t := range r.GetTables() {
			entries += t.GetEntries()
		}
	}
	c.log.Info("embedding tables restored", "dir", dir, "entries", entries, "dump_num_ps", dumpPS, "num_ps", c.router.NumPS())
	return ts, nil
}

// RestoreOnly is a worker's checkpointer (not the chief's): it restores the dense parameters of
// the chief's checkpoints and saves nothing.
type RestoreOnly struct {
	estimator.Checkpointer
}

// Save saves nothing: the chief saves the job's checkpoints.
func (c RestoreOnly) Save(_ context.Context, step int64, _ []estimator.Tensor) (string, error) {
	return fmt.Sprintf("(the chief's checkpoint of step %d)", step), nil
}
