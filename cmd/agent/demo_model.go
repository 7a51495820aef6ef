package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/monolith-go/monolith/pkg/export"
	"github.com/monolith-go/monolith/pkg/modelconfig"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
	"github.com/monolith-go/monolith/pkg/trainer/inprocess"
	"github.com/monolith-go/monolith/pkg/trainer/inprocess/inprocexport"
	"github.com/monolith-go/monolith/pkg/trainer/synth"
)

// The demo's model: a small dnn over synthetic click logs, trained in this process on one
// parameter server (pkg/trainer/inprocess: pkg/ps over loopback gRPC, as cmd/train's cluster) and
// exported with pkg/export onto demoNumPS PS sub-graphs.
const (
	// demoCacheFormat keys the cache: bump it when the model or the export format changes, so an
	// older demo's export is never served.
	demoCacheFormat = "v1"
	demoNumPS       = 2
	demoDim         = 4
	demoBatch       = 64
	// demoTrainBudget and demoMaxSteps bound the training: startup stays a few seconds.
	demoTrainBudget = 2 * time.Second
	demoMaxSteps    = 2000
)

// demoClickLog generates the training data: 3 slots of latent-factor ids and 4 dense values.
var demoClickLog = synth.Config{Seed: 7, NumDense: 4, NumSlots: 3, Vocab: 200, LatentDim: 2}

// demoExport is an export the demo serves.
type demoExport struct {
	// Base is the model's export base (<base>/{entry,ps_i}/<version>/).
	Base string
	// EntryDir is the entry's version directory (tfs_client's --model_spec).
	EntryDir   string
	GlobalStep int64
	// Cached says it was trained by an earlier run.
	Cached bool
}

// demoCacheDir is where the demo keeps its export between runs: the user's cache directory
// ($XDG_CACHE_HOME, else ~/.cache), else the temporary directory.
func demoCacheDir() string {
	root, err := os.UserCacheDir()
	if err != nil {
		root = os.TempDir()
	}
	return filepath.Join(root, "monolith-demo", demoCacheFormat)
}

// demoModelExport returns the export in cacheDir, training and exporting the model there first
// when there is none or it does not load (a corrupt cache is retrained, not fatal).
func demoModelExport(ctx context.Context, cacheDir string, log *slog.Logger) (*demoExport, error) {
	base := filepath.Join(cacheDir, demoModel)
	if ex, err := checkDemoExport(ctx, base); err == nil {
		ex.Cached = true
		log.Info("demo model: using the cached export", "dir", ex.Base, "global_step", ex.GlobalStep)
		return ex, nil
	} else if _, statErr := os.Stat(base); statErr == nil {
		log.Warn("demo model: the cached export does not load; training again", "dir", base, "err", err)
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return nil, fmt.Errorf("demo model: cache: %w", err)
	}
	// Train and export next to the cache, then rename into place: another demo starting at the
	// same time, or one killed half-way, never sees half an export.
	work, err := os.MkdirTemp(cacheDir, ".train-")
	if err != nil {
		return nil, fmt.Errorf("demo model: cache: %w", err)
	}
	defer os.RemoveAll(work)
	if err := trainDemoModel(ctx, filepath.Join(work, "model"), filepath.Join(work, demoModel), log); err != nil {
		return nil, fmt.Errorf("demo model: %w", err)
	}
	if err := os.RemoveAll(base); err != nil {
		return nil, fmt.Errorf("demo model: remove the bad cache: %w", err)
	}
	if err := os.Rename(filepath.Join(work, demoModel), base); err != nil {
		// Another demo may have put its export there first: serve that one if it loads.
		if ex, cerr := checkDemoExport(ctx, base); cerr == nil {
			return ex, nil
		}
		return nil, fmt.Errorf("demo model: cache: %w", err)
	}
	ex, err := checkDemoExport(ctx, base)
	if err != nil {
		return nil, fmt.Errorf("demo model: the new export: %w", err)
	}
	return ex, nil
}

// checkDemoExport loads the newest entry version of base and its PS shards, as the model server
// will.
func checkDemoExport(ctx context.Context, base string) (*demoExport, error) {
	latest, err := modelconfig.LatestVersion(filepath.Join(base, "entry"))
	if err != nil {
		return nil, err
	}
	version := latest.Name
	entryDir := filepath.Join(base, "entry", version)
	e, err := export.LoadEntry(entryDir)
	if err != nil {
		return nil, err
	}
	if e.Manifest.NumPS != demoNumPS {
		return nil, fmt.Errorf("entry %s has %d PS sub-graphs, want %d", entryDir, e.Manifest.NumPS, demoNumPS)
	}
	for i := range demoNumPS {
		if _, err := export.LoadPSShard(ctx, filepath.Join(base, "ps_"+strconv.Itoa(i), version)); err != nil {
			return nil, err
		}
	}
	return &demoExport{Base: base, EntryDir: entryDir, GlobalStep: e.Manifest.GlobalStep}, nil
}

// trainDemoModel trains the demo's model for demoTrainBudget (demoMaxSteps at most), checkpoints it
// into modelDir as cmd/train's chief does and exports it into exportBase.
func trainDemoModel(ctx context.Context, modelDir, exportBase string, log *slog.Logger) error {
	start := time.Now()
	quiet := slog.New(slog.DiscardHandler)
	job, err := inprocess.Start(inprocess.Config{Data: demoClickLog, Dim: demoDim, NumPS: 1, Hidden: []int{16, 8}, Logger: quiet})
	if err != nil {
		return err
	}
	defer job.Close()
	g, model := job.Gen, job.Model
	log.Info("demo model: training", "budget", demoTrainBudget, "max_steps", demoMaxSteps, "batch", demoBatch)
	stream := g.Stream(1)
	var loss float64
	for step := 0; step < demoMaxSteps && time.Since(start) < demoTrainBudget; step++ {
		b := &batch.Batch{}
		for range demoBatch {
			ex, _ := stream.Next()
			if err := g.Schema().Append(b, ex); err != nil {
				return fmt.Errorf("data: %w", err)
			}
		}
		if loss, err = model.Step(ctx, b); err != nil {
			return fmt.Errorf("train step %d: %w", step, err)
		}
	}
	step := model.GlobalStep()
	log.Info("demo model: trained", "steps", step, "loss", loss, "took", time.Since(start).Round(time.Millisecond))

	res, err := inprocexport.Export(ctx, job, modelDir, demoNumPS, 1, exportBase)
	if err != nil {
		return err
	}
	log.Info("demo model: exported", "version", res[0].Version, "entries", res[0].Entries, "took", time.Since(start).Round(time.Millisecond))
	return nil
}
