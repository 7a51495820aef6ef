package batch

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	examplepb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/example"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// Format is the kind of Example a record holds.
type Format string

// The record formats (cmd/train --input_format).
const (
	// Monolith is Monolith's Example (idl/matrix/proto/example.proto): named features holding
	// fid_v1_list / fid_v2_list ids, float_list values, and the label in its own field.
	Monolith Format = "monolith"
	// TFExample is TensorFlow's tf.train.Example: a map of features, each a bytes_list, float_list
	// or int64_list; the label is a feature too.
	TFExample Format = "tf_example"
)

// ParseFormat reads a Format's name.
func ParseFormat(s string) (Format, error) {
	switch Format(s) {
	case Monolith, TFExample:
		return Format(s), nil
	}
	return "", errkind.New(errkind.Value, "unknown input format %q (monolith, tf_example)", s)
}

// The v2 fid layout: bits 48 to 62 the slot, bits 0 to 47 the id. A v1 fid has its slot in bits 54
// to 63 and the id in bits 0 to 53; converting one to v2 keeps the slot and the id's low 48 bits,
// as the reference's FIDV1::ConvertAsV2 does (its v2 signature is a 48-bit field).
const (
	fidV2SlotShift = 48
	fidV2IDMask    = 1<<fidV2SlotShift - 1
	fidV1SlotShift = 54
	// MaxSlot is the largest v2 fid slot.
	MaxSlot = 1<<15 - 1
)

// FID is the v2 fid of id in slot: the id's low 48 bits.
func FID(slot int, id uint64) uint64 { return uint64(slot)<<fidV2SlotShift | id&fidV2IDMask }

// FIDV1ToV2 converts a v1 fid (slot in bits 54-63) to the v2 layout (the reference's
// FIDV1::ConvertAsV2).
func FIDV1ToV2(fid uint64) uint64 { return FID(int(fid>>fidV1SlotShift), fid) }

// SlotOfFID is a v2 fid's slot.
func SlotOfFID(fid uint64) int { return int(fid >> fidV2SlotShift) }

// AnySlot is a SparseInput's Slot for fids taken with the slot they carry.
const AnySlot = -1

// SparseInput is how a sparse feature is read from a record.
type SparseInput struct {
	// Name names the feature in errors.
	Name string
	// Source is the record's feature holding it.
	Source string
	// Slot is the v2 fid slot its ids are given; AnySlot takes a Monolith Example's fids as
	// they are, whatever their slot (the fids carry it; cmd/train's --sparse_features).
	Slot int
	// Hash turns bytes_list values into ids (a sparse_string feature); nil: the feature holds
	// integer ids, and a bytes_list is an error.
	Hash func([]byte) uint64
	// Optional features may be missing from a record: then Default's fids are used (none when
	// empty). A missing required feature is an error.
	Optional bool
	// Default are the fids (of Slot) of a record that lacks the feature.
	Default []uint64
}

// DenseInput is how a dense feature is read from a record.
type DenseInput struct {
	Name, Source string
	Dim          int
	// Optional features may be missing: then Default (Dim values) is used.
	Optional bool
	Default  []float32
}

// LabelInput is how the label is read.
type LabelInput struct {
	// Source is the feature holding the label in a tf.train.Example (a Monolith Example has a
	// label field of its own).
	Source string
	// Apply turns the raw label into 0 or 1, or says why the value is not a label; nil accepts
	// only 0 and 1.
	Apply func(float64) (float32, error)
}

// Inputs say how a Decoder reads records: the record format and the schema's features, sparse in
// the order of a batch's fids, dense in the order of its dense rows.
type Inputs struct {
	Format Format
	Label  LabelInput
	Sparse []SparseInput
	Dense  []DenseInput
	// Suggest, if set, finds the name nearest to a missing feature's among a record's, for the
	// error's did-you-mean ("" when none is near).
	Suggest func(name string, candidates []string) string
}

// Decoder appends records to batches as Inputs say. Every value is checked: a missing required
// feature, a feature of the wrong kind or length, a NaN or infinite dense value, a label that is
// not one, a Monolith fid of another slot are errors of kind Value naming the feature and the
// value. It also records which features a record had, so that a feature no record has can be
// reported (Missing). A Decoder is not safe for concurrent use.
type Decoder struct {
	in      Inputs
	byName  map[string]int // source -> index: sparse i as i, dense j as len(Sparse)+j, label as -1
	present []bool         // per feature, in this record
	raw     [][]byte       // per feature, its Feature message in this record (tf_example)
	seen    []int64        // per feature, records that had it
	names   map[string]bool
	ex      *examplepb.Example
	feats   []*examplepb.Feature // per feature, in this record (monolith)
	records int64
}

