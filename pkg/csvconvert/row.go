package csvconvert

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/monolith-go/monolith/pkg/trainer/batch"
)

// RowError is a bad row: where it is, the column and the value at fault, and why.
type RowError struct {
	File string
	// Line is the 1-based line of the value (of the row's start when the row as a whole is bad).
	Line int
	// Column is the header name of the column at fault; "" when the row as a whole is bad.
	Column string
	// Value is the cell at fault.
	Value  string
	Reason string
}

func (e *RowError) Error() string {
	if e.Column == "" {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Reason)
	}
	return fmt.Sprintf("%s:%d: column %q: value %q: %s", e.File, e.Line, e.Column, e.Value, e.Reason)
}

// cellError is why a cell is bad; the converter adds where.
type cellError struct{ reason string }

func (e *cellError) Error() string { return e.reason }

func badCell(format string, args ...any) *cellError {
	return &cellError{fmt.Sprintf(format, args...)}
}

// row holds one row's parsed values, reused from row to row so that converting does not allocate:
// feature i's values are vals[start[i]:end[i]] of its kind's slice (ids for sparse ids, strs for
// the strings of a tf.train.Example, floats for dense values).
type row struct {
	label      float32
	present    []bool
	start, end []int
	ids        []uint64
	strs       []string
	floats     []float32
}

func newRow(n int) *row {
	return &row{present: make([]bool, n), start: make([]int, n), end: make([]int, n)}
}

func (r *row) reset() {
	r.ids, r.strs, r.floats = r.ids[:0], r.strs[:0], r.floats[:0]
}

// parser turns cells into a row's values as the plan says.
type parser struct {
	plan   *Plan
	format batch.Format
	fid    func(int, uint64) uint64
}

// label parses the label cell: a number the plan's rule accepts, kept raw.
func (p *parser) label(cell string) (float32, *cellError) {
	s := trimSpace(cell)
	if s == "" {
		return 0, badCell("the label is empty")
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, badCell("the label is not a finite number")
	}
	raw := float32(v)
	// The trainer reads the float32 written, so that is the value to check.
	if p.plan.LabelApply != nil {
		if _, err := p.plan.LabelApply(float64(raw)); err != nil {
			return 0, badCell("bad label: %v", err)
		}
	} else if raw != 0 && raw != 1 {
		return 0, badCell("the label is not 0 or 1")
	}
	return raw, nil
}

// feature parses feature i's cell into r. An empty cell of an optional feature leaves the feature
// out of the row.
func (p *parser) feature(r *row, i int, cell string) *cellError {
	f := &p.plan.Features[i]
	if trimSpace(cell) == "" {
		if !f.Optional {
			return badCell("the cell of required feature %q is empty", f.Name)
		}
		r.present[i] = false
		return nil
	}
	r.present[i] = true
	switch f.Kind {
	case SparseInt:
		r.start[i] = len(r.ids)
		err := eachItem(cell, f.Separator, func(item string) *cellError {
			id, ok := parseID(trimSpace(item))
			if !ok {
				return badCell("%q is not an integer id", item)
			}
			if p.format == batch.Monolith {
				id = p.fid(f.Slot, id)
			}
			r.ids = append(r.ids, id)
			return nil
		})
		r.end[i] = len(r.ids)
		return err
	case SparseString:
		if p.format == batch.Monolith {
			r.start[i] = len(r.ids)
			err := eachItem(cell, f.Separator, func(item string) *cellError {
				r.ids = append(r.ids, p.fid(f.Slot, p.plan.Hash(trimSpace(item))))
				return nil
			})
			r.end[i] = len(r.ids)
			return err
		}
		r.start[i] = len(r.strs)
		err := eachItem(cell, f.Separator, func(item string) *cellError {
			r.strs = append(r.strs, trimSpace(item))
			return nil
		})
		r.end[i] = len(r.strs)
		return err
	case Dense:
		r.start[i] = len(r.floats)
		err := eachItem(cell, f.Separator, func(item string) *cellError {
			s := trimSpace(item)
			v, err := strconv.ParseFloat(s, 32)
			if err != nil {
				if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
					return badCell("%q is out of float32's range", item)
				}
				return badCell("%q is not a number", item)
			}
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return badCell("%q: dense values must be finite", item)
			}
			r.floats = append(r.floats, float32(v))
			return nil
		})
		r.end[i] = len(r.floats)
		if err != nil {
			return err
		}
		if n := r.end[i] - r.start[i]; n != f.Dim {
			return badCell("feature %q has %d values, the schema's dim is %d", f.Name, n, f.Dim)
		}
		return nil
	}
	return badCell("feature %q has unknown kind %v", f.Name, f.Kind)
}

// eachItem calls f with each item of cell split by sep ("": the cell is one item); an empty item
// (two separators in a row, or one at an end) is an error.
func eachItem(cell, sep string, f func(item string) *cellError) *cellError {
	if sep == "" {
		return f(cell)
	}
	for {
		item, rest, more := strings.Cut(cell, sep)
		if trimSpace(item) == "" {
			return badCell("an empty item in a list separated by %q", sep)
		}
		if err := f(item); err != nil {
			return err
		}
		if !more {
			return nil
		}
		cell = rest
	}
}

// trimSpace drops the spaces around a value ("1; 2"), as featureschema's SplitCell does.
func trimSpace(s string) string {
	if len(s) > 0 && s[0] > ' ' && s[len(s)-1] > ' ' && s[0] < 0x80 && s[len(s)-1] < 0x80 {
		return s // the common case, without a call
	}
	return strings.TrimSpace(s)
}

// parseID reads a decimal int64 id (a negative one as its two's complement, as an int64_list
// holds it), as featureschema's ParseIDs does.
func parseID(s string) (uint64, bool) {
	// The common case, up to 18 digits, without strconv's generality.
	neg := len(s) > 0 && s[0] == '-'
	digits := s
	if neg {
		digits = s[1:]
	}
	if n := len(digits); n > 0 && n <= 18 {
		var v uint64
		for i := 0; i < n; i++ {
			c := digits[i] - '0'
			if c > 9 {
				return parseIDSlow(s)
			}
			v = v*10 + uint64(c)
		}
		if neg {
			return -v, true
		}
		return v, true
	}
	return parseIDSlow(s)
}

func parseIDSlow(s string) (uint64, bool) {
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		return uint64(v), true
	}
	return 0, false
}
