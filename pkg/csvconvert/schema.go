package csvconvert

import (
	"fmt"

	"github.com/monolith-go/monolith/pkg/featureschema"
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