// labelIndex marks the label's source in byName.
const labelIndex = -1

// NewDecoder checks inputs and returns their decoder.
func NewDecoder(in Inputs) (*Decoder, error) {
	if _, err := ParseFormat(string(in.Format)); err != nil {
		return nil, err
	}
	if len(in.Sparse) == 0 && len(in.Dense) == 0 {
		return nil, errkind.New(errkind.Value, "batch: no features to read")
	}
	d := &Decoder{in: in, byName: map[string]int{}, names: map[string]bool{}, ex: &examplepb.Example{}}
	add := func(source string, i int) error {
		if source == "" {
			return errkind.New(errkind.Value, "batch: a feature has no source")
		}
		if j, dup := d.byName[source]; dup {
			return errkind.New(errkind.Value, "batch: features %q and %q read the same source %q", d.nameOf(j), d.nameOf(i), source)
		}
		d.byName[source] = i
		return nil
	}
	if in.Format == TFExample {
		if err := add(in.Label.Source, labelIndex); err != nil {
			return nil, err
		}
	}
	for i, s := range in.Sparse {
		if s.Slot == AnySlot && in.Format != Monolith {
			return nil, errkind.New(errkind.Value, "batch: feature %q: only Monolith Examples' fids carry their slot; give it one", s.Name)
		}
		if (s.Slot < 0 && s.Slot != AnySlot) || s.Slot > MaxSlot {
			return nil, errkind.New(errkind.Value, "batch: feature %q: slot %d is not a v2 fid slot (0 to %d)", s.Name, s.Slot, MaxSlot)
		}
		if err := add(s.Source, i); err != nil {
			return nil, err
		}
	}
	for j, f := range in.Dense {
		if f.Dim <= 0 {
			return nil, errkind.New(errkind.Value, "batch: feature %q: dimension %d is not positive", f.Name, f.Dim)
		}
		if f.Optional && len(f.Default) != f.Dim {
			return nil, errkind.New(errkind.Value, "batch: feature %q: default has %d values, want %d", f.Name, len(f.Default), f.Dim)
		}
		if err := add(f.Source, len(in.Sparse)+j); err != nil {
			return nil, err
		}
	}
	n := len(in.Sparse) + len(in.Dense)
	d.present, d.raw, d.seen = make([]bool, n), make([][]byte, n), make([]int64, n)
	return d, nil
}

func (d *Decoder) nameOf(i int) string {
	switch {
	case i == labelIndex:
		return "label"
	case i < len(d.in.Sparse):
		return d.in.Sparse[i].Name
	}
	return d.in.Dense[i-len(d.in.Sparse)].Name
}

func (d *Decoder) sourceOf(i int) string {
	if i < len(d.in.Sparse) {
		return d.in.Sparse[i].Source
	}
	return d.in.Dense[i-len(d.in.Sparse)].Source
}

// DenseDim is the length of a batch's dense rows.
func (d *Decoder) DenseDim() int {
	n := 0
	for _, f := range d.in.Dense {
		n += f.Dim
	}
	return n
}

// Records is how many records were appended.
func (d *Decoder) Records() int64 { return d.records }

// Missing lists the features (by source) that no record appended so far had, each with what the
// records had that is nearest by name, for a did-you-mean: "userid (did you mean user_id?)".
func (d *Decoder) Missing(suggest func(name string, candidates []string) string) []string {
	var out []string
	var names []string
	for n := range d.names {
		if _, ours := d.byName[n]; !ours {
			names = append(names, n)
		}
	}
	for i, n := range d.seen {
		if n > 0 {
			continue
		}
		s := d.sourceOf(i)
		if suggest != nil {
			if near := suggest(s, names); near != "" {
				s += fmt.Sprintf(" (did you mean %s?)", near)
			}
		}
		out = append(out, s)
	}
	return out
}

