package csvconvert

import (
	"encoding/binary"
	"math"
	"math/bits"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/monolith-go/monolith/pkg/trainer/batch"
)

// A row is converted in one pass over its cells: each value is parsed and its wire bytes put
// straight into the record, with no message built and marshalled and no row of parsed values in
// between, so that converting allocates nothing and costs about what reading the CSV costs.
//
// A record's nested messages need their lengths before their bytes. Each feature's field starts
// as a template made once (its name, tags, and one-byte lengths left 0), its values follow, and
// the lengths are patched in once the values are there; a field of 128 bytes or more (lengths of
// several bytes: a long list) is laid out again (relayout). A tf.train.Example's one outer field
// (Features) gets its length last, in room kept before the features. A dense feature's field is
// of a fixed length (dim values), so its template is complete. The tests decode the records with
// the generated messages and with batch.Decoder.

// Field numbers of tf.train.Example (tensorflow/core/example/{example,feature}.proto).
const (
	tfExampleFeatures = 1 // Example.features
	tfFeaturesFeature = 1 // Features.feature, map<string, Feature>: entries of key 1, value 2
	tfEntryKey        = 1
	tfEntryValue      = 2
	tfBytesList       = 1 // Feature.bytes_list
	tfFloatList       = 2 // Feature.float_list
	tfInt64List       = 3 // Feature.int64_list
	listValue         = 1 // {Bytes,Float,Int64,Fid}List.value
)

// Field numbers of Monolith's Example (idl/matrix/proto/example.proto).
const (
	monoNamedFeature = 1   // Example.named_feature
	monoLabel        = 101 // Example.label, packed floats
	monoNFName       = 1   // NamedFeature.name
	monoNFFeature    = 2   // NamedFeature.feature
	monoFidV2List    = 2   // Feature.fid_v2_list (FidList: packed fixed64)
	monoFloatList    = 3   // Feature.float_list
)

// tag is the one-byte tag of a length-delimited field numbered below 16.
func tag(num protowire.Number) byte { return byte(num)<<3 | byte(protowire.BytesType) }

// sizeVarint is the length of v as a varint.
func sizeVarint(v uint64) int { return int(9*uint32(bits.Len64(v))+64) / 64 }

// fieldLen is the length of a length-delimited field (one-byte tag) of n bytes.
func fieldLen(n int) int {
	if n < 0x80 {
		return n + 2 // a one-byte length: nearly every field of a record
	}
	return 1 + sizeVarint(uint64(n)) + n
}

// encoder converts rows into records.
type encoder struct {
	plan     *Plan
	monolith bool
	feats    []encFeature
	// labelHead is the label's field up to its value: a map entry of a float_list of one value,
	// or Monolith's label field (packed floats, 4 bytes).
	labelHead words32
	// goodLabels are raw labels the rule accepted: labels take few values (0 and 1, ratings),
	// so the rule runs for each value once rather than for each row.
	goodLabels []float32
	// buf holds the record being made; scratch a field's head being laid out again.
	buf, scratch []byte
}

// maxGoodLabels bounds goodLabels.
const maxGoodLabels = 8

// encFeature is a feature as the encoder reads and writes it.
type encFeature struct {
	name     string
	kind     Kind
	optional bool
	slot     int
	dim      int
	// sep is the cell separator; sepByte is it when it is one byte, else -1 (no fast path).
	sep     string
	sepByte int
	// oneNumber: a cell that parses as one number holds no separator (it is a byte no number
	// holds), so a dense feature of dim 1 need not look for it.
	oneNumber bool
	// head is the field's bytes before the values: all of them for a dense feature, the
	// template for a sparse one (lengths 0).
	head words32
	// A sparse feature's field, for patching and relayout: key is its name's field (a map
	// entry's key, a NamedFeature's name), listTag the tag of its list in the Feature, packed
	// whether the list holds one packed field (ids, fids) or a field per value (strings).
	key     []byte
	listTag byte
	packed  bool
}

