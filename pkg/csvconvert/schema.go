package csvconvert

import (
	"fmt"

	"github.com/monolith-go/monolith/pkg/featureschema"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
)

// PlanOf is the plan of a feature schema: its label column and rule, and each feature's column,
// kind, slot, dim and cell separator.
func PlanOf(s *featureschema.Schema) (*Plan, error) {
	p := &Plan{
		LabelSource: s.Label.SourceName(),
		LabelApply:  s.Label.Apply,
		Hash:        featureschema.HashString,
	}
	for _, f := range s.Features {
		cf := Feature{
			Name:      f.Name,
			Source:    f.SourceName(),
			Slot:      f.FidSlot(),
			Dim:       f.DenseDim(),
			Separator: f.CellSeparator(),
			Optional:  f.Optional,
		}
		switch f.Kind {
		case featureschema.SparseInt:
			cf.Kind = SparseInt
		case featureschema.SparseString:
			cf.Kind = SparseString
		case featureschema.Dense:
			cf.Kind = Dense
		default:
			return nil, fmt.Errorf("csvconvert: feature %q: unknown kind %q", f.Name, f.Kind)
		}
		p.Features = append(p.Features, cf)
	}
	return p, nil
}

// Inputs are the batch.Decoder inputs that read s's records in format as the trainer must read
// them: the label's rule, each sparse feature's slot, hash and default fids, each dense feature's
// dim and default. The tests decode what the Converter writes with them; a trainer building its
// inputs from the same schema must agree.
func Inputs(s *featureschema.Schema, format batch.Format) (batch.Inputs, error) {
	in := batch.Inputs{Format: format, Label: batch.LabelInput{Source: s.Label.SourceName(), Apply: s.Label.Apply}}
	for _, f := range s.Sparse() {
		ids, err := f.DefaultIDs()
		if err != nil {
			return batch.Inputs{}, fmt.Errorf("csvconvert: feature %q: %w", f.Name, err)
		}
		si := batch.SparseInput{Name: f.Name, Source: f.SourceName(), Slot: f.FidSlot(), Optional: f.Optional}
		for _, id := range ids {
			si.Default = append(si.Default, featureschema.FID(si.Slot, id))
		}
		if f.Kind == featureschema.SparseString {
			si.Hash = func(b []byte) uint64 { return uint64(featureschema.StringID(string(b))) }
		}
		in.Sparse = append(in.Sparse, si)
	}
	for _, f := range s.Dense() {
		def, err := f.DefaultFloats()
		if err != nil {
			return batch.Inputs{}, fmt.Errorf("csvconvert: feature %q: %w", f.Name, err)
		}
		in.Dense = append(in.Dense, batch.DenseInput{Name: f.Name, Source: f.SourceName(), Dim: f.DenseDim(), Optional: f.Optional, Default: def})
	}
	return in, nil
}
