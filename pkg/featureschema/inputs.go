package featureschema

import (
	"fmt"

	"github.com/monolith-go/monolith/pkg/trainer/batch"
)

// HashBytes is HashString of b's bytes (the decoders hash bytes_list values without making
// strings of them).
func HashBytes(b []byte) uint64 {
	h := uint64(fnvOffset64)
	for _, c := range b {
		h ^= uint64(c)
		h *= fnvPrime64
	}
	return h
}

// Inputs are how the trainer's decoder reads records of format as the schema describes them: the
// label through its rule, each sparse feature's ids in its slot (strings hashed), each dense
// feature's floats, optional features' defaults; errors suggest names (Suggest).
func (s *Schema) Inputs(format batch.Format) (batch.Inputs, error) {
	in := batch.Inputs{Format: format, Label: batch.LabelInput{Source: s.Label.SourceName(), Apply: s.Label.Apply}, Suggest: Suggest}
	for _, f := range s.Sparse() {
		si := batch.SparseInput{Name: f.Name, Source: f.SourceName(), Slot: f.FidSlot(), Optional: f.Optional}
		if f.Kind == SparseString {
			si.Hash = HashBytes
		}
		if f.Optional {
			ids, err := f.DefaultIDs()
			if err != nil {
				return batch.Inputs{}, fmt.Errorf("feature %q: %w", f.Name, err)
			}
			for _, id := range ids {
				si.Default = append(si.Default, FID(si.Slot, id))
			}
		}
		in.Sparse = append(in.Sparse, si)
	}
	for _, f := range s.Dense() {
		di := batch.DenseInput{Name: f.Name, Source: f.SourceName(), Dim: f.DenseDim(), Optional: f.Optional}
		if f.Optional {
			vals, err := f.DefaultFloats()
			if err != nil {
				return batch.Inputs{}, fmt.Errorf("feature %q: %w", f.Name, err)
			}
			di.Default = vals
		}
		in.Dense = append(in.Dense, di)
	}
	return in, nil
}

// BatchSchema is the model's view of the schema: the dense features in order (the dense row) and
// the sparse features' names (in the order of a batch's fids), with the optional features'
// defaults, which the export keeps so that serving fills in what training did.
func (s *Schema) BatchSchema() (batch.Schema, error) {
	in, err := s.Inputs(batch.Monolith)
	if err != nil {
		return batch.Schema{}, err
	}
	var out batch.Schema
	for _, d := range in.Dense {
		out.Dense = append(out.Dense, batch.DenseFeature{Name: d.Name, Dim: d.Dim, Default: d.Default})
	}
	for _, f := range in.Sparse {
		out.Sparse = append(out.Sparse, f.Name)
		if f.Optional && f.Default != nil {
			if out.SparseDefault == nil {
				out.SparseDefault = map[string][]uint64{}
			}
			out.SparseDefault[f.Name] = f.Default
		}
	}
	return out, nil
}
