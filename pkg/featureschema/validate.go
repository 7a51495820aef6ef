package featureschema

import (
	"fmt"
	"slices"
	"strings"

	featureschemaspec "github.com/monolith-go/monolith/gen/spec/go/feature_schema"
)

// Validate checks what the generated decoder cannot see one key at a time: the label's rule,
// unique names and slots, keys that only fit some kinds, defaults of the feature's kind, and that
// no feature reads the label. Its errors name the place (when the schema came from a file), the
// path and the value; the first one found is returned.
func (s *Schema) Validate() error {
	v := validator{file: s.File}
	if err := v.label(&s.Label); err != nil {
		return err
	}
	if len(s.Features) == 0 {
		return v.errorf(Pos{}, "features", "no features: a schema lists at least one")
	}
	names := map[string]int{}
	slots := map[int]int{}
	for i := range s.Features {
		f := &s.Features[i]
		path := fmt.Sprintf("features[%d]", i)
		if err := v.feature(f, path); err != nil {
			return err
		}
		if j, ok := names[f.Name]; ok {
			return v.errorf(at(f.At.Name, f.Pos), path+".name", "%q is already the name of features[%d]%s", f.Name, j, v.line(s.Features[j].At.Name))
		}
		names[f.Name] = i
		if f.IsSparse() {
			if j, ok := slots[*f.Slot]; ok {
				g := s.Features[j]
				return v.errorf(at(f.At.Slot, f.Pos), path+".slot", "slot %d of %q is already the slot of features[%d] %q%s", *f.Slot, f.Name, j, g.Name, v.line(g.At.Slot))
			}
			slots[*f.Slot] = i
		}
		if src := f.SourceName(); src == s.Label.SourceName() {
			p := path
			if f.Source != nil {
				p += ".source"
			}
			return v.errorf(at(f.At.Source, f.Pos), p, "feature %q reads %q, the label's column: a feature must not hold the label", f.Name, src)
		}
	}
	return nil
}

type validator struct{ file string }

func (v validator) errorf(p Pos, path, format string, args ...any) error {
	if v.file == "" {
		p = Pos{} // a schema made in code: places mean nothing
	}
	return &Error{File: v.file, Pos: p, Path: path, Msg: fmt.Sprintf(format, args...)}
}

// line is " (line N)" naming where another value is, when it came from a file.
func (v validator) line(p Pos) string {
	if v.file == "" || p.IsZero() {
		return ""
	}
	return fmt.Sprintf(" (line %d)", p.Line)
}

// at is the place of a key's value, or of its record when the key is absent.
func at(key, record Pos) Pos {
	if key.IsZero() {
		return record
	}
	return key
}

func (v validator) label(l *Label) error {
	if l.Source == "" && !l.At.Source.IsZero() {
		return v.errorf(l.At.Source, "label.source", "empty: omit it for %q", DefaultLabelSource)
	}
	if l.Threshold != nil && l.Positive != nil {
		return v.errorf(l.At.Positive, "label", "threshold (%s) and positive (%s) are exclusive: give one rule", fmtFloat(*l.Threshold), strings.Join(l.Positive, ", "))
	}
	if l.Threshold != nil && !finite(*l.Threshold) {
		return v.errorf(l.At.Threshold, "label.threshold", "%s is not a finite number", fmtFloat(*l.Threshold))
	}
	if l.Positive != nil {
		if len(l.Positive) == 0 {
			return v.errorf(l.At.Positive, "label.positive", "empty: no value would be 1 (give the values that are)")
		}
		pos, bad, err := l.positiveValues()
		if err != nil {
			return v.errorf(l.At.Positive, fmt.Sprintf("label.positive[%d]", bad), "%v", err)
		}
		l.positive = pos
	}
	return nil
}