func newEncoder(format batch.Format, plan *Plan) *encoder {
	e := &encoder{plan: plan, monolith: format == batch.Monolith}
	for _, f := range plan.Features {
		ef := encFeature{name: f.Name, kind: f.Kind, optional: f.Optional, slot: f.Slot, dim: f.Dim, sep: f.Separator, sepByte: -1}
		if len(f.Separator) == 1 {
			c := f.Separator[0]
			ef.sepByte = int(c)
			ef.oneNumber = c > ' ' && c < 0x80 && !isAlnum(c) && c != '.' && c != '+' && c != '-' && c != '_'
		}
		switch {
		case f.Kind == Dense && e.monolith:
			ef.head = newWords32(monoFloatHead(f.Source, f.Dim))
		case f.Kind == Dense:
			ef.head = newWords32(tfFloatHead(f.Source, f.Dim))
		default:
			keyNum, listNum, packed := protowire.Number(tfEntryKey), protowire.Number(tfInt64List), f.Kind == SparseInt
			if e.monolith {
				keyNum, listNum, packed = monoNFName, monoFidV2List, true
			} else if f.Kind == SparseString {
				listNum = tfBytesList
			}
			ef.key = protowire.AppendString([]byte{tag(keyNum)}, f.Source)
			ef.listTag, ef.packed = tag(listNum), packed
			// Entry (or NamedFeature) tag and length, key, value tag and length, list tag and
			// length, and for a packed list its field's tag and length: tfEntryValue and
			// monoNFFeature are both 2, tfFeaturesFeature and monoNamedFeature both 1.
			t := append([]byte{tag(tfFeaturesFeature), 0}, ef.key...)
			t = append(t, tag(tfEntryValue), 0, ef.listTag, 0)
			if packed {
				t = append(t, tag(listValue), 0)
			}
			ef.head = newWords32(t)
		}
		e.feats = append(e.feats, ef)
	}
	if e.monolith {
		e.labelHead = newWords32(protowire.AppendVarint(protowire.AppendTag(nil, monoLabel, protowire.BytesType), 4))
	} else {
		e.labelHead = newWords32(tfFloatHead(plan.LabelSource, 1))
	}
	return e
}

func isAlnum(c byte) bool { return c >= '0' && c <= '9' || c|0x20 >= 'a' && c|0x20 <= 'z' }

// tfFloatHead is a Features map entry of a float_list of dim values, up to the values.
func tfFloatHead(key string, dim int) []byte {
	list := fieldLen(4 * dim)
	feature := fieldLen(list)
	entry := fieldLen(len(key)) + fieldLen(feature)
	b := []byte{tag(tfFeaturesFeature)}
	b = protowire.AppendVarint(b, uint64(entry))
	b = append(b, tag(tfEntryKey))
	b = protowire.AppendString(b, key)
	b = append(b, tag(tfEntryValue))
	b = protowire.AppendVarint(b, uint64(feature))
	b = append(b, tag(tfFloatList))
	b = protowire.AppendVarint(b, uint64(list))
	b = append(b, tag(listValue))
	return protowire.AppendVarint(b, uint64(4*dim))
}

// monoFloatHead is a NamedFeature of a float_list of dim values, up to the values.
func monoFloatHead(name string, dim int) []byte {
	list := fieldLen(4 * dim)
	feature := fieldLen(list)
	named := fieldLen(len(name)) + fieldLen(feature)
	b := []byte{tag(monoNamedFeature)}
	b = protowire.AppendVarint(b, uint64(named))
	b = append(b, tag(monoNFName))
	b = protowire.AppendString(b, name)
	b = append(b, tag(monoNFFeature))
	b = protowire.AppendVarint(b, uint64(feature))
	b = append(b, tag(monoFloatList))
	b = protowire.AppendVarint(b, uint64(list))
	b = append(b, tag(listValue))
	return protowire.AppendVarint(b, uint64(4*dim))
}

// words32 is up to 32 bytes as four little-endian words, zero-padded, and their length; ok is
// false for longer bytes (b keeps them all).
type words32 struct {
	w  [4]uint64
	n  int
	ok bool
	b  []byte
}

