package export

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/runner/checkpoint"
)

// SpecFile is the file in a model dir where the trainer's chief records the model spec its
// checkpoints are of: the features, their slots, poolings and buckets, the MLP. A checkpoint does
// not hold them, and an export with another spec that still fits the checkpoint's shapes (other
// buckets, another pooling) would serve wrong scores without a word, so cmd/export reads the spec
// from here.
const SpecFile = "model_spec.json"

// WriteSpecFile writes spec into modelDir's SpecFile (atomically).
func WriteSpecFile(modelDir string, spec ModelSpec) error {
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return err
	}
	if err := checkpoint.WriteFileAtomic(filepath.Join(modelDir, SpecFile), append(data, '\n')); err != nil {
		return fmt.Errorf("the model spec: %w", err)
	}
	return nil
}

// ReadSpecFile reads modelDir's SpecFile; found is false when there is none (a model dir of an
// earlier version). A file that is not a valid spec is an error of kind Value.
func ReadSpecFile(modelDir string) (spec ModelSpec, found bool, err error) {
	path := filepath.Join(modelDir, SpecFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return ModelSpec{}, false, nil
	}
	if err != nil {
		return ModelSpec{}, false, fmt.Errorf("the model spec: %w", err)
	}
	if err := json.Unmarshal(data, &spec); err != nil {
		return ModelSpec{}, false, errkind.Wrap(errkind.Value, fmt.Errorf("the model spec %s: %w", path, err))
	}
	if err := spec.Validate(); err != nil {
		return ModelSpec{}, false, errkind.Wrap(errkind.Value, fmt.Errorf("the model spec %s: %w", path, err))
	}
	return spec, true, nil
}

// SpecDiff words the first difference between spec got and want ("" when they are the same):
// "hidden [32], not [64 32]", "sparse feature user: buckets 0, not 1000".
func SpecDiff(got, want ModelSpec) string {
	switch {
	case got.Model != want.Model:
		return fmt.Sprintf("model %q, not %q", got.Model, want.Model)
	case got.Interaction != want.Interaction:
		return fmt.Sprintf("interaction %q, not %q", got.Interaction, want.Interaction)
	case fmt.Sprint(got.Hidden) != fmt.Sprint(want.Hidden):
		return fmt.Sprintf("hidden %v, not %v", got.Hidden, want.Hidden)
	}
	for i := range max(len(got.DenseFeatures), len(want.DenseFeatures)) {
		switch {
		case i >= len(got.DenseFeatures):
			return fmt.Sprintf("no dense feature %q", want.DenseFeatures[i].Name)
		case i >= len(want.DenseFeatures):
			return fmt.Sprintf("dense feature %q too many", got.DenseFeatures[i].Name)
		case !reflect.DeepEqual(got.DenseFeatures[i], want.DenseFeatures[i]):
			return fmt.Sprintf("dense feature %d: %+v, not %+v", i, got.DenseFeatures[i], want.DenseFeatures[i])
		}
	}
	for i := range max(len(got.SparseFeatures), len(want.SparseFeatures)) {
		switch {
		case i >= len(got.SparseFeatures):
			return fmt.Sprintf("no sparse feature %q", want.SparseFeatures[i].Name)
		case i >= len(want.SparseFeatures):
			return fmt.Sprintf("sparse feature %q too many", got.SparseFeatures[i].Name)
		case !reflect.DeepEqual(got.SparseFeatures[i], want.SparseFeatures[i]):
			g, w := got.SparseFeatures[i], want.SparseFeatures[i]
			if g.Name != w.Name {
				return fmt.Sprintf("sparse feature %d: %q, not %q", i, g.Name, w.Name)
			}
			return fmt.Sprintf("sparse feature %q: %+v, not %+v", g.Name, g, w)
		}
	}
	return ""
}
