// Package inprocexport checkpoints and exports a model trained in this process (pkg/trainer/inprocess)
// as cmd/train's chief and cmd/export do: the agent's demo and cmd/online serve what it writes. It
// is a package of its own because pkg/export's tests train with inprocess.
package inprocexport

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"

	"github.com/monolith-go/monolith/pkg/estimator/ckptdir"
	"github.com/monolith-go/monolith/pkg/export"
	"github.com/monolith-go/monolith/pkg/trainer/inprocess"
)

// Export checkpoints the model of j at its current step into modelDir as cmd/train's chief does (the
// parameter servers dump the tables, then the dense part is saved; the directory keeps that
// checkpoint only) and exports it into each of bases with numPS PS sub-graphs, keeping keep
// versions there (0: all). Training must not run meanwhile.
func Export(ctx context.Context, j *inprocess.Job, modelDir string, numPS, keep int, bases ...string) ([]*export.Result, error) {
	quiet := slog.New(slog.DiscardHandler)
	cp, err := ckptdir.Open(ckptdir.Options{Dir: modelDir, MaxToKeep: 1, Log: quiet})
	if err != nil {
		return nil, err
	}
	step := j.Model.GlobalStep()
	prefix := filepath.Join(modelDir, "model.ckpt-"+strconv.FormatInt(step, 10))
	if _, err := j.Router.Save(ctx, prefix+export.EmbeddingsSuffix); err != nil {
		return nil, fmt.Errorf("save the tables: %w", err)
	}
	if _, err := cp.Save(ctx, step, j.Model.Tensors()); err != nil {
		return nil, fmt.Errorf("save the checkpoint: %w", err)
	}
	var out []*export.Result
	for _, base := range bases {
		res, err := export.Export(ctx, export.Options{ModelDir: modelDir, ExportBase: base,
			Spec: export.SpecFromDNN(j.Model.Config(), j.Gen.Schema()), NumPS: numPS, Keep: keep, Log: quiet})
		if err != nil {
			return out, fmt.Errorf("export into %s: %w", base, err)
		}
		out = append(out, res)
	}
	return out, nil
}
