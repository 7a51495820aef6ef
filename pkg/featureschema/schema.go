// Package featureschema is the feature schema: the one description of training data (which field
// is the label and how it becomes 0/1, which fields are sparse ids in which fid slot, which are
// dense floats) that cmd/train --schema, the dataset decoders and cmd/convert all read, so that no
// input source keeps its own copy of those rules.
//
// The file format is specs/go/feature_schema.yaml; its types and strict decoder are generated
// (gen/spec/go/feature_schema, whose format.md is the format's reference). This package adds what
// a decoder of one key at a time cannot check (unique names and slots, keys that only fit some
// kinds, defaults of the feature's kind, exclusive label rules) and the meaning of the values:
// ids, fids, hashing of strings, label rules.
package featureschema

import (
	"fmt"
	"os"

	featureschemaspec "github.com/monolith-go/monolith/gen/spec/go/feature_schema"
)

// Kind is what a feature's values are.
type Kind = featureschemaspec.FeatureKind

// The kinds of features.
const (
	// SparseInt features hold integer ids.
	SparseInt = featureschemaspec.FeatureKindSparseInt
	// SparseString features hold strings, hashed to ids by StringID.
	SparseString = featureschemaspec.FeatureKindSparseString
	// Dense features hold a fixed number (dim) of floats.
	Dense = featureschemaspec.FeatureKindDense
)

// Pooling is how a sparse feature's embeddings are pooled into one vector.
type Pooling = featureschemaspec.FeaturePooling

// The poolings.
const (
	PoolingSum  = featureschemaspec.FeaturePoolingSum
	PoolingMean = featureschemaspec.FeaturePoolingMean
)

// Error is an error at a place of a schema file: "file:line:col: path: message" on one line.
type Error = featureschemaspec.Error

// Pos is a place in a schema file (zero: none, e.g. a schema made by FromFlags).
type Pos = featureschemaspec.Pos

// DefaultSeparator separates several values in one CSV cell when a feature names none.
const DefaultSeparator = ";"

// DefaultLabelSource is the label's column / feature name when the schema names none.
const DefaultLabelSource = "label"

// MaxSlot is the largest v2 fid slot (15 bits).
const MaxSlot = 1<<15 - 1

// Schema is a checked feature schema.
type Schema struct {
	// File is where the schema was read from, named in errors ("" for one made in code).
	File     string
	Label    Label
	Features []Feature
}

// Label says where the label is and how a raw value becomes 0 or 1 (Apply).
type Label struct {
	featureschemaspec.Label
	// positive is Positive parsed, by Validate (Apply parses Positive itself when it is unset).
	positive []float64
}

// Feature is one input of the model.
type Feature struct {
	featureschemaspec.Feature
}

// Parse decodes and checks a schema file's content; file names it in errors.
func Parse(data []byte, file string) (*Schema, error) {
	raw, err := featureschemaspec.DecodeSchema(data, file)
	if err != nil {
		return nil, err
	}
	s := &Schema{File: file, Label: Label{Label: raw.Label}, Features: make([]Feature, len(raw.Features))}
	for i := range raw.Features {
		s.Features[i] = Feature{raw.Features[i]}
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return s, nil
}

// Load reads and parses the schema file at path.
func Load(path string) (*Schema, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("feature schema: %w", err)
	}
	return Parse(data, path)
}

// Sparse returns the sparse features (sparse_int and sparse_string), in schema order.
func (s *Schema) Sparse() []Feature {
	var out []Feature
	for _, f := range s.Features {
		if f.IsSparse() {
			out = append(out, f)
		}
	}
	return out
}

// Dense returns the dense features in schema order: the order of their values in a dense row.
func (s *Schema) Dense() []Feature {
	var out []Feature
	for _, f := range s.Features {
		if f.Kind == Dense {
			out = append(out, f)
		}
	}
	return out
}

// DenseDim is the length of an example's dense row: the dims of the dense features summed.
func (s *Schema) DenseDim() int {
	n := 0
	for _, f := range s.Dense() {
		n += f.DenseDim()
	}
	return n
}

// Names returns the features' names in schema order (candidates for Suggest).
func (s *Schema) Names() []string {
	out := make([]string, len(s.Features))
	for i, f := range s.Features {
		out[i] = f.Name
	}
	return out
}

// Lookup returns the feature called name.
func (s *Schema) Lookup(name string) (Feature, bool) {
	for _, f := range s.Features {
		if f.Name == name {
			return f, true
		}
	}
	return Feature{}, false
}

// IsSparse reports whether the feature holds ids (sparse_int or sparse_string).
func (f Feature) IsSparse() bool { return f.Kind == SparseInt || f.Kind == SparseString }

// SourceName is the CSV column / Example feature the feature is read from: source, else its name.
func (f Feature) SourceName() string {
	if f.Source != nil && *f.Source != "" {
		return *f.Source
	}
	return f.Name
}

// CellSeparator separates several values in one CSV cell: separator, else DefaultSeparator.
func (f Feature) CellSeparator() string {
	if f.Separator == "" {
		return DefaultSeparator
	}
	return f.Separator
}

// FidSlot is a sparse feature's fid slot (0 when it has none).
func (f Feature) FidSlot() int {
	if f.Slot == nil {
		return 0
	}
	return *f.Slot
}

// DenseDim is a dense feature's number of floats (0 when it has no dim).
func (f Feature) DenseDim() int {
	if f.Dim == nil {
		return 0
	}
	return *f.Dim
}

// PoolingOr is the feature's pooling, or def (the trainer's --pooling) when it names none.
func (f Feature) PoolingOr(def Pooling) Pooling {
	if f.Pooling == nil {
		return def
	}
	return *f.Pooling
}

// BucketsOr is the feature's number of hash buckets (0: collisionless), or def (the trainer's
// --embedding_buckets) when it names none.
func (f Feature) BucketsOr(def int) int {
	if f.Buckets == nil {
		return def
	}
	return *f.Buckets
}

// SourceName is the CSV column / tf.train.Example feature holding the label (a Monolith Example's
// label is its own label field).
func (l Label) SourceName() string {
	if l.Source == "" {
		return DefaultLabelSource
	}
	return l.Source
}
