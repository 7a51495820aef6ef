package export

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/agentctl"
	"github.com/monolith-go/monolith/pkg/backend"
	"github.com/monolith-go/monolith/pkg/estimator"
	"github.com/monolith-go/monolith/pkg/hooks/hookutil"
	"github.com/monolith-go/monolith/pkg/modelconfig"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
	"github.com/monolith-go/monolith/pkg/zk/zkreal"
	"github.com/monolith-go/monolith/pkg/zk/zktest"
)

// trainWithListener trains j for steps steps with the estimator, a checkpoint every 10 steps
// (tables and dense, as cmd/train's chief saves them) and l told about each save.
func trainWithListener(ctx context.Context, t *testing.T, j *job, l *Listener, steps int) error {
	est, err := estimator.New[*batch.Batch](j.model, estimator.Config{Checkpointer: tablesCheckpointer{j.cp, j.router},
		SaveCheckpointsSteps: 10, SaverListeners: []hookutil.SaverListener{l}, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	bs := drawBatches(t, j.gen.Schema(), j.input, steps, 32)
	input := func(context.Context, estimator.Mode) (estimator.Input[*batch.Batch], error) {
		return &sliceInput{bs}, nil
	}
	_, err = est.Train(ctx, input, 0, 0)
	return err
}

// TestListener: in a training loop saving every 10 steps, the listener exports every 2nd
// checkpoint and, at the end, the last one saved; each export holds its checkpoint's step.
func TestListener(t *testing.T) {
	leakcheck.Check(t)
	ctx := tctx(t)
	j := newJob(t, 2, []int{8})
	base := filepath.Join(t.TempDir(), "exports")
	l, err := NewListener(Options{ModelDir: j.modelDir, ExportBase: base, Spec: j.spec, Keep: 2, Log: quiet}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := trainWithListener(ctx, t, j, l, 45); err != nil {
		t.Fatal(err)
	}
	var versions []int64
	for _, r := range l.Results() {
		versions = append(versions, r.Version)
	}
	// Saves at 10, 20, 30, 40 and at the end, 45: the 2nd and 4th are exported, and the last.
	if !slices.Equal(versions, []int64{20, 40, 45}) {
		t.Fatalf("exported versions %v, want [20 40 45]", versions)
	}
	vs, err := modelconfig.VersionDirs(filepath.Join(base, "ps_1"))
	if err != nil || len(vs) != 2 || vs[0].Number != 40 || vs[1].Number != 45 {
		t.Errorf("kept versions %v, %v; want 40 and 45", vs, err)
	}
	e, err := LoadEntry(filepath.Join(base, "entry", "45"))
	if err != nil || e.Manifest.GlobalStep != 45 {
		t.Fatalf("entry 45: %v", err)
	}

	// A resumed run that ends at once (no new step) saves nothing new; exporting its last
	// checkpoint again is skipped, not an error.
	l2, err := NewListener(Options{ModelDir: j.modelDir, ExportBase: base, Spec: j.spec, Log: quiet}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l2.AfterSave(ctx, 45); err != nil {
		t.Fatalf("already exported: %v", err)
	}
	if err := l2.End(ctx, 45); err != nil || len(l2.Results()) != 0 {
		t.Errorf("end: %v, %d exports", err, len(l2.Results()))
	}
}

// TestListenerFailureFailsTraining: an export that fails (the disk full) fails the save, and so
// the training, naming the step.
func TestListenerFailureFailsTraining(t *testing.T) {
	leakcheck.Check(t)
	ctx := tctx(t)
	j := newJob(t, 1, []int{8})
	l, err := NewListener(Options{ModelDir: j.modelDir, ExportBase: t.TempDir(), Spec: j.spec, Log: quiet, fs: &fullDisk{budget: 10}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	err = trainWithListener(ctx, t, j, l, 15)
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "global step 10") {
		t.Fatalf("training: %v", err)
	}
}

// TestListenerOptions: bad options are refused when the listener is made.
func TestListenerOptions(t *testing.T) {
	spec := ModelSpec{Model: ModelDNN, SparseFeatures: []SparseFeature{{Name: "a", Slot: 1, Table: "a", Dim: 2, Pooling: "sum"}}, Interaction: "dot", Hidden: []int{}}
	for _, tc := range []struct {
		name  string
		o     Options
		every int
		want  string
	}{
		{"every 0", Options{ModelDir: "m", ExportBase: "e", Spec: spec}, 0, "every 0 checkpoints"},
		{"a checkpoint", Options{ModelDir: "m", ExportBase: "e", Spec: spec, Checkpoint: "model.ckpt-1"}, 1, "a checkpoint"},
		{"no base", Options{ModelDir: "m", Spec: spec}, 1, "no export base"},
		{"bad spec", Options{ModelDir: "m", ExportBase: "e", Spec: ModelSpec{Model: "dnn"}}, 1, "no sparse features"},
		{"bad version type", Options{ModelDir: "m", ExportBase: "e", Spec: spec, VersionType: "v"}, 1, "version type"},
	} {
		if _, err := NewListener(tc.o, tc.every); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %q", tc.name, err, tc.want)
		}
	}
}

// TestAgentctlDecl: agentctl decl, on a real ZooKeeper, accepts the layout an export writes: it
// finds the model name in the entry's saved model and declares the entry ("latest") and each PS
// sub-graph ("latest_once") at their base paths; pub then maps them to a layout.
func TestAgentctlDecl(t *testing.T) {
	leakcheck.Check(t)
	ctx := tctx(t)
	j := newJob(t, 2, []int{8})
	j.train(ctx, 5)
	j.save(ctx)
	base := filepath.Join(t.TempDir(), "exported")
	if _, err := Export(ctx, Options{ModelDir: j.modelDir, ExportBase: base, ModelName: "ctr_model", Spec: j.spec, NumPS: 3, Log: quiet}); err != nil {
		t.Fatal(err)
	}
	srv := zktest.Start(t, zktest.WithTickTime(200*time.Millisecond))
	zc, err := zkreal.Connect(ctx, zkreal.Options{Servers: []string{srv.Addr()}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer zc.Close()
	be, err := backend.New(zc, backend.Config{Bzid: "gip", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	for _, o := range []agentctl.Options{{Cmd: "decl", ExportBase: base}, {Cmd: agentctl.ActionPub, ModelName: "ctr_model:*", Layout: "l"}} {
		opts := agentctl.DefaultOptions()
		opts.Bzid, opts.Cmd, opts.ExportBase, opts.ModelName, opts.Layout = "gip", o.Cmd, o.ExportBase, o.ModelName, o.Layout
		if err := agentctl.Run(ctx, be, opts, io.Discard); err != nil {
			t.Fatalf("agentctl %s: %v", o.Cmd, err)
		}
	}
	got, err := be.ListSavedModels(ctx, "ctr_model")
	if err != nil {
		t.Fatal(err)
	}
	var subs []string
	for _, sm := range got {
		subs = append(subs, sm.SubGraph)
	}
	if !slices.Equal(subs, []string{"entry", "ps_0", "ps_1", "ps_2"}) {
		t.Fatalf("declared %v", subs)
	}
	for sg, policy := range map[string]string{"entry": "latest", "ps_2": "latest_once"} {
		data, _, err := zc.Get(ctx, "/gip/saved_models/ctr_model/"+sg)
		want := `{"model_base_path": "` + filepath.Join(base, sg) + `", "version_policy": "` + policy + `"}`
		if err != nil || string(data) != want {
			t.Errorf("%s: %s, %v; want %s", sg, data, err, want)
		}
	}
	layout, err := zc.Children(ctx, "/gip/layouts/l")
	slices.Sort(layout)
	if err != nil || !slices.Equal(layout, []string{"ctr_model:entry", "ctr_model:ps_0", "ctr_model:ps_1", "ctr_model:ps_2"}) {
		t.Errorf("layout %v, %v", layout, err)
	}
}
