// Command export writes a checkpoint of cmd/train's dnn model as the layout the agent serves
// (pkg/export): <export_base>/entry/<version>/ (the model spec, the dense parameters, a
// saved_model.pb naming the PS sub-graphs) and <export_base>/ps_<i>/<version>/ (shard i of the
// embedding tables, EntryDump TFRecords), each version directory written under a temporary name
// and renamed once complete, and each sub-graph's ExportSaverListenerState updated. agentctl decl
// --export_base then declares it.
//
// The checkpoint is --model_dir's newest, or --checkpoint. The model's configuration is not in a
// checkpoint: --dense_features, --sparse_features, --embedding_dim and --hidden must be those the
// model was trained with (their defaults are cmd/train's); a spec that does not fit the checkpoint
// is refused.
//
// Exit status: 0 after the export; 2 for a bad command line or bad input (a missing, corrupt or
// ill-fitting checkpoint, a version exported already, an export base that cannot be written);
// 1 for a failure while writing (a full disk). After a failure nothing of the export is visible.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	savedmodelexportersspec "github.com/monolith-go/monolith/gen/spec/native_training/model_export/saved_model_exporters"
	"github.com/monolith-go/monolith/internal/cli"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/export"
	"github.com/monolith-go/monolith/pkg/featureschema"
	"github.com/monolith-go/monolith/pkg/runner/checkpoint"
	"github.com/monolith-go/monolith/pkg/trainer/hashbucket"
)

const name = "export"

const description = "Export a checkpoint of cmd/train's dnn model as the entry + PS sub-graphs the agent serves " +
	"(<export_base>/entry/<version>/, <export_base>/ps_<i>/<version>/), for agentctl decl."

// cmdFlags is the command line, from the spec (saved_model_exporters.yaml ExportFlags).
type cmdFlags struct {
	cli.Common
	savedmodelexportersspec.ExportFlags
}

func main() { cli.Main(cli.IgnoreSecondSignal, run) }

// run runs the command and returns its exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var c cmdFlags
	return cli.Run(name, description, &c, &c.LogLevel, args, stdout, stderr, func(log *slog.Logger) error {
		if c.Schema != "" && (cli.FlagGiven(args, "dense_features") || cli.FlagGiven(args, "sparse_features")) {
			return cli.Usage(errors.New("--schema names the features: give it or --dense_features/--sparse_features, not both"))
		}
		var specFlags []string
		for _, name := range []string{"schema", "dense_features", "sparse_features", "pooling", "embedding_buckets", "embedding_dim", "hidden"} {
			if cli.FlagGiven(args, name) {
				specFlags = append(specFlags, "--"+name)
			}
		}
		return exportModel(ctx, c.ExportFlags, specFlags, stdout, log)
	})
}

// exportModel runs the export the flags describe and prints what it wrote.
func exportModel(ctx context.Context, f savedmodelexportersspec.ExportFlags, specFlags []string, stdout io.Writer, log *slog.Logger) error {
	switch {
	case f.ModelDir == "":
		return cli.Usage(errors.New("--model_dir is required: the checkpoint directory"))
	case f.ExportBase == "":
		return cli.Usage(errors.New("--export_base is required: the export's base directory"))
	case f.NumPS < 0:
		return cli.Usage(fmt.Errorf("--num_ps %d is negative", f.NumPS))
	case f.Keep < 0:
		return cli.Usage(fmt.Errorf("--keep %d is negative", f.Keep))
	case f.Timeout <= 0:
		return cli.Usage(fmt.Errorf("--timeout %v is not positive", f.Timeout))
	}
	spec, err := chooseSpec(f, specFlags)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, f.Timeout)
	defer cancel()
	start := time.Now()
	res, err := export.Export(ctx, export.Options{ModelDir: f.ModelDir, Checkpoint: f.Checkpoint, ExportBase: f.ExportBase,
		ModelName: f.ModelName, Spec: spec, NumPS: f.NumPS, VersionType: export.VersionType(f.VersionType), Keep: f.Keep,
		WithOptimizerState: f.WithOptimizerState, Log: log})
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
			return fmt.Errorf("the export did not finish within --timeout %v: %w", f.Timeout, err)
		}
		return classify(err)
	}
	elapsed := time.Since(start)
	fmt.Fprintf(stdout, "exported %s (global step %d) as version %d: entry and %d PS sub-graphs, %d embedding entries, %d bytes in %.3f s\n",
		res.Checkpoint, res.GlobalStep, res.Version, res.NumPS, res.Entries, res.Bytes, elapsed.Seconds())
	fmt.Fprintf(stdout, "  %-8s %s\n", export.EntrySubGraph, res.Dirs[export.EntrySubGraph])
	for i := range res.NumPS {
		sg := export.PSSubGraph(i)
		fmt.Fprintf(stdout, "  %-8s %s\n", sg, res.Dirs[sg])
	}
	for _, dir := range res.Removed {
		fmt.Fprintf(stdout, "  removed  %s\n", dir)
	}
	return nil
}

// classify makes an error of the input (the checkpoint or its state file, the spec, the version,
// an export base that cannot be written or is under a file) a usage error; what fails while writing (a full disk) stays a failure.
func classify(err error) error {
	switch errkind.Of(err) {
	case errkind.NotFound, errkind.Value, errkind.Precondition:
		return cli.Usage(err)
	}
	switch {
	case errors.Is(err, syscall.EROFS), errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR),
		errors.Is(err, checkpoint.ErrUnreadableState):
		return cli.Usage(err)
	}
	return err
}

