package csvconvert

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// RowError is a bad row: where it is, the column and the value at fault, and why.
type RowError struct {
	File string
	// Line is the 1-based line of the value (of the row's start when the row as a whole is bad);
	// Col, when not 0, the byte in the line where encoding/csv found the quoting broken.
	Line, Col int
	// Column is the header name of the column at fault; "" when the row as a whole is bad.
	Column string
	// Value is the cell at fault.
	Value  string
	Reason string
}

func (e *RowError) Error() string {
	switch {
	case e.Col > 0:
		return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Reason)
	case e.Column == "":
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

// scanDigits returns the value of the decimal digits s starts with and how many there are (v
// overflows beyond 19). It is kept a call of its own: inlined, its loop's variables lived on the
// stack (3x the instructions per digit).
//
//go:noinline
func scanDigits(s string) (v uint64, n int) {
	for ; n < len(s); n++ {
		d := s[n] - '0'
		if d > 9 {
			break
		}
		v = v*10 + uint64(d)
	}
	return v, n
}

// isEmpty reports whether a cell holds nothing but spaces.
func isEmpty(cell string) bool {
	return len(cell) == 0 || (cell[0] <= ' ' || cell[0] >= 0x80) && trimSpace(cell) == ""
}

// nextItem splits a cell's first item (up to sep; "" : the whole cell is one) from the rest; more
// says whether the rest holds another.
func nextItem(cell, sep string) (item, rest string, more bool) {
	switch len(sep) {
	case 0:
		return cell, "", false
	case 1:
		if k := strings.IndexByte(cell, sep[0]); k >= 0 {
			return cell[:k], cell[k+1:], true
		}
		return cell, "", false
	}
	return strings.Cut(cell, sep)
}

// badFloat is why item is not a dense value.
func badFloat(item, sep string) *cellError {
	s := trimSpace(item)
	v, err := strconv.ParseFloat(s, 32)
	switch {
	case s == "":
		return badCell("an empty item in a list separated by %q", sep)
	case err != nil && errors.Is(err, strconv.ErrRange):
		return badCell("%q is out of float32's range", item)
	case err != nil:
		return badCell("%q is not a number", item)
	case math.IsNaN(v) || math.IsInf(v, 0):
		return badCell("%q: dense values must be finite", item)
	}
	return badCell("%q is not a dense value", item) // parseFloat32 takes every finite number
}

// trimSpace drops the spaces around a value ("1; 2"), as featureschema's SplitCell does.
func trimSpace(s string) string {
	if len(s) > 0 && s[0] > ' ' && s[len(s)-1] > ' ' && s[0] < 0x80 && s[len(s)-1] < 0x80 {
		return s // the common case, without a call
	}
	return strings.TrimSpace(s)
}