// Append decodes rec and appends its example to b. On error b is unchanged.
func (d *Decoder) Append(b *Batch, rec []byte) error {
	clear(d.present)
	b.DenseDim = d.DenseDim()
	nDense, nLabels := len(b.Dense), len(b.Labels)
	var err error
	if d.in.Format == TFExample {
		err = d.appendTF(b, rec)
	} else {
		err = d.appendMonolith(b, rec)
	}
	if err != nil {
		b.Dense, b.Labels = b.Dense[:nDense], b.Labels[:nLabels]
		if len(b.Fids) > nLabels {
			b.Fids = b.Fids[:nLabels]
		}
		return err
	}
	for i, p := range d.present {
		if p {
			d.seen[i]++
		}
	}
	d.records++
	return nil
}

func bad(format string, args ...any) error { return errkind.New(errkind.Value, format, args...) }

// appendMonolith decodes a Monolith Example: the label field, then the features by name.
func (d *Decoder) appendMonolith(b *Batch, rec []byte) error {
	ex := d.ex
	ex.Reset()
	if err := proto.Unmarshal(rec, ex); err != nil {
		return bad("not a Monolith Example: %v", err)
	}
	labels := ex.GetLabel()
	if len(labels) == 0 {
		return bad("the example has no label")
	}
	label, err := d.label(float64(labels[0]))
	if err != nil {
		return err
	}
	if d.feats == nil {
		d.feats = make([]*examplepb.Feature, len(d.present))
	}
	feats := d.feats
	clear(feats)
	for _, nf := range ex.GetNamedFeature() {
		name := nf.GetName()
		i, ok := d.byName[name]
		if !ok {
			if len(d.names) < maxNames {
				d.names[name] = true
			}
			continue
		}
		feats[i], d.present[i] = nf.GetFeature(), true
	}
	var fids []uint64
	for i, s := range d.in.Sparse {
		f := feats[i]
		if f == nil {
			if !s.Optional {
				return d.missing(s.Name, s.Source, rec)
			}
			fids = append(fids, s.Default...)
			continue
		}
		switch {
		case f.GetFidV2List() != nil:
			for _, fid := range f.GetFidV2List().GetValue() {
				if got := SlotOfFID(fid); got != s.Slot && s.Slot != AnySlot {
					return bad("feature %q: fid_v2 %d has slot %d, the schema gives the feature slot %d", s.Name, fid, got, s.Slot)
				}
				fids = append(fids, fid)
			}
		case f.GetFidV1List() != nil:
			for _, v1 := range f.GetFidV1List().GetValue() {
				fid := FIDV1ToV2(v1)
				if got := SlotOfFID(fid); got != s.Slot && s.Slot != AnySlot {
					return bad("feature %q: fid_v1 %d has slot %d, the schema gives the feature slot %d", s.Name, v1, got, s.Slot)
				}
				fids = append(fids, fid)
			}
		case s.Slot == AnySlot:
			return bad("feature %q holds %s: without a slot in the schema only fid_v2_list and fid_v1_list are ids", s.Name, kindOf(f))
		case f.GetInt64List() != nil:
			for _, id := range f.GetInt64List().GetValue() {
				fids = append(fids, FID(s.Slot, uint64(id)))
			}
		case f.GetBytesList() != nil:
			if s.Hash == nil {
				return bad("feature %q holds strings (bytes_list), the schema says integer ids: declare it sparse_string", s.Name)
			}
			for _, v := range f.GetBytesList().GetValue() {
				fids = append(fids, FID(s.Slot, s.Hash(v)))
			}
		default:
			return bad("feature %q holds no ids (%s), want fid_v2_list, fid_v1_list, int64_list or bytes_list", s.Name, kindOf(f))
		}
	}
	for j, df := range d.in.Dense {
		f := feats[len(d.in.Sparse)+j]
		var vals []float32
		switch {
		case f == nil && !df.Optional:
			return d.missing(df.Name, df.Source, rec)
		case f == nil:
			vals = df.Default
		case f.GetFloatList() != nil:
			vals = f.GetFloatList().GetValue()
		case f.GetInt64List() != nil:
			for _, v := range f.GetInt64List().GetValue() {
				vals = append(vals, float32(v))
			}
		default:
			return bad("feature %q holds %s, want float_list (dense, %d values)", df.Name, kindOf(f), df.Dim)
		}
		if err := appendDense(b, df, vals); err != nil {
			return err
		}
	}
	b.Labels = append(b.Labels, label)
	b.Fids = append(b.Fids, fids)
	return nil
}

