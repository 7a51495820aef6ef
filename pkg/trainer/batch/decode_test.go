package batch

import (
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	examplepb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/example"
	tfexamplepb "github.com/monolith-go/monolith/gen/pb/tensorflow/core/example"
)

func fnvHash(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

// testInputs reads user (int ids, slot 1), genre (strings, slot 2, optional: no ids), price (2
// floats) and age (1 float, optional: 30).
func testInputs(f Format) Inputs {
	return Inputs{
		Format: f,
		Label:  LabelInput{Source: "clicked"},
		Sparse: []SparseInput{
			{Name: "user", Source: "user_id", Slot: 1},
			{Name: "genre", Source: "genre", Slot: 2, Hash: fnvHash, Optional: true},
		},
		Dense: []DenseInput{
			{Name: "price", Source: "price", Dim: 2},
			{Name: "age", Source: "age", Dim: 1, Optional: true, Default: []float32{30}},
		},
	}
}

// tf builds a tf.train.Example.
type tf map[string]*tfexamplepb.Feature

func tfInts(v ...int64) *tfexamplepb.Feature {
	return &tfexamplepb.Feature{Kind: &tfexamplepb.Feature_Int64List{Int64List: &tfexamplepb.Int64List{Value: v}}}
}

func tfFloats(v ...float32) *tfexamplepb.Feature {
	return &tfexamplepb.Feature{Kind: &tfexamplepb.Feature_FloatList{FloatList: &tfexamplepb.FloatList{Value: v}}}
}

func tfBytes(v ...string) *tfexamplepb.Feature {
	var bs [][]byte
	for _, s := range v {
		bs = append(bs, []byte(s))
	}
	return &tfexamplepb.Feature{Kind: &tfexamplepb.Feature_BytesList{BytesList: &tfexamplepb.BytesList{Value: bs}}}
}

func (m tf) bytes(t *testing.T) []byte {
	t.Helper()
	b, err := proto.Marshal(&tfexamplepb.Example{Features: &tfexamplepb.Features{Feature: m}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// mono builds a Monolith Example.
func mono(t *testing.T, label []float32, feats ...*examplepb.NamedFeature) []byte {
	t.Helper()
	b, err := proto.Marshal(&examplepb.Example{Label: label, NamedFeature: feats})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func nf(name string, f *examplepb.Feature) *examplepb.NamedFeature {
	return &examplepb.NamedFeature{Name: name, Feature: f}
}

func fidV2(v ...uint64) *examplepb.Feature {
	return &examplepb.Feature{Type: &examplepb.Feature_FidV2List{FidV2List: &examplepb.FidList{Value: v}}}
}

func fidV1(v ...uint64) *examplepb.Feature {
	return &examplepb.Feature{Type: &examplepb.Feature_FidV1List{FidV1List: &examplepb.FidList{Value: v}}}
}

func monoFloats(v ...float32) *examplepb.Feature {
	return &examplepb.Feature{Type: &examplepb.Feature_FloatList{FloatList: &examplepb.FloatList{Value: v}}}
}

func strs(v ...string) *examplepb.Feature {
	var bs [][]byte
	for _, s := range v {
		bs = append(bs, []byte(s))
	}
	return &examplepb.Feature{Type: &examplepb.Feature_BytesList{BytesList: &examplepb.BytesList{Value: bs}}}
}

func TestDecodeTFExample(t *testing.T) {
	h := fnvHash([]byte("drama"))
	cases := []struct {
		name       string
		rec        tf
		wantLabel  float32
		wantFids   []uint64
		wantDense  []float32
		wantErr    string
		labelApply func(float64) (float32, error)
	}{
		{name: "all", rec: tf{"clicked": tfInts(1), "user_id": tfInts(7, 8), "genre": tfBytes("drama"), "price": tfFloats(1.5, 2), "age": tfFloats(41), "other": tfInts(3)},
			wantLabel: 1, wantFids: []uint64{FID(1, 7), FID(1, 8), FID(2, h)}, wantDense: []float32{1.5, 2, 41}},
		{name: "optional defaults", rec: tf{"clicked": tfFloats(0), "user_id": tfInts(7), "price": tfFloats(1, 2)},
			wantLabel: 0, wantFids: []uint64{FID(1, 7)}, wantDense: []float32{1, 2, 30}},
		{name: "int dense", rec: tf{"clicked": tfInts(0), "user_id": tfInts(-1), "price": tfInts(3, 4)},
			wantFids: []uint64{FID(1, math.MaxUint64)}, wantDense: []float32{3, 4, 30}},
		{name: "threshold label", rec: tf{"clicked": tfFloats(4), "user_id": tfInts(7), "price": tfFloats(1, 2)},
			labelApply: func(v float64) (float32, error) {
				if v >= 4 {
					return 1, nil
				}
				return 0, nil
			}, wantLabel: 1, wantFids: []uint64{FID(1, 7)}, wantDense: []float32{1, 2, 30}},
		{name: "label not 0/1", rec: tf{"clicked": tfFloats(4), "user_id": tfInts(7), "price": tfFloats(1, 2)}, wantErr: "label 4 is not 0 or 1"},
		{name: "label missing", rec: tf{"user_id": tfInts(7), "price": tfFloats(1, 2)}, wantErr: `the label feature "clicked" is missing`},
		{name: "two labels", rec: tf{"clicked": tfFloats(1, 0), "user_id": tfInts(7), "price": tfFloats(1, 2)}, wantErr: `label feature "clicked" has 2 values, want 1`},
		{name: "label bytes", rec: tf{"clicked": tfBytes("yes"), "user_id": tfInts(7), "price": tfFloats(1, 2)}, wantErr: "holds bytes_list, want float_list or int64_list"},
		{name: "required sparse missing", rec: tf{"clicked": tfInts(1), "price": tfFloats(1, 2)}, wantErr: `feature "user" (source "user_id") is missing`},
		{name: "required dense missing", rec: tf{"clicked": tfInts(1), "user_id": tfInts(7)}, wantErr: `feature "price" (source "price") is missing`},
		{name: "ids as strings", rec: tf{"clicked": tfInts(1), "user_id": tfBytes("u7"), "price": tfFloats(1, 2)}, wantErr: "declare it sparse_string"},
		{name: "ids as floats", rec: tf{"clicked": tfInts(1), "user_id": tfFloats(7), "price": tfFloats(1, 2)}, wantErr: `feature "user" holds float_list, want int64_list or bytes_list`},
		{name: "dense length", rec: tf{"clicked": tfInts(1), "user_id": tfInts(7), "price": tfFloats(1)}, wantErr: `feature "price" has 1 values, want 2`},
		{name: "dense NaN", rec: tf{"clicked": tfInts(1), "user_id": tfInts(7), "price": tfFloats(1, float32(math.NaN()))}, wantErr: `feature "price": value 1 is NaN`},
		{name: "dense Inf", rec: tf{"clicked": tfInts(1), "user_id": tfInts(7), "price": tfFloats(float32(math.Inf(-1)), 1)}, wantErr: `value 0 is -Inf`},
		{name: "dense bytes", rec: tf{"clicked": tfInts(1), "user_id": tfInts(7), "price": tfBytes("a", "b")}, wantErr: "holds bytes_list, want float_list"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := testInputs(TFExample)
			in.Label.Apply = c.labelApply
			d, err := NewDecoder(in)
			if err != nil {
				t.Fatal(err)
			}
			b := &Batch{}
			err = d.Append(b, c.rec.bytes(t))
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want one with %q", err, c.wantErr)
				}
				if b.Size() != 0 || len(b.Dense) != 0 || len(b.Fids) != 0 {
					t.Fatalf("a failed append left the batch %+v", b)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if b.Size() != 1 || b.Labels[0] != c.wantLabel || !slices.Equal(b.Fids[0], c.wantFids) || !slices.Equal(b.Dense, c.wantDense) || b.DenseDim != 3 {
				t.Fatalf("batch %+v, want label %v fids %v dense %v", b, c.wantLabel, c.wantFids, c.wantDense)
			}
		})
	}
}

func TestDecodeMonolith(t *testing.T) {
	h := fnvHash([]byte("drama"))
	v1 := uint64(1)<<54 | 1<<50 | 9 // slot 1, an id wider than 48 bits
	cases := []struct {
		name      string
		rec       []byte
		wantFids  []uint64
		wantDense []float32
		wantErr   string
	}{
		{name: "fid_v2", rec: mono(t, []float32{1}, nf("user_id", fidV2(FID(1, 5))), nf("genre", strs("drama")), nf("price", monoFloats(1, 2))),
			wantFids: []uint64{FID(1, 5), FID(2, h)}, wantDense: []float32{1, 2, 30}},
		{name: "fid_v1 converted", rec: mono(t, []float32{0}, nf("user_id", fidV1(v1)), nf("price", monoFloats(1, 2))),
			wantFids: []uint64{FID(1, 1<<50|9)}, wantDense: []float32{1, 2, 30}},
		{name: "fid_v2 of another slot", rec: mono(t, []float32{1}, nf("user_id", fidV2(FID(3, 5))), nf("price", monoFloats(1, 2))),
			wantErr: "has slot 3, the schema gives the feature slot 1"},
		{name: "fid_v1 of another slot", rec: mono(t, []float32{1}, nf("user_id", fidV1(4<<54|5)), nf("price", monoFloats(1, 2))),
			wantErr: "fid_v1 72057594037927941 has slot 4"},
		{name: "no label", rec: mono(t, nil, nf("user_id", fidV2(FID(1, 5))), nf("price", monoFloats(1, 2))), wantErr: "the example has no label"},
		{name: "label 3", rec: mono(t, []float32{3}, nf("user_id", fidV2(FID(1, 5))), nf("price", monoFloats(1, 2))), wantErr: "label 3 is not 0 or 1"},
		{name: "missing", rec: mono(t, []float32{1}, nf("price", monoFloats(1, 2))), wantErr: `feature "user" (source "user_id") is missing`},
		{name: "dense NaN", rec: mono(t, []float32{1}, nf("user_id", fidV2(FID(1, 5))), nf("price", monoFloats(float32(math.NaN()), 2))), wantErr: "is NaN"},
		{name: "garbage", rec: []byte{0xff, 0xff, 0xff}, wantErr: "not a Monolith Example"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := NewDecoder(testInputs(Monolith))
			if err != nil {
				t.Fatal(err)
			}
			b := &Batch{}
			err = d.Append(b, c.rec)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want one with %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(b.Fids[0], c.wantFids) || !slices.Equal(b.Dense, c.wantDense) {
				t.Fatalf("fids %v dense %v, want %v %v", b.Fids[0], b.Dense, c.wantFids, c.wantDense)
			}
		})
	}
}

// TestDecodeFormatsAgree decodes the same example written as both kinds.
func TestDecodeFormatsAgree(t *testing.T) {
	dm, _ := NewDecoder(testInputs(Monolith))
	dt, _ := NewDecoder(testInputs(TFExample))
	bm, bt := &Batch{}, &Batch{}
	if err := dm.Append(bm, mono(t, []float32{1}, nf("user_id", fidV2(FID(1, 5), FID(1, 6))), nf("genre", strs("a", "b")), nf("price", monoFloats(1, 2)), nf("age", monoFloats(3)))); err != nil {
		t.Fatal(err)
	}
	if err := dt.Append(bt, tf{"clicked": tfFloats(1), "user_id": tfInts(5, 6), "genre": tfBytes("a", "b"), "price": tfFloats(1, 2), "age": tfFloats(3)}.bytes(t)); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(bm.Fids[0], bt.Fids[0]) || !slices.Equal(bm.Dense, bt.Dense) || !slices.Equal(bm.Labels, bt.Labels) {
		t.Fatalf("monolith %+v, tf_example %+v", bm, bt)
	}
}

// TestDecodeUnpackedLists reads lists written one field per value (proto2 writers do).
func TestDecodeUnpackedLists(t *testing.T) {
	list := func(typ protowire.Type, vals ...uint64) []byte {
		var b []byte
		for _, v := range vals {
			b = protowire.AppendTag(b, 1, typ)
			if typ == protowire.VarintType {
				b = protowire.AppendVarint(b, v)
			} else {
				b = protowire.AppendFixed32(b, uint32(v))
			}
		}
		return b
	}
	feature := func(kind protowire.Number, l []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, kind, protowire.BytesType), l)
	}
	entry := func(key string, f []byte) []byte {
		e := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), key)
		e = protowire.AppendBytes(protowire.AppendTag(e, 2, protowire.BytesType), f)
		return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), e)
	}
	var feats []byte
	feats = append(feats, entry("clicked", feature(tfInt64List, list(protowire.VarintType, 1)))...)
	feats = append(feats, entry("user_id", feature(tfInt64List, list(protowire.VarintType, 7, 8)))...)
	feats = append(feats, entry("price", feature(tfFloatList, list(protowire.Fixed32Type, uint64(math.Float32bits(1.5)), uint64(math.Float32bits(-2)))))...)
	rec := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), feats)
	d, _ := NewDecoder(testInputs(TFExample))
	b := &Batch{}
	if err := d.Append(b, rec); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(b.Fids[0], []uint64{FID(1, 7), FID(1, 8)}) || !slices.Equal(b.Dense, []float32{1.5, -2, 30}) || b.Labels[0] != 1 {
		t.Fatalf("batch %+v", b)
	}
}