func newWords32(b []byte) words32 {
	w := words32{n: len(b), ok: len(b) <= 32, b: b}
	if w.ok {
		var pad [32]byte
		copy(pad[:], b)
		for k := range w.w {
			w.w[k] = binary.LittleEndian.Uint64(pad[8*k:])
		}
	}
	return w
}

// slack is the room kept past what a field puts: put32 stores up to 31 bytes past its bytes
// (overwritten by what follows), a relayout lengthens a head by up to 16.
const slack = 48

// put32 stores w's bytes at b[pos:] and returns the position after them: four 8-byte stores
// rather than a copy.
func put32(b []byte, pos int, w *words32) int {
	if !w.ok {
		return pos + copy(b[pos:], w.b)
	}
	b = b[pos : pos+32]
	binary.LittleEndian.PutUint64(b, w.w[0])
	binary.LittleEndian.PutUint64(b[8:], w.w[1])
	binary.LittleEndian.PutUint64(b[16:], w.w[2])
	binary.LittleEndian.PutUint64(b[24:], w.w[3])
	return pos + w.n
}

// putVarint stores v as a varint at b[pos:] and returns the position after it.
func putVarint(b []byte, pos int, v uint64) int {
	for v >= 0x80 {
		b[pos] = byte(v) | 0x80
		v >>= 7
		pos++
	}
	b[pos] = byte(v)
	return pos + 1
}

func putFloat(b []byte, pos int, v float32) int {
	binary.LittleEndian.PutUint32(b[pos:pos+4], math.Float32bits(v))
	return pos + 4
}

func putFixed64(b []byte, pos int, v uint64) int {
	binary.LittleEndian.PutUint64(b[pos:pos+8], v)
	return pos + 8
}

// maxFieldLen bounds the bytes a feature's field of cell puts: its head, and at most 10 bytes
// per byte of the cell (an id of one digit and its separator become at most 10 bytes; fids,
// floats and strings fewer).
func maxFieldLen(f *encFeature, cell string) int { return f.head.n + 10*(len(cell)+1) + slack }

// encode converts rec (the label in column labelCol, feature i in column cols[i]) into a record,
// which stays valid until the next call. A bad cell is returned with its feature's index (-1: the
// label) and why.
func (e *encoder) encode(rec []string, labelCol int, cols []int) ([]byte, int, *cellError) {
	label, cerr := e.label(rec[labelCol])
	if cerr != nil {
		return nil, -1, cerr
	}
	// A tf.train.Example is one field (Features) whose length goes before it: room for its tag
	// and a length of up to 5 bytes is kept first.
	const outer = 6
	b := e.buf[:cap(e.buf)]
	if len(b) < outer+slack+e.labelHead.n+4 {
		b = make([]byte, 4096)
	}
	pos := outer
	if !e.monolith {
		pos = put32(b, pos, &e.labelHead)
		pos = putFloat(b, pos, label)
	}
	for i := range e.feats {
		f, cell := &e.feats[i], rec[cols[i]]
		if need := pos + maxFieldLen(f, cell); need > len(b) {
			b = growTo(b, pos, need)
		}
		switch f.kind {
		case Dense:
			if f.dim == 1 && f.oneNumber {
				// One value, the common dense cell: here rather than in a call.
				if v, ok := parseFloat32(cell); ok {
					pos = putFloat(b, put32(b, pos, &f.head), v)
					continue
				}
			}
			pos, cerr = e.putDense(b, pos, f, cell)
		case SparseInt:
			pos, cerr = e.putIDs(b, pos, f, cell)
		default:
			pos, cerr = e.putStrings(b, pos, f, cell)
		}
		if cerr != nil {
			e.buf = b
			return nil, i, cerr
		}
	}
	e.buf = b
	if e.monolith {
		if pos+slack+e.labelHead.n+4 > len(b) {
			b = growTo(b, pos, pos+slack+e.labelHead.n+4)
			e.buf = b
		}
		pos = put32(b, pos, &e.labelHead)
		pos = putFloat(b, pos, label)
		return b[outer:pos], 0, nil
	}
	n := pos - outer
	h := outer - 1 - sizeVarint(uint64(n))
	b[h] = tag(tfExampleFeatures)
	putVarint(b, h+1, uint64(n))
	return b[h:pos], 0, nil
}

