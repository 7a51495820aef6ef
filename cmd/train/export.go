package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"

	exporthooksspec "github.com/monolith-go/monolith/gen/spec/native_training/model_export/export_hooks"
	"github.com/monolith-go/monolith/pkg/export"
	"github.com/monolith-go/monolith/pkg/hooks/hookutil"
	"github.com/monolith-go/monolith/pkg/runconfig"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
)

// checkExportFlags checks --export_dir and its companions.
func checkExportFlags(ex exporthooksspec.ExportHookFlags, model string) error {
	switch {
	case ex.ExportDir == "":
		return nil
	case model != modelDNN:
		return fmt.Errorf("--export_dir: --model=%s cannot be exported (dnn can)", model)
	case ex.ExportEvery < 1:
		return fmt.Errorf("--export_every %d: want at least 1", ex.ExportEvery)
	case ex.ExportKeep < 0:
		return errors.New("--export_keep is negative")
	}
	return nil
}

// exportListeners are the chief's checkpoint listeners for --export_dir: pkg/export's Listener,
// exporting every --export_every checkpoints of the run and the last one. The other workers save
// no checkpoints and export nothing.
func exportListeners(ex exporthooksspec.ExportHookFlags, rc *runconfig.RunnerConfig, w *worker, r role, schema batch.Schema,
	stdout io.Writer, log *slog.Logger) ([]hookutil.SaverListener, error) {
	if ex.ExportDir == "" || w == nil || !r.chief() {
		return nil, nil
	}
	o := export.Options{ModelDir: rc.ModelDir, ExportBase: ex.ExportDir, Spec: export.SpecFromDNN(w.model.Config(), schema.Dense),
		Keep: ex.ExportKeep, Log: log}
	if rc.DeepInsightName != nil {
		o.ModelName = *rc.DeepInsightName
	}
	l, err := export.NewListener(o, ex.ExportEvery)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stdout, "  export       %s every %d checkpoints and at the end (the last %d versions kept); cmd/export's layout, for agentctl decl\n",
		ex.ExportDir, ex.ExportEvery, ex.ExportKeep)
	return []hookutil.SaverListener{l}, nil
}
