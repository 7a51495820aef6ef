package export

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"

	"github.com/monolith-go/monolith/pkg/embedding"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/estimator"
	"github.com/monolith-go/monolith/pkg/ps"
	"github.com/monolith-go/monolith/pkg/runner/checkpoint"
	"github.com/monolith-go/monolith/pkg/trainer/dnn"
)

// source is the checkpoint an export reads: the dense checkpoint <prefix>.index/.data and the
// tables' dump <prefix>.embeddings/<table>/ps_<i>_of_<n>-NNNNN-of-NNNNN that cmd/train's chief
// writes (pkg/ps's Save on each parameter server).
type source struct {
	prefix  string
	step    int64
	tensors []checkpoint.Tensor
	dumpDir string
	// dumpNumPS is the number of parameter servers that wrote the dump.
	dumpNumPS int
	// files are each table's dump files, every server's.
	files map[string][]string
}

// EmbeddingsSuffix is what a checkpoint prefix is followed by to name its tables' dump.
const EmbeddingsSuffix = ".embeddings"

// openCheckpoint finds the checkpoint name of modelDir ("" the newest; a base name such as
// model.ckpt-100, or a path), reads its dense tensors and checks them and its dump against spec.
// A missing directory or checkpoint is an error of kind NotFound, a corrupt one or one that does
// not fit spec of kind Value; each names the path.
func openCheckpoint(modelDir, name string, spec ModelSpec, log *slog.Logger) (*source, error) {
	if fi, err := os.Stat(modelDir); err != nil || !fi.IsDir() {
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return nil, errkind.New(errkind.NotFound, "checkpoint directory %s does not exist", modelDir)
		}
		return nil, fmt.Errorf("checkpoint directory: %w", err)
	}
	prefix, err := checkpoint.Resolve(modelDir, name, log)
	if err != nil {
		return nil, err
	}
	step, err := checkpoint.StepOf(prefix)
	if err != nil {
		return nil, err
	}
	tensors, err := checkpoint.ReadDense(prefix)
	if err != nil {
		return nil, err
	}
	if err := spec.checkDense(toEstimator(tensors)); err != nil {
		return nil, errkind.New(errkind.Value, "checkpoint %s does not fit the model spec (the model's flags must be those it was trained with): %w", prefix, err)
	}
	src := &source{prefix: prefix, step: step, tensors: tensors, dumpDir: prefix + EmbeddingsSuffix, files: map[string][]string{}}
	if fi, err := os.Stat(src.dumpDir); err != nil || !fi.IsDir() {
		return nil, errkind.New(errkind.NotFound, "checkpoint %s has no embedding tables (%s is not a directory): was it written by a dnn trainer?", prefix, src.dumpDir)
	}
	for _, t := range spec.Tables() {
		n, err := dumpServers(src.dumpDir, t.Name)
		if err != nil {
			return nil, err
		}
		if src.dumpNumPS != 0 && n != src.dumpNumPS {
			return nil, errkind.New(errkind.Value, "the tables of %s were dumped by %d and by %d parameter servers", src.dumpDir, src.dumpNumPS, n)
		}
		src.dumpNumPS = n
		for i := range n {
			files, err := embedding.ShardedFiles(ps.DumpBasename(src.dumpDir, t.Name, i, n))
			if err != nil {
				return nil, fmt.Errorf("checkpoint %s: table %q: %w", prefix, t.Name, err)
			}
			src.files[t.Name] = append(src.files[t.Name], files...)
		}
	}
	if entries, err := os.ReadDir(src.dumpDir); err == nil {
		known := map[string]bool{}
		for _, t := range spec.Tables() {
			known[t.Name] = true
		}
		for _, e := range entries {
			if e.IsDir() && !known[e.Name()] {
				log.Warn("table of the checkpoint not exported: no feature of the model spec reads it", "table", e.Name(), "checkpoint", prefix)
			}
		}
	}
	return src, nil
}

// dumpFile matches a file of a server's table dump: ps_<i>_of_<n>-NNNNN-of-NNNNN.
var dumpFile = regexp.MustCompile(`^ps_(\d+)_of_(\d+)-\d{5}-of-\d{5}$`)

// dumpServers is the number of servers whose dump of table is in dir; the files of each server
// are checked by embedding.ShardedFiles.
func dumpServers(dir, table string) (int, error) {
	tdir := filepath.Join(dir, table)
	entries, err := os.ReadDir(tdir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, errkind.New(errkind.NotFound, "the checkpoint's dump %s has no table %q (%s does not exist)", dir, table, tdir)
	}
	if err != nil {
		return 0, fmt.Errorf("dump of table %q: %w", table, err)
	}
	n := 0
	for _, e := range entries {
		m := dumpFile.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		total, err := strconv.Atoi(m[2])
		if err != nil || total <= 0 {
			return 0, errkind.New(errkind.Value, "dump file %s: bad number of servers", filepath.Join(tdir, e.Name()))
		}
		if n != 0 && total != n {
			return 0, errkind.New(errkind.Value, "dump of table %q in %s mixes dumps of %d and %d servers", table, tdir, n, total)
		}
		n = total
	}
	if n == 0 {
		return 0, errkind.New(errkind.NotFound, "no dump of table %q in %s", table, tdir)
	}
	return n, nil
}

func toEstimator(ts []checkpoint.Tensor) []estimator.Tensor {
	out := make([]estimator.Tensor, len(ts))
	for i, t := range ts {
		out[i] = estimator.Tensor{Name: t.Name, Shape: t.Shape, Float32: t.Float32, Float64: t.Float64, Int64: t.Int64}
	}
	return out
}

func fromEstimator(ts []estimator.Tensor) []checkpoint.Tensor {
	out := make([]checkpoint.Tensor, len(ts))
	for i, t := range ts {
		out[i] = checkpoint.Tensor{Name: t.Name, Shape: t.Shape, Float32: t.Float32, Float64: t.Float64, Int64: t.Int64}
	}
	return out
}

// denseParam matches the dense checkpoint's parameters (pkg/trainer/dnn's variables): the layers'
// kernels and biases. The other tensors are the optimizer's slots and powers, and the step.
var denseParam = regexp.MustCompile(`^dnn/layer_\d+/(kernel|bias)$`)

// servingTensors are the tensors of the entry: the parameters and the step, and with
// optimizer state every tensor.
func servingTensors(ts []checkpoint.Tensor, withOptimizerState bool) []checkpoint.Tensor {
	if withOptimizerState {
		return ts
	}
	var out []checkpoint.Tensor
	for _, t := range ts {
		if denseParam.MatchString(t.Name) || t.Name == dnn.StepName {
			out = append(out, t)
		}
	}
	return out
}