// growTo returns b, of its first pos bytes, grown to at least need bytes.
func growTo(b []byte, pos, need int) []byte {
	nb := make([]byte, max(2*len(b), need))
	copy(nb, b[:pos])
	return nb
}

// label parses the label cell: a number the plan's rule accepts, kept raw.
func (e *encoder) label(cell string) (float32, *cellError) {
	raw, ok := parseFloat32(cell)
	if !ok {
		if isEmpty(cell) {
			return 0, badCell("the label is empty")
		}
		return 0, badCell("the label is not a finite number")
	}
	for _, g := range e.goodLabels {
		if raw == g {
			return raw, nil
		}
	}
	// The trainer reads the float32 written, so that is the value to check.
	if e.plan.LabelApply != nil {
		if _, err := e.plan.LabelApply(float64(raw)); err != nil {
			return 0, badCell("bad label: %v", err)
		}
	} else if raw != 0 && raw != 1 {
		return 0, badCell("the label is not 0 or 1")
	}
	if len(e.goodLabels) < maxGoodLabels {
		e.goodLabels = append(e.goodLabels, raw)
	}
	return raw, nil
}

// empty handles an empty cell: an optional feature is left out (nothing put: at stays the
// position), a required one is an error.
func empty(f *encFeature, at int) (int, *cellError) {
	if f.optional {
		return at, nil
	}
	return at, badCell("the cell of required feature %q is empty", f.name)
}

// putDense puts a dense feature's field: its complete head, then dim floats.
func (e *encoder) putDense(b []byte, pos int, f *encFeature, cell string) (int, *cellError) {
	at := pos
	pos = put32(b, pos, &f.head)
	if f.dim == 1 && f.oneNumber {
		if v, ok := parseFloat32(cell); ok {
			return putFloat(b, pos, v), nil
		}
	}
	if isEmpty(cell) {
		return empty(f, at)
	}
	n := 0
	for rest, more := cell, true; more; {
		var item string
		item, rest, more = nextItem(rest, f.sep)
		v, ok := parseFloat32(item)
		if !ok {
			return at, badFloat(item, f.sep)
		}
		if n < f.dim {
			pos = putFloat(b, pos, v)
		}
		n++
	}
	if n != f.dim {
		return at, badCell("feature %q has %d values, the schema's dim is %d", f.name, n, f.dim)
	}
	return pos, nil
}

// putIDs puts a sparse_int feature's field: int64_list varints, or Monolith fids. Ids of up to
// 18 digits split by a one-byte separator, the common case, are read here; any other cell by
// putIDsSlow.
func (e *encoder) putIDs(b []byte, pos int, f *encFeature, cell string) (int, *cellError) {
	at := pos
	pos = put32(b, pos, &f.head)
	values := pos
	for j := 0; ; {
		id, n := scanDigits(cell[j:])
		if n == 0 || n > 18 {
			return e.putIDsSlow(b, at, f, cell)
		}
		if e.monolith {
			pos = putFixed64(b, pos, batch.FID(f.slot, id))
		} else {
			pos = putVarint(b, pos, id)
		}
		j += n
		if j == len(cell) {
			break
		}
		if int(cell[j]) != f.sepByte {
			return e.putIDsSlow(b, at, f, cell)
		}
		j++
	}
	// closeSparse's patch of a packed list, here rather than in a call.
	p, k := pos-values, len(f.key)
	if entry := k + p + 6; entry < 0x80 {
		h := b[at : at+k+8]
		h[1] = byte(entry)
		h[k+3] = byte(p + 4)
		h[k+5] = byte(p + 2)
		h[k+7] = byte(p)
		return pos, nil
	}
	return e.relayout(b, at, values, pos, f), nil
}