// missing is the error of a record without the feature name reads from source: with the record's
// features, and the nearest of them when Inputs.Suggest finds one.
func (d *Decoder) missing(name, source string, rec []byte) error {
	var names []string
	if d.in.Format == TFExample {
		forEachField(rec, func(num protowire.Number, typ protowire.Type, v []byte) error {
			if num != tfExampleFeatures || typ != protowire.BytesType {
				return nil
			}
			return forEachField(v, func(num protowire.Number, typ protowire.Type, entry []byte) error {
				return forEachField(entry, func(num protowire.Number, typ protowire.Type, v []byte) error {
					if num == tfEntryKey && typ == protowire.BytesType {
						names = append(names, string(v))
					}
					return nil
				})
			})
		})
	} else {
		for _, nf := range d.ex.GetNamedFeature() {
			names = append(names, nf.GetName())
		}
	}
	slices.Sort(names)
	what := fmt.Sprintf("feature %q (source %q)", name, source)
	if name == "label" {
		what = fmt.Sprintf("the label feature %q", source)
	}
	msg := fmt.Sprintf("%s is missing; the record has %s", what, wordList(names))
	if d.in.Suggest != nil {
		if near := d.in.Suggest(source, names); near != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", near)
		}
	}
	return bad("%s", msg)
}

// wordList lists names for a message, the first few of many.
func wordList(names []string) string {
	const most = 8
	switch {
	case len(names) == 0:
		return "no features"
	case len(names) > most:
		return strings.Join(names[:most], ", ") + fmt.Sprintf(", ... (%d features)", len(names))
	}
	return strings.Join(names, ", ")
}

// maxNames bounds the record feature names kept for did-you-means.
const maxNames = 1000

func kindOf(f *examplepb.Feature) string {
	switch {
	case f.GetFloatList() != nil:
		return "float_list"
	case f.GetDoubleList() != nil:
		return "double_list"
	case f.GetBytesList() != nil:
		return "bytes_list"
	case f.GetInt64List() != nil:
		return "int64_list"
	case f.GetFidV1List() != nil:
		return "fid_v1_list"
	case f.GetFidV2List() != nil:
		return "fid_v2_list"
	}
	return "no list"
}

func appendDense(b *Batch, f DenseInput, vals []float32) error {
	if len(vals) != f.Dim {
		return bad("feature %q has %d values, want %d", f.Name, len(vals), f.Dim)
	}
	for k, v := range vals {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return bad("feature %q: value %d is %v (dense values must be finite)", f.Name, k, v)
		}
	}
	b.Dense = append(b.Dense, vals...)
	return nil
}

func (d *Decoder) label(v float64) (float32, error) {
	if d.in.Label.Apply != nil {
		return d.in.Label.Apply(v)
	}
	if v != 0 && v != 1 {
		return 0, bad("label %v is not 0 or 1 (declare a threshold or positive values in the schema)", v)
	}
	return float32(v), nil
}

// The wire numbers of tf.train.Example (tensorflow/core/example/{example,feature}.proto).
const (
	tfExampleFeatures = 1 // Example.features
	tfFeaturesEntry   = 1 // Features.feature (a map entry: key 1, value 2)
	tfEntryKey        = 1
	tfEntryValue      = 2
	tfBytesList       = 1 // Feature.kind
	tfFloatList       = 2
	tfInt64List       = 3
	tfListValue       = 1 // *List.value
)

var errTFWire = errors.New("not a tf.train.Example")

