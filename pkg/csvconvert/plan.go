// Package csvconvert turns CSV/TSV rows into Example records (tf.train.Example or Monolith
// Example) as a feature schema describes the columns, for cmd/convert: the records
// pkg/trainer/batch.Decoder reads back. Every value is checked while converting, so that a bad row
// is reported at its file:line rather than by the trainer hours later.
//
// The pieces: a Plan (what to read, from the schema: PlanOf), a Converter (rows of one file at a
// time -> records dealt round-robin to shards) and an Output (the shards, written as temporary
// files and renamed into place only when all are complete). A row is converted in one pass, its
// values' wire bytes put straight into the record (encode.go), so that converting costs about
// what encoding/csv's reading does (BenchmarkConvertVsCSV).
//
// A cell may hold several values split by the feature's separator (featureschema's default ";");
// spaces around values are dropped. An optional feature's empty cell leaves the feature out of the
// record, for the reader to use the schema's default; an empty item in a list ("a;;b") is a bad
// row, as is any value that does not parse as its kind.
package csvconvert

import (
	"fmt"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
)

// Kind is what a feature's cells hold.
type Kind int

// The feature kinds of the schema.
const (
	// SparseInt cells hold integer ids.
	SparseInt Kind = iota
	// SparseString cells hold strings, hashed into ids (here for Monolith Examples, by the trainer
	// for tf.train.Examples).
	SparseString
	// Dense cells hold Dim floats.
	Dense
)

func (k Kind) String() string {
	switch k {
	case SparseInt:
		return "sparse_int"
	case SparseString:
		return "sparse_string"
	case Dense:
		return "dense"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Feature is one feature as the converter reads it from a column.
type Feature struct {
	// Name names the feature in errors.
	Name string
	// Source is the column (header name) holding it, and the feature's name in the records.
	Source string
	Kind   Kind
	// Slot is the fid slot of a sparse feature's ids (Monolith Examples).
	Slot int
	// Dim is a dense feature's number of values.
	Dim int
	// Separator splits a cell into several values; "": the cell is one value.
	Separator string
	// Optional features may have empty cells: the feature is then left out of the record, and
	// the reader (the trainer's Decoder) applies the schema's default.
	Optional bool
}

// Plan says what to read from each row: the label's column and rule, and the features.
type Plan struct {
	// LabelSource is the label's column (and its feature's name in a tf.train.Example).
	LabelSource string
	// LabelApply validates a raw label (the schema's rule: 0/1, a threshold, positive values);
	// the raw value is what is written, the trainer applies the rule again. nil accepts 0 and 1.
	LabelApply func(float64) (float32, error)
	Features   []Feature
	// Hash turns a sparse_string value into its id (featureschema.HashString); needed for
	// Monolith Examples, which hold fids (batch.FID of the slot and the id, the same as
	// featureschema.FID).
	Hash func(string) uint64
}

// validate checks what the converter relies on; the schema loader checks the rest.
func (p *Plan) validate(format batch.Format) error {
	if p.LabelSource == "" {
		return errkind.New(errkind.Value, "csvconvert: the plan has no label column")
	}
	if len(p.Features) == 0 {
		return errkind.New(errkind.Value, "csvconvert: the plan has no features")
	}
	seen := map[string]string{p.LabelSource: "the label"}
	for _, f := range p.Features {
		if prev, dup := seen[f.Source]; dup {
			return errkind.New(errkind.Value, "csvconvert: feature %q reads column %q, as %s does", f.Name, f.Source, prev)
		}
		seen[f.Source] = fmt.Sprintf("feature %q", f.Name)
		if f.Kind == Dense && f.Dim <= 0 {
			return errkind.New(errkind.Value, "csvconvert: dense feature %q: dim %d is not positive", f.Name, f.Dim)
		}
		if f.Kind == Dense && f.Dim > 1 && f.Separator == "" {
			return errkind.New(errkind.Value, "csvconvert: dense feature %q has %d values and no separator to split its cells", f.Name, f.Dim)
		}
		if f.Kind != Dense && (f.Slot < 0 || f.Slot > batch.MaxSlot) {
			return errkind.New(errkind.Value, "csvconvert: feature %q: slot %d is not a v2 fid slot (0 to %d)", f.Name, f.Slot, batch.MaxSlot)
		}
		if f.Kind == SparseString && format == batch.Monolith && p.Hash == nil {
			return errkind.New(errkind.Value, "csvconvert: feature %q holds strings and the plan has no hash", f.Name)
		}
	}
	return nil
}