func TestDecoderMissing(t *testing.T) {
	in := testInputs(TFExample)
	in.Sparse[0].Source = "userid" // misspelled: the data has user_id
	in.Sparse[0].Optional = true
	d, err := NewDecoder(in)
	if err != nil {
		t.Fatal(err)
	}
	b := &Batch{}
	if err := d.Append(b, tf{"clicked": tfInts(1), "user_id": tfInts(7), "price": tfFloats(1, 2)}.bytes(t)); err != nil {
		t.Fatal(err)
	}
	suggest := func(name string, cands []string) string {
		for _, c := range cands {
			if strings.ReplaceAll(c, "_", "") == name {
				return c
			}
		}
		return ""
	}
	got := d.Missing(suggest)
	want := []string{"userid (did you mean user_id?)", "genre", "age"}
	if !slices.Equal(got, want) {
		t.Fatalf("Missing = %q, want %q", got, want)
	}
	if d.Records() != 1 {
		t.Fatalf("Records = %d", d.Records())
	}
}

func TestNewDecoderErrors(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Inputs)
		want string
	}{
		{"format", func(in *Inputs) { in.Format = "csv" }, `unknown input format "csv"`},
		{"no features", func(in *Inputs) { in.Sparse, in.Dense = nil, nil }, "no features"},
		{"slot", func(in *Inputs) { in.Sparse[0].Slot = 1 << 15 }, "slot 32768 is not a v2 fid slot"},
		{"dim", func(in *Inputs) { in.Dense[0].Dim = 0 }, "dimension 0 is not positive"},
		{"default", func(in *Inputs) { in.Dense[1].Default = nil }, "default has 0 values, want 1"},
		{"same source", func(in *Inputs) { in.Dense[0].Source = "user_id" }, `features "user" and "price" read the same source "user_id"`},
		{"label source", func(in *Inputs) { in.Label.Source = "price" }, `read the same source "price"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := testInputs(TFExample)
			c.mod(&in)
			if _, err := NewDecoder(in); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
}

// TestDecodeMissingSuggests: a missing required feature's error lists the record's features and
// the nearest one.
func TestDecodeMissingSuggests(t *testing.T) {
	for _, f := range []Format{TFExample, Monolith} {
		in := testInputs(f)
		in.Sparse[0].Source = "userid"
		in.Suggest = func(name string, cands []string) string {
			for _, c := range cands {
				if strings.ReplaceAll(c, "_", "") == name {
					return c
				}
			}
			return ""
		}
		d, err := NewDecoder(in)
		if err != nil {
			t.Fatal(err)
		}
		rec := tf{"clicked": tfInts(1), "user_id": tfInts(7), "price": tfFloats(1, 2)}.bytes(t)
		if f == Monolith {
			rec = mono(t, []float32{1}, nf("user_id", fidV2(FID(1, 7))), nf("price", monoFloats(1, 2)))
		}
		err = d.Append(&Batch{}, rec)
		want := `feature "user" (source "userid") is missing; the record has `
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), `(did you mean "user_id"?)`) {
			t.Fatalf("%s: err = %v", f, err)
		}
	}
}