// appendTF decodes a tf.train.Example straight from its wire bytes: the map of features is never
// built, only the Feature messages of the schema's sources are found and read.
func (d *Decoder) appendTF(b *Batch, rec []byte) error {
	clear(d.raw)
	labelRaw, labelSeen := []byte(nil), false
	err := forEachField(rec, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != tfExampleFeatures || typ != protowire.BytesType {
			return nil
		}
		return forEachField(v, func(num protowire.Number, typ protowire.Type, entry []byte) error {
			if num != tfFeaturesEntry || typ != protowire.BytesType {
				return nil
			}
			var key, val []byte
			if err := forEachField(entry, func(num protowire.Number, typ protowire.Type, v []byte) error {
				if typ == protowire.BytesType {
					switch num {
					case tfEntryKey:
						key = v
					case tfEntryValue:
						val = v
					}
				}
				return nil
			}); err != nil {
				return err
			}
			i, ok := d.byName[string(key)]
			switch {
			case !ok:
				if len(d.names) < maxNames {
					d.names[string(key)] = true
				}
			case i == labelIndex:
				labelRaw, labelSeen = val, true
			default:
				d.raw[i], d.present[i] = val, true
			}
			return nil
		})
	})
	if err != nil {
		return bad("%v: %v", errTFWire, err)
	}
	if !labelSeen {
		return d.missing("label", d.in.Label.Source, rec)
	}
	lk, lv, err := tfList(labelRaw)
	if err != nil {
		return bad("label feature %q: %v", d.in.Label.Source, err)
	}
	var raw float64
	switch {
	case lk == tfFloatList:
		n, err := floatCount(lv)
		if err != nil || n != 1 {
			return bad("label feature %q has %d values, want 1", d.in.Label.Source, n)
		}
		var f [1]float32
		if _, err := decodeFloats(lv, f[:0]); err != nil {
			return bad("label feature %q: %v", d.in.Label.Source, err)
		}
		raw = float64(f[0])
	case lk == tfInt64List:
		ids, err := decodeInts(lv, nil)
		if err != nil || len(ids) != 1 {
			return bad("label feature %q has %d values, want 1", d.in.Label.Source, len(ids))
		}
		raw = float64(int64(ids[0]))
	default:
		return bad("label feature %q holds %s, want float_list or int64_list", d.in.Label.Source, tfKindName(lk))
	}
	label, err := d.label(raw)
	if err != nil {
		return err
	}
	var fids []uint64
	for i, s := range d.in.Sparse {
		if !d.present[i] {
			if !s.Optional {
				return d.missing(s.Name, s.Source, rec)
			}
			fids = append(fids, s.Default...)
			continue
		}
		k, v, err := tfList(d.raw[i])
		if err != nil {
			return bad("feature %q: %v", s.Name, err)
		}
		switch k {
		case tfInt64List:
			start := len(fids)
			if fids, err = decodeInts(v, fids); err != nil {
				return bad("feature %q: %v", s.Name, err)
			}
			for k := start; k < len(fids); k++ {
				fids[k] = FID(s.Slot, fids[k])
			}
		case tfBytesList:
			if s.Hash == nil {
				return bad("feature %q holds strings (bytes_list), the schema says integer ids: declare it sparse_string", s.Name)
			}
			err := forEachField(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
				if num == tfListValue && typ == protowire.BytesType {
					fids = append(fids, FID(s.Slot, s.Hash(v)))
				}
				return nil
			})
			if err != nil {
				return bad("feature %q: %v", s.Name, err)
			}
		default:
			return bad("feature %q holds %s, want int64_list or bytes_list (ids)", s.Name, tfKindName(k))
		}
	}
	for j, df := range d.in.Dense {
		i := len(d.in.Sparse) + j
		if !d.present[i] {
			if !df.Optional {
				return d.missing(df.Name, df.Source, rec)
			}
			if err := appendDense(b, df, df.Default); err != nil {
				return err
			}
			continue
		}
		k, v, err := tfList(d.raw[i])
		if err != nil {
			return bad("feature %q: %v", df.Name, err)
		}
		start := len(b.Dense)
		switch k {
		case tfFloatList:
			b.Dense, err = decodeFloats(v, b.Dense)
		case tfInt64List:
			var ints []uint64
			if ints, err = decodeInts(v, nil); err == nil {
				for _, x := range ints {
					b.Dense = append(b.Dense, float32(int64(x)))
				}
			}
		default:
			return bad("feature %q holds %s, want float_list (dense, %d values)", df.Name, tfKindName(k), df.Dim)
		}
		if err != nil {
			return bad("feature %q: %v", df.Name, err)
		}
		vals := b.Dense[start:]
		b.Dense = b.Dense[:start]
		if err := appendDense(b, df, vals); err != nil {
			return err
		}
	}
	b.Labels = append(b.Labels, label)
	b.Fids = append(b.Fids, fids)
	return nil
}

func tfKindName(k protowire.Number) string {
	switch k {
	case tfBytesList:
		return "bytes_list"
	case tfFloatList:
		return "float_list"
	case tfInt64List:
		return "int64_list"
	}
	return "no list"
}

