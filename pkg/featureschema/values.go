package featureschema

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/monolith-go/monolith/pkg/trainer/batch"
)

// IDBits is how many bits of an id a v2 fid keeps: fid = slot<<IDBits | id&IDMask.
const IDBits = 48

// IDMask keeps the low IDBits bits of an id.
const IDMask = 1<<IDBits - 1

// FID is the v2 fid of id in slot: slot<<48 | id's low 48 bits (a negative id keeps its two's
// complement low bits, as Monolith's fids do).
func FID(slot int, id int64) uint64 { return batch.FID(slot, uint64(id)) }

// FNV-1a 64 parameters (http://www.isthe.com/chongo/tech/comp/fnv/).
const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

// HashString is the hash that turns a sparse_string value into an id: 64-bit FNV-1a of its UTF-8
// bytes (hash/fnv's New64a, computed without allocating). It is part of the format: ids in trained
// embeddings depend on it, so it never changes. (hash/maphash is seeded per process: not stable.)
func HashString(s string) uint64 {
	h := uint64(fnvOffset64)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime64
	}
	return h
}

// StringID is a sparse_string value's id: HashString truncated to the 48 bits a fid keeps.
func StringID(s string) int64 { return int64(HashString(s) & IDMask) }

// SplitCell splits a CSV cell into the feature's values at its separator; an empty (or blank)
// cell holds no values. Values are trimmed of surrounding spaces.
func (f Feature) SplitCell(cell string) []string {
	if strings.TrimSpace(cell) == "" {
		return nil
	}
	parts := strings.Split(cell, f.CellSeparator())
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

// ParseIDs turns a sparse feature's values into ids: integers (sparse_int) or StringID of each
// string (sparse_string).
func (f Feature) ParseIDs(values []string) ([]int64, error) {
	ids := make([]int64, len(values))
	switch f.Kind {
	case SparseInt:
		for i, v := range values {
			id, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%q is not an integer id (sparse_int feature %q)", v, f.Name)
			}
			ids[i] = id
		}
	case SparseString:
		for i, v := range values {
			ids[i] = StringID(v)
		}
	default:
		return nil, fmt.Errorf("feature %q is %s, not sparse: it has no ids", f.Name, f.Kind)
	}
	return ids, nil
}

// ParseFloats turns a dense feature's values into its dim floats (exactly dim, each finite).
func (f Feature) ParseFloats(values []string) ([]float32, error) {
	if f.Kind != Dense {
		return nil, fmt.Errorf("feature %q is %s, not dense: it has no floats", f.Name, f.Kind)
	}
	if len(values) != f.DenseDim() {
		return nil, fmt.Errorf("%d values for dense feature %q of dim %d", len(values), f.Name, f.DenseDim())
	}
	return parseFloats(values)
}

func parseFloats(values []string) ([]float32, error) {
	out := make([]float32, len(values))
	for i, v := range values {
		x, err := strconv.ParseFloat(strings.TrimSpace(v), 32)
		if err != nil || !finite(x) {
			return nil, fmt.Errorf("%q is not a finite number", v)
		}
		out[i] = float32(x)
	}
	return out, nil
}

// DefaultIDs is the ids of a sparse feature's default (nil when it has none; an empty default is
// no ids): its integers (sparse_int), or the StringID of its strings (sparse_string).
func (f Feature) DefaultIDs() ([]int64, error) {
	if f.Default == nil {
		return nil, nil
	}
	return f.ParseIDs(f.Default)
}

// DefaultStrings is a sparse_string feature's default strings (nil when it has none).
func (f Feature) DefaultStrings() ([]string, error) {
	if f.Kind != SparseString {
		return nil, fmt.Errorf("feature %q is %s: only sparse_string defaults are strings", f.Name, f.Kind)
	}
	if f.Default == nil {
		return nil, nil
	}
	return append([]string{}, f.Default...), nil
}

// DefaultFloats is a dense feature's default as its dim floats (one given value is repeated; nil
// when it has none).
func (f Feature) DefaultFloats() ([]float32, error) {
	if f.Kind != Dense {
		return nil, fmt.Errorf("feature %q is %s, not dense: its default is no floats", f.Name, f.Kind)
	}
	if f.Default == nil {
		return nil, nil
	}
	dim := f.DenseDim()
	if len(f.Default) != dim && len(f.Default) != 1 {
		return nil, fmt.Errorf("%d values [%s] for dense feature %q of dim %d: want %d, or 1 repeated", len(f.Default), strings.Join(f.Default, ", "), f.Name, dim, dim)
	}
	vals, err := parseFloats(f.Default)
	if err != nil {
		return nil, fmt.Errorf("%v (dense feature %q)", err, f.Name)
	}
	if len(vals) == 1 && dim > 1 {
		rep := make([]float32, dim)
		for i := range rep {
			rep[i] = vals[0]
		}
		vals = rep
	}
	return vals, nil
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

func fmtFloat(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
