package job_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/export"
	"github.com/monolith-go/monolith/pkg/modelconfig"
	"github.com/monolith-go/monolith/pkg/trainer/job"
	"github.com/monolith-go/monolith/pkg/trainer/synth"
)

// An export while training: the chief exports every Export.Every-th checkpoint and the last one,
// as pkg/export's layout named by deep_insight_name, keeping Export.Keep versions; the export
// loads with the demo's model spec.
func TestExportWhileTraining(t *testing.T) {
	leakcheck.Check(t)
	dir, exp := t.TempDir(), filepath.Join(t.TempDir(), "exported")
	// 4000 examples in batches of 128: 32 steps, checkpoints at 10, 20, 30 and 32.
	cfg := newConfig(t, job.ModelDNN, clickLog(t, job.ModelDNN, 4000), 1, 128,
		values("save_checkpoints_steps", 10, "model_dir", dir, "deep_insight_name", "ctr"))
	cfg.Export = job.ExportConfig{Dir: exp, Every: 2, Keep: 2}
	r := runOK(t, cfg)
	if !strings.Contains(r.stdout, "  export       "+exp+" every 2 checkpoints") {
		t.Errorf("stdout lacks the export line:\n%s", r.stdout)
	}
	for _, sg := range []string{"entry", "ps_0", "ps_1"} {
		vs, err := modelconfig.VersionDirs(filepath.Join(exp, sg))
		if err != nil || len(vs) != 2 || vs[0].Number != 20 || vs[1].Number != 32 {
			t.Errorf("%s: versions %v, %v; want 20 and 32", sg, vs, err)
		}
	}
	e, err := export.LoadEntry(filepath.Join(exp, "entry", "32"))
	if err != nil {
		t.Fatal(err)
	}
	if m := e.Manifest; m.ModelName != "ctr" || m.GlobalStep != 32 || m.NumPS != 2 || len(m.Model.SparseFeatures) != 4 ||
		m.Model.SparseFeatures[3].Name != synth.SlotFeature(4) || m.Model.DenseFeatures[0].Dim != 4 {
		t.Errorf("manifest %+v", m)
	}
	for _, sg := range []string{"ps_0", "ps_1"} {
		s, err := export.LoadPSShard(context.Background(), filepath.Join(exp, sg, "32"))
		if err != nil || len(s.Tables) != 4 {
			t.Fatalf("%s: %v", sg, err)
		}
	}
}
