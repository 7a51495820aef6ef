package batch

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	examplepb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/example"
	tfexamplepb "github.com/monolith-go/monolith/gen/pb/tensorflow/core/example"
	"github.com/monolith-go/monolith/pkg/dataset"
)

// benchRecords are n examples of the demo's shape (4 slots of 1-3 ids, 4 dense values, a label),
// serialized as Monolith Examples and as tf.train.Examples.
func benchRecords(n int) (inputs func(Format) Inputs, mono, tfex [][]byte) {
	const slots, dense = 4, 4
	r := rand.New(rand.NewPCG(1, 2))
	for range n {
		m := &examplepb.Example{Label: []float32{float32(r.IntN(2))}}
		t := &tfexamplepb.Example{Features: &tfexamplepb.Features{Feature: map[string]*tfexamplepb.Feature{
			"label": {Kind: &tfexamplepb.Feature_FloatList{FloatList: &tfexamplepb.FloatList{Value: m.Label}}},
		}}}
		for s := 1; s <= slots; s++ {
			var fids []uint64
			var ids []int64
			for range 1 + r.IntN(3) {
				id := r.Int64N(1 << 40)
				ids, fids = append(ids, id), append(fids, FID(s, uint64(id)))
			}
			name := fmt.Sprintf("slot_%d", s)
			m.NamedFeature = append(m.NamedFeature, &examplepb.NamedFeature{Name: name, Feature: &examplepb.Feature{Type: &examplepb.Feature_FidV2List{FidV2List: &examplepb.FidList{Value: fids}}}})
			t.Features.Feature[name] = &tfexamplepb.Feature{Kind: &tfexamplepb.Feature_Int64List{Int64List: &tfexamplepb.Int64List{Value: ids}}}
		}
		vals := make([]float32, dense)
		for i := range vals {
			vals[i] = float32(r.NormFloat64())
		}
		m.NamedFeature = append(m.NamedFeature, &examplepb.NamedFeature{Name: "dense", Feature: &examplepb.Feature{Type: &examplepb.Feature_FloatList{FloatList: &examplepb.FloatList{Value: vals}}}})
		t.Features.Feature["dense"] = &tfexamplepb.Feature{Kind: &tfexamplepb.Feature_FloatList{FloatList: &tfexamplepb.FloatList{Value: vals}}}
		mb, err := proto.Marshal(m)
		if err != nil {
			panic(err)
		}
		tb, err := proto.MarshalOptions{Deterministic: true}.Marshal(t)
		if err != nil {
			panic(err)
		}
		mono, tfex = append(mono, mb), append(tfex, tb)
	}
	inputs = func(f Format) Inputs {
		in := Inputs{Format: f, Label: LabelInput{Source: "label"}, Dense: []DenseInput{{Name: "dense", Source: "dense", Dim: dense}}}
		for s := 1; s <= slots; s++ {
			name := fmt.Sprintf("slot_%d", s)
			in.Sparse = append(in.Sparse, SparseInput{Name: name, Source: name, Slot: s})
		}
		return in
	}
	return inputs, mono, tfex
}

// BenchmarkDecodeTFExampleVsMonolith decodes batches of 256 examples of the same data written as
// tf.train.Examples and as Monolith Examples, alternating batch by batch so that the machine's
// speed cancels out, and reports both rates and tf_over_monolith (the floor: 0.8).
func BenchmarkDecodeTFExampleVsMonolith(b *testing.B) {
	const size = 256
	inputs, mono, tfex := benchRecords(size * 16)
	dm, err := NewDecoder(inputs(Monolith))
	if err != nil {
		b.Fatal(err)
	}
	dt, err := NewDecoder(inputs(TFExample))
	if err != nil {
		b.Fatal(err)
	}
	decode := func(d *Decoder, recs [][]byte, at int) time.Duration {
		start := time.Now()
		bt := &Batch{}
		for _, rec := range recs[at : at+size] {
			if err := d.Append(bt, rec); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	var tm, tt time.Duration
	b.ResetTimer()
	for i := range b.N {
		at := (i % 16) * size
		tm += decode(dm, mono, at)
		tt += decode(dt, tfex, at)
	}
	n := float64(b.N * size)
	b.ReportMetric(n/tm.Seconds(), "monolith_examples/s")
	b.ReportMetric(n/tt.Seconds(), "tf_examples/s")
	b.ReportMetric(tm.Seconds()/tt.Seconds(), "tf_over_monolith")
}

// BenchmarkStreamVsReader reads the same file of Monolith Examples (the demo's shape) through a
// Stream with a Decoder (the trainer's input now) and through a Reader with Schema.Append (its
// input before), batch by batch alternately, and reports both rates and stream_over_reader.
func BenchmarkStreamVsReader(b *testing.B) {
	const size = 256
	inputs, mono, _ := benchRecords(size * 64)
	path := filepath.Join(b.TempDir(), "mono.tfrecord")
	w, err := dataset.CreateFile(path, dataset.NoCompression)
	if err != nil {
		b.Fatal(err)
	}
	for _, rec := range mono {
		if err := w.Write(rec); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	in := inputs(Monolith)
	schema := Schema{Dense: []DenseFeature{{Name: "dense", Dim: 4}}}
	for _, s := range in.Sparse {
		schema.Sparse = append(schema.Sparse, s.Name)
	}
	const epochs = 1000
	s, err := OpenStream(StreamConfig{Files: []string{path}, NewDecoder: func() (*Decoder, error) { return NewDecoder(SchemaInputs(schema)) },
		Epochs: epochs, BatchSize: size})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	r, err := Open(slices.Repeat([]string{path}, epochs), dataset.Options{}, schema, size)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	var ts, tr time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if _, err := s.Next(ctx); err != nil {
			b.Fatal(err)
		}
		ts += time.Since(start)
		start = time.Now()
		if _, err := r.Next(ctx); err != nil {
			b.Fatal(err)
		}
		tr += time.Since(start)
	}
	n := float64(b.N * size)
	b.ReportMetric(n/ts.Seconds(), "stream_examples/s")
	b.ReportMetric(n/tr.Seconds(), "reader_examples/s")
	b.ReportMetric(tr.Seconds()/ts.Seconds(), "stream_over_reader")
}
