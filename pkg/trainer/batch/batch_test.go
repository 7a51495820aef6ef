package batch

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	examplepb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/example"
	"github.com/monolith-go/monolith/pkg/dataset"
	"github.com/monolith-go/monolith/pkg/errkind"
)

func floats(name string, v ...float32) *examplepb.NamedFeature {
	return &examplepb.NamedFeature{Name: name, Feature: &examplepb.Feature{Type: &examplepb.Feature_FloatList{FloatList: &examplepb.FloatList{Value: v}}}}
}

func fids(name string, v ...uint64) *examplepb.NamedFeature {
	return &examplepb.NamedFeature{Name: name, Feature: &examplepb.Feature{Type: &examplepb.Feature_FidV2List{FidV2List: &examplepb.FidList{Value: v}}}}
}

var schema = Schema{Dense: []DenseFeature{{Name: "a", Dim: 2}, {Name: "b", Dim: 1}}, Sparse: []string{"s1", "s2"}}

func TestAppend(t *testing.T) {
	tests := []struct {
		name    string
		ex      *examplepb.Example
		want    Batch
		wantErr string
	}{
		{name: "full", ex: &examplepb.Example{Label: []float32{1, 0}, NamedFeature: []*examplepb.NamedFeature{
			fids("s2", 7), floats("b", 3), floats("a", 1, 2), fids("s1", 5, 6), fids("other", 9)}},
			want: Batch{Labels: []float32{1}, Dense: []float32{1, 2, 3}, DenseDim: 3, Fids: [][]uint64{{5, 6, 7}}}},
		{name: "a sparse feature missing", ex: &examplepb.Example{Label: []float32{0}, NamedFeature: []*examplepb.NamedFeature{
			floats("a", 1, 2), floats("b", 3)}},
			want: Batch{Labels: []float32{0}, Dense: []float32{1, 2, 3}, DenseDim: 3, Fids: [][]uint64{nil}}},
		{name: "no label", ex: &examplepb.Example{NamedFeature: []*examplepb.NamedFeature{floats("a", 1, 2), floats("b", 3)}}, wantErr: "no label"},
		{name: "dense missing", ex: &examplepb.Example{Label: []float32{0}, NamedFeature: []*examplepb.NamedFeature{floats("a", 1, 2)}}, wantErr: `no float_list feature "b"`},
		{name: "dense too short", ex: &examplepb.Example{Label: []float32{0}, NamedFeature: []*examplepb.NamedFeature{floats("a", 1), floats("b", 3)}}, wantErr: `"a" has 1 values, want 2`},
		{name: "dense of fids", ex: &examplepb.Example{Label: []float32{0}, NamedFeature: []*examplepb.NamedFeature{fids("a", 1, 2), floats("b", 3)}}, wantErr: `no float_list feature "a"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b Batch
			err := schema.Append(&b, tc.ex)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || errkind.Of(err) != errkind.Value {
					t.Fatalf("err = %v, want a Value error containing %q", err, tc.wantErr)
				}
				if b.Size() != 0 || len(b.Dense) != 0 {
					t.Errorf("a failed Append left %+v", b)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(b, tc.want) {
				t.Errorf("batch %+v, want %+v", b, tc.want)
			}
		})
	}
}

func writeExamples(t *testing.T, path string, n int, extra []byte) {
	t.Helper()
	w, err := dataset.CreateFile(path, dataset.NoCompression)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		ex := &examplepb.Example{Label: []float32{float32(i % 2)}, NamedFeature: []*examplepb.NamedFeature{
			floats("a", float32(i), 0), floats("b", 1), fids("s1", uint64(i))}}
		data, err := proto.Marshal(ex)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if extra != nil {
		if err := w.Write(extra); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestReader(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p1, p2 := filepath.Join(dir, "1.tfrecord"), filepath.Join(dir, "2.tfrecord")
	writeExamples(t, p1, 5, nil)
	writeExamples(t, p2, 4, nil)
	r, err := Open([]string{p1, p2}, dataset.Options{}, schema, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var sizes []int
	var firsts []float32
	for {
		b, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, b.Size())
		firsts = append(firsts, b.Row(0)[0])
	}
	// Batches run across files; the last one is short.
	if !reflect.DeepEqual(sizes, []int{4, 4, 1}) || !reflect.DeepEqual(firsts, []float32{0, 4, 3}) {
		t.Errorf("batch sizes %v, first dense values %v; want [4 4 1], [0 4 3]", sizes, firsts)
	}
	if _, err := r.Next(ctx); !errors.Is(err, io.EOF) {
		t.Errorf("after the end: %v, want io.EOF", err)
	}
	if _, err := Open([]string{p1}, dataset.Options{}, schema, 0); err == nil {
		t.Error("batch size 0 accepted")
	}
}

// A record that is not an Example of the schema is an error naming the file and the offset.
func TestReaderBadRecord(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	tests := []struct {
		name  string
		extra []byte
		want  string
	}{
		{"not a proto", []byte{0xff, 0xff, 0xff}, "parse monolith.io.proto.Example"},
		{"not of the schema", mustMarshal(t, &examplepb.Example{Label: []float32{1}}), `no float_list feature "a"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_"))
			writeExamples(t, p, 2, tc.extra)
			good, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			offset := good.Size() - int64(len(tc.extra)) - 16 // the extra record's header and CRCs
			r, err := Open([]string{p}, dataset.Options{}, schema, 10)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			_, err = r.Next(ctx)
			if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), tc.want) ||
				!strings.Contains(err.Error(), "offset "+strconv.FormatInt(offset, 10)) {
				t.Fatalf("err = %v, want one naming %s at offset %d: %s", err, p, offset, tc.want)
			}
		})
	}
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAppendDefaults: a schema's defaults stand in for the features an example lacks (what the
// trainer's decoder gave the same example, as the export keeps them for serving).
func TestAppendDefaults(t *testing.T) {
	s := Schema{Dense: []DenseFeature{{Name: "a", Dim: 2, Default: []float32{7, 8}}}, Sparse: []string{"s1", "s2"},
		SparseDefault: map[string][]uint64{"s2": {2<<48 | 9}}}
	b := &Batch{}
	if err := s.Append(b, &examplepb.Example{Label: []float32{1}, NamedFeature: []*examplepb.NamedFeature{fids("s1", 1<<48|3)}}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(b.Dense, []float32{7, 8}) || !slices.Equal(b.Fids[0], []uint64{1<<48 | 3, 2<<48 | 9}) {
		t.Fatalf("batch %+v", b)
	}
}
