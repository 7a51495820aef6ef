package featureschema

import (
	"fmt"
	"strconv"
	"strings"

	featureschemaspec "github.com/monolith-go/monolith/gen/spec/go/feature_schema"
)

// FromFlags is the schema of cmd/train's shorthand flags, for Monolith Examples: dense is
// --dense_features (name:dim, ...), sparse is --sparse_features (name:slot, ...; a name slot_<n>
// without :slot is in slot n); sparse features are sparse_int (the examples hold fids) and the
// label is the Example's own label, 0 or 1. An empty flag lists no features of its kind (a caller
// with defaults, as the trainer's demo, fills them in before).
func FromFlags(dense, sparse string) (*Schema, error) {
	s := &Schema{Label: Label{Label: featureschemaspec.Label{Source: DefaultLabelSource}}}
	names := map[string]string{}
	add := func(flag string, f featureschemaspec.Feature) error {
		if prev, ok := names[f.Name]; ok {
			return fmt.Errorf("%s: feature %q is already in %s", flag, f.Name, prev)
		}
		names[f.Name] = flag
		f.Separator = DefaultSeparator
		s.Features = append(s.Features, Feature{Feature: f})
		return nil
	}
	if strings.TrimSpace(dense) != "" {
		for _, item := range strings.Split(dense, ",") {
			name, dim, ok := strings.Cut(strings.TrimSpace(item), ":")
			n, err := strconv.Atoi(dim)
			if !ok || name == "" || err != nil || n <= 0 {
				return nil, fmt.Errorf("--dense_features %q: want name:dim items (dim > 0), got %q", dense, item)
			}
			if err := add("--dense_features", featureschemaspec.Feature{Name: name, Kind: Dense, Dim: &n}); err != nil {
				return nil, err
			}
		}
	}
	if strings.TrimSpace(sparse) != "" {
		slots := map[int]string{}
		for _, item := range strings.Split(sparse, ",") {
			name, slot, given := strings.Cut(strings.TrimSpace(item), ":")
			if name == "" {
				return nil, fmt.Errorf("--sparse_features %q: empty feature name", sparse)
			}
			if !given {
				if slot, given = strings.CutPrefix(name, "slot_"); !given {
					return nil, fmt.Errorf("--sparse_features: feature %q needs its fid slot (give %s:<slot>)", name, name)
				}
			}
			n, err := strconv.Atoi(slot)
			if err != nil || n < 0 || n > MaxSlot {
				return nil, fmt.Errorf("--sparse_features: feature %q: slot %q is not a fid slot (0 to %d)", name, slot, MaxSlot)
			}
			if prev, ok := slots[n]; ok {
				return nil, fmt.Errorf("--sparse_features: features %q and %q are both in slot %d", prev, name, n)
			}
			slots[n] = name
			if err := add("--sparse_features", featureschemaspec.Feature{Name: name, Kind: SparseInt, Slot: &n}); err != nil {
				return nil, err
			}
		}
	}
	if len(s.Features) == 0 {
		return nil, fmt.Errorf("no features: give --dense_features and/or --sparse_features")
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("--dense_features/--sparse_features: %w", err)
	}
	return s, nil
}
