package job

import (
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/monolith-go/monolith/pkg/export"
	"github.com/monolith-go/monolith/pkg/hooks/hookutil"
)

// check checks the export's settings for model.
func (ex ExportConfig) check(model string) error {
	switch {
	case ex.Dir == "":
		return nil
	case model != ModelDNN:
		return fmt.Errorf("--export_dir: --model=%s cannot be exported (dnn can)", model)
	case ex.Every < 1:
		return fmt.Errorf("--export_every %d: want at least 1", ex.Every)
	case ex.Keep < 0:
		return errors.New("--export_keep is negative")
	}
	return nil
}

// exportListeners are the chief's checkpoint listeners for an export: pkg/export's Listener,
// exporting every Export.Every checkpoints of the run and the last one. The other workers save no
// checkpoints and export nothing.
func exportListeners(cfg Config, w *worker, r role, stdout io.Writer, log *slog.Logger) ([]hookutil.SaverListener, error) {
	ex, rc := cfg.Export, cfg.Run
	if ex.Dir == "" || w == nil || !r.chief() {
		return nil, nil
	}
	o := export.Options{ModelDir: rc.ModelDir, ExportBase: ex.Dir, Spec: export.SpecFromDNN(w.model.Config(), cfg.Schema),
		Keep: ex.Keep, Log: log}
	if rc.DeepInsightName != nil {
		o.ModelName = *rc.DeepInsightName
	}
	l, err := export.NewListener(o, ex.Every)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stdout, "  export       %s every %d checkpoints and at the end (the last %d versions kept); cmd/export's layout, for agentctl decl\n",
		ex.Dir, ex.Every, ex.Keep)
	return []hookutil.SaverListener{l}, nil
}