// chooseSpec is the model spec of the export: the one the trainer recorded in the model dir
// (export.SpecFile), else the flags' (a model dir of an earlier version). Flags that say another
// spec than the recorded one are refused: the export would fit the checkpoint and serve wrong.
func chooseSpec(f savedmodelexportersspec.ExportFlags, specFlags []string) (export.ModelSpec, error) {
	recorded, found, err := export.ReadSpecFile(f.ModelDir)
	if err != nil {
		return export.ModelSpec{}, cli.Usage(err)
	}
	if found && len(specFlags) == 0 {
		return recorded, nil
	}
	spec, err := modelSpec(f)
	if err != nil {
		return spec, cli.Usage(err)
	}
	if err := spec.Validate(); err != nil {
		return spec, cli.Usage(err)
	}
	if found {
		if d := export.SpecDiff(spec, recorded); d != "" {
			return spec, cli.Usage(fmt.Errorf("%s: another model than the one trained (%s): %s; drop the flags",
				strings.Join(specFlags, " "), filepath.Join(f.ModelDir, export.SpecFile), d))
		}
	}
	return spec, nil
}

// modelSpec is the dnn spec of the flags, as cmd/train builds its model from the same flags: one
// table per sparse feature, of its name, pooled by sum, and the dot interaction.
func modelSpec(f savedmodelexportersspec.ExportFlags) (export.ModelSpec, error) {
	s := export.ModelSpec{Model: export.ModelDNN, Interaction: "dot", Hidden: []int{}}
	if f.EmbeddingDim <= 0 {
		return s, fmt.Errorf("--embedding_dim %d is not positive", f.EmbeddingDim)
	}
	switch {
	case f.EmbeddingBuckets < 0 || f.EmbeddingBuckets > hashbucket.MaxBuckets:
		return s, fmt.Errorf("--embedding_buckets %d: want 0 (collisionless) to %d", f.EmbeddingBuckets, hashbucket.MaxBuckets)
	case f.Schema != "":
		fs, err := featureschema.Load(f.Schema)
		if err != nil {
			return s, fmt.Errorf("--schema: %w", err)
		}
		for _, d := range fs.Dense() {
			s.DenseFeatures = append(s.DenseFeatures, export.DenseFeature{Name: d.Name, Dim: d.DenseDim()})
		}
		for _, sf := range fs.Sparse() {
			s.SparseFeatures = append(s.SparseFeatures, export.SparseFeature{Name: sf.Name, Slot: sf.FidSlot(), Table: sf.Name, Dim: f.EmbeddingDim,
				Pooling: string(sf.PoolingOr(featureschema.Pooling(f.Pooling))), Buckets: uint64(sf.BucketsOr(f.EmbeddingBuckets))})
		}
		return s, hidden(&s, f.Hidden)
	}
	for _, item := range splitList(f.DenseFeatures) {
		n, dim, ok := strings.Cut(item, ":")
		d, err := strconv.Atoi(dim)
		if !ok || n == "" || err != nil || d <= 0 {
			return s, fmt.Errorf("--dense_features %q: want name:dim items (dim > 0), got %q", f.DenseFeatures, item)
		}
		s.DenseFeatures = append(s.DenseFeatures, export.DenseFeature{Name: n, Dim: d})
	}
	sparse := splitList(f.SparseFeatures)
	if len(sparse) == 0 {
		return s, fmt.Errorf("--sparse_features is empty: the model has at least one")
	}
	for _, item := range sparse {
		n, slot, given := strings.Cut(item, ":")
		if !given {
			if slot, given = strings.CutPrefix(n, "slot_"); !given {
				return s, fmt.Errorf("--sparse_features: feature %q: give its fid slot (%s:<slot>)", n, n)
			}
		}
		v, err := strconv.Atoi(slot)
		if n == "" || err != nil || v < 0 || v > maxFidSlot {
			return s, fmt.Errorf("--sparse_features: feature %q: slot %q is not a fid slot (0 to %d)", n, slot, maxFidSlot)
		}
		s.SparseFeatures = append(s.SparseFeatures, export.SparseFeature{Name: n, Slot: v, Table: n, Dim: f.EmbeddingDim, Pooling: f.Pooling,
			Buckets: uint64(f.EmbeddingBuckets)})
	}
	return s, hidden(&s, f.Hidden)
}

// hidden reads --hidden into the spec.
func hidden(s *export.ModelSpec, list string) error {
	for _, item := range splitList(list) {
		w, err := strconv.Atoi(item)
		if err != nil || w <= 0 {
			return fmt.Errorf("--hidden %q: want positive widths, a comma list", list)
		}
		s.Hidden = append(s.Hidden, w)
	}
	return nil
}

// maxFidSlot is the largest v2 fid slot (15 bits).
const maxFidSlot = 1<<15 - 1

// splitList splits a comma list, trimming its items; "" is none.
func splitList(s string) []string {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	items := strings.Split(s, ",")
	for i := range items {
		items[i] = strings.TrimSpace(items[i])
	}
	return items
}
