package embeddingtask

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"

	"github.com/monolith-go/monolith/pkg/core/tensor"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pyint"
)

// ProcessFeaturesForCPUTest is process_features_for_cpu_test: every sparse feature becomes the
// sum (combiner "sum", safe_embedding_lookup_sparse) of the rows of a randomly initialised table
// of its config's vocab size, width dim (max_sequence_length*dim for a sequence feature, whose
// result is reshaped to [-1, max_sequence_length, dim]); ids are taken modulo the vocab size and
// an entry-less row gives zeros. Table values are uniform in +-0.5/(vocab*width), float32. Other
// features pass through. Afterwards the feature and table configs are cleared, as in the
// reference. Features are processed in name order, so a seeded rng gives reproducible tables.
func (t *Task) ProcessFeaturesForCPUTest(ex *Example, rng *rand.Rand) (*Example, error) {
	if rng == nil {
		return nil, errkind.New(errkind.Value, "cpu test features: nil random source")
	}
	out := ex.Clone()
	out.Sparse = map[string]tensor.Sparse[int64]{}
	for _, name := range slices.Sorted(maps.Keys(ex.Sparse)) {
		fc, ok := t.features[name]
		if !ok {
			return nil, errkind.New(errkind.NotFound, "cpu test features: no feature config for %q", name)
		}
		table, ok := t.tables[fc.TableID]
		if !ok {
			return nil, errkind.New(errkind.NotFound, "cpu test features: no table config %q for %q", fc.TableID, name)
		}
		emb, err := lookupSum(ex.Sparse[name], table.VocabularySize, table.Dimension, fc.MaxSequenceLength, rng)
		if err != nil {
			return nil, fmt.Errorf("cpu test features: %s: %w", name, err)
		}
		out.Dense[name] = emb
	}
	clear(t.features)
	clear(t.tables)
	return out, nil
}

// lookupSum sums, per row of ids (all index coordinates but the last), the table rows of its ids.
// Table rows are drawn from rng when first used.
func lookupSum(ids tensor.Sparse[int64], vocab, dim, maxLen int, rng *rand.Rand) (*tensor.Dense[float32], error) {
	if err := ids.Validate(); err != nil {
		return nil, err
	}
	if len(ids.DenseShape) < 2 {
		return nil, errkind.New(errkind.Value, "ids of dense shape %v: want rank 2 or more", ids.DenseShape)
	}
	if vocab <= 0 || dim <= 0 || maxLen < 0 {
		return nil, errkind.New(errkind.Value, "table of vocab size %d, dim %d, max sequence length %d", vocab, dim, maxLen)
	}
	width := dim
	if maxLen != 0 {
		width = maxLen * dim
	}
	scale := float64(vocab) * float64(width)
	rows := 1
	outShape := []int{}
	for _, d := range ids.DenseShape[:len(ids.DenseShape)-1] {
		rows *= int(d)
		outShape = append(outShape, int(d))
	}
	outShape = append(outShape, width)
	sums := make([]float32, rows*width)
	table := map[int][]float32{}
	for i, ix := range ids.Indices {
		row := 0
		for d := range len(ix) - 1 {
			row = row*int(ids.DenseShape[d]) + int(ix[d])
		}
		id := pyint.FloorMod(int(ids.Values[i]), vocab)
		vec, ok := table[id]
		if !ok {
			vec = make([]float32, width)
			for j := range vec {
				vec[j] = float32((rng.Float64() - 0.5) / scale)
			}
			table[id] = vec
		}
		for j, v := range vec {
			sums[row*width+j] += v
		}
	}
	emb, err := tensor.New(sums, outShape)
	if err != nil {
		return nil, err
	}
	if maxLen != 0 {
		return emb.Reshape(-1, maxLen, dim)
	}
	return emb, nil
}
