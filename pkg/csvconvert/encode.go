package csvconvert

import (
	"math"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/monolith-go/monolith/pkg/trainer/batch"
)

// The records are appended as wire bytes (protowire) rather than built as messages and marshalled:
// converting is then a few appends per value, with no allocation per row. The tests decode them
// with the generated messages and with batch.Decoder.

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

// encoder appends a row's record.
type encoder struct {
	format batch.Format
	feats  []Feature
	// keys holds each feature's name field, ready to append: the map entry's key of a
	// tf.train.Example, the NamedFeature's name of a Monolith Example.
	keys     [][]byte
	labelKey []byte
	// Per feature of the row being encoded: its list's payload and list message lengths.
	payload, list []int
}

func newEncoder(format batch.Format, plan *Plan) *encoder {
	e := &encoder{format: format, feats: plan.Features}
	nameField := func(num protowire.Number, name string) []byte {
		b := protowire.AppendTag(nil, num, protowire.BytesType)
		return protowire.AppendString(b, name)
	}
	for _, f := range plan.Features {
		if format == batch.Monolith {
			e.keys = append(e.keys, nameField(monoNFName, f.Source))
		} else {
			e.keys = append(e.keys, nameField(tfEntryKey, f.Source))
		}
	}
	e.labelKey = nameField(tfEntryKey, plan.LabelSource)
	e.payload, e.list = make([]int, len(plan.Features)), make([]int, len(plan.Features))
	return e
}

// append appends r's record to dst.
func (e *encoder) append(dst []byte, r *row) []byte {
	if e.format == batch.Monolith {
		return e.appendMonolith(dst, r)
	}
	return e.appendTF(dst, r)
}

// packedLen is the length of a list message holding one packed field of n payload bytes.
func packedLen(n int) int { return 1 + protowire.SizeVarint(uint64(n)) + n }

// bytesFieldLen is the length of a length-delimited field (tag of a number below 16) of n bytes.
func bytesFieldLen(n int) int { return 1 + protowire.SizeVarint(uint64(n)) + n }

// appendTF appends a tf.train.Example: the label as a float_list of one value, then each present
// feature (int64_list, bytes_list or float_list).
func (e *encoder) appendTF(dst []byte, r *row) []byte {
	// Lengths first, innermost out, so that each message's length prefix can be written before it.
	labelFeature := bytesFieldLen(packedLen(4)) // Feature{float_list: FloatList{value: [label]}}
	labelEntry := len(e.labelKey) + bytesFieldLen(labelFeature)
	features := bytesFieldLen(labelEntry)
	for i, f := range e.feats {
		if !r.present[i] {
			continue
		}
		n := 0
		switch f.Kind {
		case SparseInt:
			for _, id := range r.ids[r.start[i]:r.end[i]] {
				n += protowire.SizeVarint(id)
			}
			e.list[i] = packedLen(n)
		case SparseString:
			for _, s := range r.strs[r.start[i]:r.end[i]] {
				n += bytesFieldLen(len(s))
			}
			e.list[i] = n
		case Dense:
			n = 4 * (r.end[i] - r.start[i])
			e.list[i] = packedLen(n)
		}
		e.payload[i] = n
		entry := len(e.keys[i]) + bytesFieldLen(bytesFieldLen(e.list[i]))
		features += bytesFieldLen(entry)
	}

	dst = protowire.AppendTag(dst, tfExampleFeatures, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(features))

	dst = appendEntryHead(dst, e.labelKey, labelFeature)
	dst = protowire.AppendTag(dst, tfFloatList, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(packedLen(4)))
	dst = appendPackedHead(dst, 4)
	dst = protowire.AppendFixed32(dst, math.Float32bits(r.label))

	for i, f := range e.feats {
		if !r.present[i] {
			continue
		}
		dst = appendEntryHead(dst, e.keys[i], bytesFieldLen(e.list[i]))
		switch f.Kind {
		case SparseInt:
			dst = protowire.AppendTag(dst, tfInt64List, protowire.BytesType)
			dst = protowire.AppendVarint(dst, uint64(e.list[i]))
			dst = appendPackedHead(dst, e.payload[i])
			for _, id := range r.ids[r.start[i]:r.end[i]] {
				dst = protowire.AppendVarint(dst, id)
			}
		case SparseString:
			dst = protowire.AppendTag(dst, tfBytesList, protowire.BytesType)
			dst = protowire.AppendVarint(dst, uint64(e.list[i]))
			for _, s := range r.strs[r.start[i]:r.end[i]] {
				dst = protowire.AppendTag(dst, listValue, protowire.BytesType)
				dst = protowire.AppendString(dst, s)
			}
		case Dense:
			dst = protowire.AppendTag(dst, tfFloatList, protowire.BytesType)
			dst = protowire.AppendVarint(dst, uint64(e.list[i]))
			dst = appendFloats(dst, r.floats[r.start[i]:r.end[i]])
		}
	}
	return dst
}

// appendEntryHead appends a Features map entry's head: the entry's tag and length, its key, and
// the tag and length of its Feature value (feature bytes long).
func appendEntryHead(dst, key []byte, feature int) []byte {
	entry := len(key) + bytesFieldLen(feature)
	dst = protowire.AppendTag(dst, tfFeaturesFeature, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(entry))
	dst = append(dst, key...)
	dst = protowire.AppendTag(dst, tfEntryValue, protowire.BytesType)
	return protowire.AppendVarint(dst, uint64(feature))
}

// appendPackedHead appends the head of a list's packed value field of n bytes.
func appendPackedHead(dst []byte, n int) []byte {
	dst = protowire.AppendTag(dst, listValue, protowire.BytesType)
	return protowire.AppendVarint(dst, uint64(n))
}

// appendFloats appends a packed FloatList's value field.
func appendFloats(dst []byte, vals []float32) []byte {
	dst = appendPackedHead(dst, 4*len(vals))
	for _, v := range vals {
		dst = protowire.AppendFixed32(dst, math.Float32bits(v))
	}
	return dst
}

// appendMonolith appends a Monolith Example: each present feature as a NamedFeature (fid_v2_list
// or float_list), then the label field.
func (e *encoder) appendMonolith(dst []byte, r *row) []byte {
	for i, f := range e.feats {
		if !r.present[i] {
			continue
		}
		var kind protowire.Number
		var payload int
		if f.Kind == Dense {
			kind, payload = monoFloatList, 4*(r.end[i]-r.start[i])
		} else {
			kind, payload = monoFidV2List, 8*(r.end[i]-r.start[i])
		}
		feature := bytesFieldLen(packedLen(payload))
		named := len(e.keys[i]) + bytesFieldLen(feature)
		dst = protowire.AppendTag(dst, monoNamedFeature, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(named))
		dst = append(dst, e.keys[i]...)
		dst = protowire.AppendTag(dst, monoNFFeature, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(feature))
		dst = protowire.AppendTag(dst, kind, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(packedLen(payload)))
		if f.Kind == Dense {
			dst = appendFloats(dst, r.floats[r.start[i]:r.end[i]])
			continue
		}
		dst = appendPackedHead(dst, payload)
		for _, fid := range r.ids[r.start[i]:r.end[i]] {
			dst = protowire.AppendFixed64(dst, fid)
		}
	}
	dst = protowire.AppendTag(dst, monoLabel, protowire.BytesType)
	dst = protowire.AppendVarint(dst, 4)
	return protowire.AppendFixed32(dst, math.Float32bits(r.label))
}