// putIDsSlow is putIDs for any cell: spaces around the ids, signs, a separator of several bytes.
func (e *encoder) putIDsSlow(b []byte, at int, f *encFeature, cell string) (int, *cellError) {
	if isEmpty(cell) {
		return empty(f, at)
	}
	pos := put32(b, at, &f.head)
	values := pos
	for rest, more := cell, true; more; {
		var item string
		item, rest, more = nextItem(rest, f.sep)
		s := trimSpace(item)
		if s == "" {
			return at, badCell("an empty item in a list separated by %q", f.sep)
		}
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return at, badCell("%q is not an integer id", item)
		}
		if e.monolith {
			pos = putFixed64(b, pos, batch.FID(f.slot, uint64(id)))
		} else {
			pos = putVarint(b, pos, uint64(id))
		}
	}
	return e.closeSparse(b, at, values, pos, f), nil
}

// putStrings puts a sparse_string feature's field: the trimmed strings as a bytes_list, or for a
// Monolith Example their hashed fids.
func (e *encoder) putStrings(b []byte, pos int, f *encFeature, cell string) (int, *cellError) {
	if isEmpty(cell) {
		return empty(f, pos)
	}
	at := pos
	pos = put32(b, pos, &f.head)
	values := pos
	for rest, more := cell, true; more; {
		var item string
		item, rest, more = nextItem(rest, f.sep)
		if item = trimSpace(item); item == "" {
			return at, badCell("an empty item in a list separated by %q", f.sep)
		}
		if e.monolith {
			pos = putFixed64(b, pos, batch.FID(f.slot, e.plan.Hash(item)))
			continue
		}
		b[pos] = tag(listValue)
		pos = putVarint(b, pos+1, uint64(len(item)))
		pos += copy(b[pos:], item)
	}
	return e.closeSparse(b, at, values, pos, f), nil
}

// closeSparse completes the sparse field starting at at whose values are b[values:pos]: its
// template's lengths patched, or laid out again when they do not fit one byte each. It returns
// the position after the field.
func (e *encoder) closeSparse(b []byte, at, values, pos int, f *encFeature) int {
	p, k := pos-values, len(f.key)
	if f.packed {
		// list: packed field (2 + p); feature: list field (2 + list); entry: key + feature field.
		if entry := k + p + 6; entry < 0x80 {
			h := b[at : at+k+8]
			h[1] = byte(entry)
			h[k+3] = byte(p + 4)
			h[k+5] = byte(p + 2)
			h[k+7] = byte(p)
			return pos
		}
	} else if entry := k + p + 4; entry < 0x80 {
		h := b[at : at+k+6]
		h[1] = byte(entry)
		h[k+3] = byte(p + 2)
		h[k+5] = byte(p)
		return pos
	}
	return e.relayout(b, at, values, pos, f)
}

// relayout lays out again a sparse field whose lengths take more than a byte: its head is made
// with full varints and its values moved after it. (b has slack bytes past pos.)
func (e *encoder) relayout(b []byte, at, values, pos int, f *encFeature) int {
	p := pos - values
	list := p
	if f.packed {
		list = fieldLen(p)
	}
	feature := fieldLen(list)
	h := append(e.scratch[:0], tag(tfFeaturesFeature))
	h = protowire.AppendVarint(h, uint64(len(f.key)+fieldLen(feature)))
	h = append(h, f.key...)
	h = append(h, tag(tfEntryValue))
	h = protowire.AppendVarint(h, uint64(feature))
	h = append(h, f.listTag)
	h = protowire.AppendVarint(h, uint64(list))
	if f.packed {
		h = append(h, tag(listValue))
		h = protowire.AppendVarint(h, uint64(p))
	}
	e.scratch = h
	shift := len(h) - (values - at)
	copy(b[values+shift:], b[values:pos])
	copy(b[at:], h)
	return pos + shift
}