func (v validator) feature(f *Feature, path string) error {
	if f.Name == "" {
		return v.errorf(at(f.At.Name, f.Pos), path+".name", "empty: a feature needs a name")
	}
	if !slices.Contains(featureschemaspec.FeatureKindValues, f.Kind) {
		return v.errorf(at(f.At.Kind, f.Pos), path+".kind", "%q is not one of sparse_int, sparse_string, dense", f.Kind)
	}
	if f.Source != nil && *f.Source == "" {
		return v.errorf(at(f.At.Source, f.Pos), path+".source", "empty: omit it to read %q, the feature's name", f.Name)
	}
	if f.Separator == "" && !f.At.Separator.IsZero() {
		return v.errorf(f.At.Separator, path+".separator", "empty: omit it for %q", DefaultSeparator)
	}
	if f.IsSparse() {
		if err := v.sparse(f, path); err != nil {
			return err
		}
	} else if err := v.dense(f, path); err != nil {
		return err
	}
	if f.Optional && f.Default == nil {
		return v.errorf(at(f.At.Optional, f.Pos), path, "optional feature %q needs a default (what a record that lacks it holds)", f.Name)
	}
	if !f.Optional && f.Default != nil {
		return v.errorf(at(f.At.Default, f.Pos), path+".default", "default given for required feature %q: set optional: true, or drop the default", f.Name)
	}
	if err := f.checkDefault(); err != nil {
		return v.errorf(at(f.At.Default, f.Pos), path+".default", "%v", err)
	}
	return nil
}

func (v validator) sparse(f *Feature, path string) error {
	if f.Slot == nil {
		return v.errorf(f.Pos, path, "%s feature %q needs a slot (0 to %d)", f.Kind, f.Name, MaxSlot)
	}
	if *f.Slot < 0 || *f.Slot > MaxSlot {
		return v.errorf(at(f.At.Slot, f.Pos), path+".slot", "%d is not a fid slot (0 to %d)", *f.Slot, MaxSlot)
	}
	if f.Dim != nil && *f.Dim != 0 {
		return v.errorf(at(f.At.Dim, f.Pos), path+".dim", "dim %d given for %s feature %q: dim is for dense features (a record holds any number of ids)", *f.Dim, f.Kind, f.Name)
	}
	if f.Pooling != nil && *f.Pooling != PoolingSum && *f.Pooling != PoolingMean {
		return v.errorf(at(f.At.Pooling, f.Pos), path+".pooling", "%q is not one of sum, mean", *f.Pooling)
	}
	if f.Buckets != nil && *f.Buckets < 0 {
		return v.errorf(at(f.At.Buckets, f.Pos), path+".buckets", "%d is below the minimum 0", *f.Buckets)
	}
	return nil
}

func (v validator) dense(f *Feature, path string) error {
	if f.Slot != nil {
		return v.errorf(at(f.At.Slot, f.Pos), path+".slot", "slot %d given for dense feature %q: slots are for sparse features", *f.Slot, f.Name)
	}
	if f.Dim == nil {
		return v.errorf(f.Pos, path, "dense feature %q needs dim, its number of floats (> 0)", f.Name)
	}
	if *f.Dim <= 0 {
		return v.errorf(at(f.At.Dim, f.Pos), path+".dim", "dim %d of dense feature %q: want > 0", *f.Dim, f.Name)
	}
	if f.Pooling != nil {
		return v.errorf(at(f.At.Pooling, f.Pos), path+".pooling", "pooling %q given for dense feature %q: pooling is for sparse features", *f.Pooling, f.Name)
	}
	if f.Buckets != nil {
		return v.errorf(at(f.At.Buckets, f.Pos), path+".buckets", "buckets %d given for dense feature %q: buckets are for sparse features", *f.Buckets, f.Name)
	}
	return nil
}

// checkDefault parses the default as the feature's kind.
func (f *Feature) checkDefault() error {
	if f.Default == nil {
		return nil
	}
	var err error
	switch f.Kind {
	case SparseInt:
		_, err = f.DefaultIDs()
	case SparseString:
		_, err = f.DefaultStrings()
	case Dense:
		_, err = f.DefaultFloats()
	}
	return err
}