// tfList reads a Feature message: which list it holds (its last, as proto's oneof) and the list's
// bytes.
func tfList(feature []byte) (protowire.Number, []byte, error) {
	var kind protowire.Number
	var list []byte
	err := forEachField(feature, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if typ == protowire.BytesType && num >= tfBytesList && num <= tfInt64List {
			kind, list = num, v
		}
		return nil
	})
	return kind, list, err
}

// forEachField calls f with every field of msg; a varint or fixed field's v is nil (the callers
// need only length-delimited fields).
func forEachField(msg []byte, f func(num protowire.Number, typ protowire.Type, v []byte) error) error {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return protowire.ParseError(n)
		}
		msg = msg[n:]
		var v []byte
		if typ == protowire.BytesType {
			v, n = protowire.ConsumeBytes(msg)
		} else {
			n = protowire.ConsumeFieldValue(num, typ, msg)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		msg = msg[n:]
		if err := f(num, typ, v); err != nil {
			return err
		}
	}
	return nil
}

// floatCount is the number of floats of a FloatList message.
func floatCount(list []byte) (int, error) {
	n := 0
	err := forEachListValue(list, protowire.Fixed32Type, func(v []byte) error {
		n += len(v) / 4
		return nil
	})
	return n, err
}

// decodeFloats appends a FloatList's values (packed or not) to out.
func decodeFloats(list []byte, out []float32) ([]float32, error) {
	err := forEachListValue(list, protowire.Fixed32Type, func(v []byte) error {
		if len(v)%4 != 0 {
			return errors.New("packed floats of a length not a multiple of 4")
		}
		for len(v) > 0 {
			u, _ := protowire.ConsumeFixed32(v)
			out = append(out, math.Float32frombits(u))
			v = v[4:]
		}
		return nil
	})
	return out, err
}

// decodeInts appends an Int64List's values (packed or not) to out, as their two's complement.
func decodeInts(list []byte, out []uint64) ([]uint64, error) {
	err := forEachListValue(list, protowire.VarintType, func(v []byte) error {
		for len(v) > 0 {
			x, n := protowire.ConsumeVarint(v)
			if n < 0 {
				return protowire.ParseError(n)
			}
			out = append(out, x)
			v = v[n:]
		}
		return nil
	})
	return out, err
}

// forEachListValue calls f with the raw bytes of a list's field 1 in either encoding: packed (one
// length-delimited run) or one field per value (v then holds that value's encoding alone).
func forEachListValue(list []byte, scalar protowire.Type, f func(v []byte) error) error {
	for len(list) > 0 {
		num, typ, n := protowire.ConsumeTag(list)
		if n < 0 {
			return protowire.ParseError(n)
		}
		list = list[n:]
		if num == tfListValue && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(list)
			if n < 0 {
				return protowire.ParseError(n)
			}
			if err := f(v); err != nil {
				return err
			}
			list = list[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, list)
		if n < 0 {
			return protowire.ParseError(n)
		}
		if num == tfListValue && typ == scalar {
			if err := f(list[:n]); err != nil {
				return err
			}
		} else if num == tfListValue {
			return fmt.Errorf("list value of wire type %d", typ)
		}
		list = list[n:]
	}
	return nil
}

// SchemaInputs are the inputs of a Schema's Monolith Examples as Schema.Append reads them: the
// label 0 or 1, every dense feature required, the sparse features' fids taken with their own
// slots, a missing sparse feature no ids.
func SchemaInputs(s Schema) Inputs {
	in := Inputs{Format: Monolith}
	for _, name := range s.Sparse {
		in.Sparse = append(in.Sparse, SparseInput{Name: name, Source: name, Slot: AnySlot, Optional: true})
	}
	for _, d := range s.Dense {
		in.Dense = append(in.Dense, DenseInput{Name: d.Name, Source: d.Name, Dim: d.Dim})
	}
	return in
}

// Describe words inputs for a progress line: "label <- rating, 2 sparse (user_id slot 1, ...)".
func (in Inputs) Describe() string {
	var parts []string
	for _, s := range in.Sparse {
		parts = append(parts, fmt.Sprintf("%s (slot %d)", s.Name, s.Slot))
	}
	for _, f := range in.Dense {
		parts = append(parts, fmt.Sprintf("%s (dense, dim %d)", f.Name, f.Dim))
	}
	return strings.Join(parts, ", ")
}
