// Package batch turns Monolith Example records into the batches a training model consumes: labels,
// dense feature values and the feature ids (fids) of the sparse features. A Reader reads them from
// record files through pkg/dataset and is an estimator input.
package batch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	examplepb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/example"
	"github.com/monolith-go/monolith/pkg/dataset"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// DenseFeature is a float_list feature of a fixed number of values.
type DenseFeature struct {
	Name string
	Dim  int
	// Default (Dim values) is the value of an example that lacks the feature; nil: it must have
	// it.
	Default []float32
}

// Schema names the features a batch holds.
type Schema struct {
	// Dense features are concatenated, in this order, into each example's dense row.
	Dense []DenseFeature
	// Sparse are fid_v2_list features; an example may lack any of them: no ids, or
	// SparseDefault's.
	Sparse []string
	// SparseDefault are the fids of an example that lacks a sparse feature, by name (a schema's
	// optional features' defaults).
	SparseDefault map[string][]uint64
}

// DenseDim is the length of an example's dense row.
func (s Schema) DenseDim() int {
	n := 0
	for _, d := range s.Dense {
		n += d.Dim
	}
	return n
}

// Batch is a batch of examples.
type Batch struct {
	// Labels holds each example's first label.
	Labels []float32
	// Dense holds each example's dense row (Schema.DenseDim values), row-major.
	Dense    []float32
	DenseDim int
	// Fids holds each example's fids, the sparse features' in schema order.
	Fids [][]uint64
	// EndsEpoch is, on a Stream's batch whose examples finish an epoch, that epoch (from 1);
	// else 0.
	EndsEpoch int
	// Epoch is, on a Stream's batch, the epoch (from 1) of its last example.
	Epoch int
	// Position is, on a batch of a stream source (Kafka), where the source is once the batch
	// is trained on (the next offset of each partition), as JSON: what a checkpoint records so
	// that a restored run reads on from there. Nil for files (their position is an example
	// count).
	Position []byte
	// NewestEventTime is, on a stream's batch, the newest event time of its records (zero when
	// they carry none): it travels with the batch's embedding updates to the parameter servers
	// and on through parameter sync (freshness, pkg/eventtime).
	NewestEventTime time.Time
}

// Size is the number of examples.
func (b *Batch) Size() int { return len(b.Labels) }

// Row is example i's dense row.
func (b *Batch) Row(i int) []float32 { return b.Dense[i*b.DenseDim : (i+1)*b.DenseDim] }

// Append adds ex to b. A missing label or dense feature, or a dense feature of the wrong length or
// type, is an error of kind Value.
func (s Schema) Append(b *Batch, ex *examplepb.Example) error {
	if len(ex.GetLabel()) == 0 {
		return errkind.New(errkind.Value, "batch: example has no label")
	}
	feats := make(map[string]*examplepb.Feature, len(ex.GetNamedFeature()))
	for _, nf := range ex.GetNamedFeature() {
		feats[nf.GetName()] = nf.GetFeature()
	}
	b.DenseDim = s.DenseDim()
	n := len(b.Dense)
	for _, d := range s.Dense {
		f, ok := feats[d.Name]
		if !ok && d.Default != nil {
			b.Dense = append(b.Dense, d.Default...)
			continue
		}
		if !ok || f.GetFloatList() == nil {
			b.Dense = b.Dense[:n]
			return errkind.New(errkind.Value, "batch: example has no float_list feature %q", d.Name)
		}
		v := f.GetFloatList().GetValue()
		if len(v) != d.Dim {
			b.Dense = b.Dense[:n]
			return errkind.New(errkind.Value, "batch: feature %q has %d values, want %d", d.Name, len(v), d.Dim)
		}
		b.Dense = append(b.Dense, v...)
	}
	var fids []uint64
	for _, name := range s.Sparse {
		if f, ok := feats[name]; ok {
			fids = append(fids, f.GetFidV2List().GetValue()...)
		} else {
			fids = append(fids, s.SparseDefault[name]...)
		}
	}
	b.Labels = append(b.Labels, ex.GetLabel()[0])
	b.Fids = append(b.Fids, fids)
	return nil
}

// Reader reads batches of Examples from record files.
type Reader struct {
	r      *dataset.Reader
	size   int
	dim    int
	append func(b *Batch, rec dataset.Record) error
}

// Open reads the Example records of files (dataset.OpenFiles with opts) in batches of size.
func Open(files []string, opts dataset.Options, schema Schema, size int) (*Reader, error) {
	lagrangex := opts.Framing == dataset.PBFrames && opts.Header.Lagrangex
	return open(files, opts, size, schema.DenseDim(), func(b *Batch, rec dataset.Record) error {
		ex := &examplepb.Example{}
		if err := dataset.Parse(rec, ex, lagrangex); err != nil {
			return err
		}
		return schema.Append(b, ex)
	})
}

// OpenDecoded reads the records of files (dataset.OpenFiles with opts) in batches of size, each
// record decoded by dec.
func OpenDecoded(files []string, opts dataset.Options, dec *Decoder, size int) (*Reader, error) {
	return open(files, opts, size, dec.DenseDim(), func(b *Batch, rec dataset.Record) error {
		return dec.Append(b, rec.Data)
	})
}

func open(files []string, opts dataset.Options, size, dim int, appendFn func(*Batch, dataset.Record) error) (*Reader, error) {
	if size <= 0 {
		return nil, errkind.New(errkind.Value, "batch: batch size %d is not positive", size)
	}
	r, err := dataset.OpenFiles(files, opts)
	if err != nil {
		return nil, err
	}
	return &Reader{r: r, size: size, dim: dim, append: appendFn}, nil
}

// RecordError is a record that is not an Example of the schema: it names the record's file and
// offset, and what is wrong (Err, of kind Value).
type RecordError struct {
	File   string
	Offset int64
	Err    error
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("%s at offset %d: %v", e.File, e.Offset, e.Err)
}

func (e *RecordError) Unwrap() error { return e.Err }

// Next returns the next batch: size examples, fewer at the end of the input, and io.EOF after the
// last. A record that is not an Example of the schema is a *RecordError.
func (r *Reader) Next(ctx context.Context) (*Batch, error) {
	b := &Batch{DenseDim: r.dim}
	for b.Size() < r.size {
		rec, err := r.r.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if err := r.append(b, rec); err != nil {
			return nil, &RecordError{File: rec.File, Offset: rec.Offset, Err: err}
		}
	}
	if b.Size() == 0 {
		return nil, io.EOF
	}
	return b, nil
}

// Close closes the files.
func (r *Reader) Close() error { return r.r.Close() }
