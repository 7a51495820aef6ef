package instance

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	examplepb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/example"
	parserpb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/parser"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// The fuzz targets of the readers tfs_client uses: framed record dumps (FrameReader, ReadRecord,
// ReadInstanceRecords) and the ExampleBatch to Instance conversion. Run one with
//
//	go test ./pkg/instance -run='^$' -fuzz='^FuzzFrameReader$' -fuzztime=60s

func fzHeader(flags uint8) Header {
	return Header{Lagrangex: flags&1 != 0, KafkaDumpPrefix: flags&2 != 0, HasSortID: flags&4 != 0, KafkaDump: flags&8 != 0}
}

func fzU64(b []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(b, v) }

// FuzzFrameReader: any input reads as a sequence of frames ending in io.EOF exactly at the end of the
// input, or in a sticky *FrameError at the offset where the bad frame starts; frame offsets are
// where each frame starts; ReadRecord reads the same records.
func FuzzFrameReader(f *testing.F) {
	if b, err := os.ReadFile("testdata/example_batch.lagrangex.pb"); err == nil {
		f.Add(b, uint8(1))
	} else {
		f.Fatal(err)
	}
	f.Add(fzU64(fzU64(nil, 1), 0x61), uint8(0))
	f.Add(append(fzU64(fzU64(nil, 2), 1), "ab\x01\x00\x00\x00\x00\x00\x00\x00x"...), uint8(6))
	f.Add(fzU64(nil, FallbackSize), uint8(0))
	f.Add(fzU64(fzU64(nil, 0), 1<<63), uint8(8))
	f.Add([]byte{1, 2, 3}, uint8(15))
	f.Fuzz(func(t *testing.T, data []byte, flags uint8) {
		h := fzHeader(flags)
		fr := NewFrameReader(bytes.NewReader(data), h)
		rr := bytes.NewReader(data)
		var end int64
		for {
			start := fr.Offset()
			fm, err := fr.Next()
			if err != nil {
				if errors.Is(err, io.EOF) {
					if start != int64(len(data)) {
						t.Fatalf("EOF at %d of %d bytes", start, len(data))
					}
				} else {
					var fe *FrameError
					if !errors.As(err, &fe) || fe.Offset != start || start > int64(len(data)) {
						t.Fatalf("error %v (%T) for the frame at %d", err, err, start)
					}
					if errkind.Of(err) == errkind.Unknown && !errors.Is(err, io.ErrUnexpectedEOF) {
						t.Fatalf("error without a kind: %v", err)
					}
				}
				if _, again := fr.Next(); again != err {
					t.Fatalf("error not sticky: %v then %v", err, again)
				}
				if rec, rerr := ReadRecord(rr, h); !errors.Is(err, ErrFallbackSize) && (rerr == nil) {
					t.Fatalf("ReadRecord read %q where FrameReader failed: %v", rec, err)
				}
				return
			}
			if fm.Offset != start || start < end || fr.Offset() <= start || fr.Offset() > int64(len(data)) {
				t.Fatalf("frame at %d (reader at %d, then %d, last end %d)", fm.Offset, start, fr.Offset(), end)
			}
			if int64(len(fm.Data)) > fr.Offset()-start {
				t.Fatalf("frame of %d bytes from %d input bytes", len(fm.Data), fr.Offset()-start)
			}
			if !h.Lagrangex && fm.Lagrangex != 0 {
				t.Fatalf("lagrangex header %x without the flag", fm.Lagrangex)
			}
			end = fr.Offset()
			rec, err := ReadRecord(rr, h)
			if err != nil || !bytes.Equal(rec, fm.Data) {
				t.Fatalf("ReadRecord = %q, %v; FrameReader read %q", rec, err, fm.Data)
			}
		}
	})
}

// fzFrame writes one frame of rec with the headers h says (the sort id and the kafka prefix forms
// chosen by the arguments).
func fzFrame(h Header, lgx uint64, sortID []byte, prefixIsSize bool, rec []byte) []byte {
	var b []byte
	if h.Lagrangex {
		b = fzU64(b, lgx)
	} else {
		aggregate := false
		if h.KafkaDumpPrefix {
			if prefixIsSize && h.HasSortID && len(sortID) > 0 {
				b = fzU64(b, uint64(len(sortID)))
				aggregate = true
			} else {
				b = fzU64(fzU64(b, 0), lgx) // the second size is read, then replaced by the sort id's
			}
		}
		if h.HasSortID {
			if !aggregate {
				b = fzU64(b, uint64(len(sortID)))
			}
			b = append(b, sortID...)
		}
		if h.KafkaDump {
			b = fzU64(b, lgx)
		}
	}
	return append(fzU64(b, uint64(len(rec))), rec...)
}

// FuzzFrameRoundTrip: records written with any headers read back whole, with their offsets and
// lagrangex headers; ReadInstanceRecords reads the same frames from a file (as Instances).
func FuzzFrameRoundTrip(f *testing.F) {
	f.Add([]byte("abcdef"), []byte{1, 0, 3}, []byte("sid"), uint64(0x1234_5678_9abc_de07), uint8(1), true)
	f.Add([]byte{}, []byte{}, []byte{}, uint64(0), uint8(6), false)
	f.Add([]byte("\x08\x01\x08\x02"), []byte{2, 2}, []byte("x"), uint64(5), uint8(14), true)
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, payload, sizes, sortID []byte, lgx uint64, flags uint8, prefixIsSize bool) {
		h := fzHeader(flags)
		var recs [][]byte
		for i := 0; len(payload) > 0 || (i < len(sizes) && i < 4); i++ {
			n := len(payload)
			if i < len(sizes) {
				n = min(n, int(sizes[i]))
			}
			recs = append(recs, payload[:n])
			payload = payload[n:]
		}
		var stream []byte
		var offsets []int64
		for _, r := range recs {
			offsets = append(offsets, int64(len(stream)))
			stream = append(stream, fzFrame(h, lgx, sortID, prefixIsSize, r)...)
		}
		fr := NewFrameReader(bufio.NewReader(bytes.NewReader(stream)), h)
		for i, r := range recs {
			fm, err := fr.Next()
			if err != nil || !bytes.Equal(fm.Data, r) || fm.Offset != offsets[i] || (h.Lagrangex && fm.Lagrangex != lgx) {
				t.Fatalf("frame %d: %+v, %v; wrote %q at %d", i, fm, err, r, offsets[i])
			}
		}
		if _, err := fr.Next(); !errors.Is(err, io.EOF) || fr.Offset() != int64(len(stream)) {
			t.Fatalf("after %d frames: %v at %d of %d", len(recs), err, fr.Offset(), len(stream))
		}

		path := filepath.Join(dir, "records.bin")
		if err := os.WriteFile(path, stream, 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := ReadInstanceRecords(path, len(recs), h)
		insts := make([]*parserpb.Instance, len(recs))
		for i, r := range recs {
			insts[i] = &parserpb.Instance{}
			if perr := proto.Unmarshal(r, insts[i]); perr != nil {
				if err == nil || errkind.Of(err) != errkind.Value {
					t.Fatalf("record %d %q is not an Instance (%v), yet read: %v", i, r, perr, err)
				}
				return
			}
		}
		if err != nil || len(got) != len(recs) {
			t.Fatalf("ReadInstanceRecords = %d records, %v; wrote %d", len(got), err, len(recs))
		}
		for i, inst := range insts {
			back := &parserpb.Instance{}
			if err := proto.Unmarshal(got[i], back); err != nil || !proto.Equal(back, inst) {
				t.Fatalf("record %d read as %x (%v)", i, got[i], err)
			}
		}
		if _, err := ReadInstanceRecords(path, len(recs)+1, h); err == nil || errkind.Of(err) != errkind.Value {
			t.Fatalf("one record more than the file holds: %v", err)
		}
	})
}

// maxFuzzBatch bounds the batch sizes FuzzExampleBatchToInstances converts when no feature list
// bounds them (the reference, too, makes batch_size instances whatever the file holds).
const maxFuzzBatch = 4096

// FuzzExampleBatchToInstances: any ExampleBatch converts to batch_size Instances or to an error of
// kind Value (never a panic); each Instance holds the example's labels and one feature per
// non-empty feature list of another name, named after it.
func FuzzExampleBatchToInstances(f *testing.F) {
	for _, name := range []string{"example_batch.pbtxt", "reference_feature_list_batch.pbtxt", "reference_profile_batch.pbtxt"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		eb := &examplepb.ExampleBatch{}
		if err := prototext.Unmarshal(b, eb); err != nil {
			f.Fatalf("%s: %v", name, err)
		}
		wire, err := proto.Marshal(eb)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(wire)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		eb := &examplepb.ExampleBatch{}
		if proto.Unmarshal(b, eb) != nil {
			return
		}
		n := int(eb.GetBatchSize())
		bounded := false
		for _, l := range eb.GetNamedFeatureList() {
			bounded = bounded || l.GetType() != examplepb.FeatureListType_SHARED
		}
		if n > maxFuzzBatch && !bounded {
			return
		}
		insts, err := ExampleBatchToInstances(eb)
		if err != nil {
			if errkind.Of(err) != errkind.Value {
				t.Fatalf("error of kind %v: %v", errkind.Of(err), err)
			}
			return
		}
		if len(insts) != n {
			t.Fatalf("%d instances for batch_size %d", len(insts), n)
		}
		for i, inst := range insts {
			var labels []float32
			names := map[string]bool{}
			for _, l := range eb.GetNamedFeatureList() {
				fe := l.GetFeature()[0]
				if l.GetType() != examplepb.FeatureListType_SHARED {
					fe = l.GetFeature()[i]
				}
				switch l.GetName() {
				case LabelFeature:
					labels = append(labels, fe.GetFloatList().GetValue()...)
				case LineIDFeature:
				default:
					names[l.GetName()] = true
				}
			}
			if len(inst.GetLabel()) != len(labels) {
				t.Fatalf("instance %d: %d labels, want %d", i, len(inst.GetLabel()), len(labels))
			}
			for _, feat := range inst.GetFeature() {
				if !names[feat.GetName()] {
					t.Fatalf("instance %d: feature %q from no list", i, feat.GetName())
				}
			}
			if _, err := proto.Marshal(inst); err != nil {
				t.Fatalf("instance %d does not serialize: %v", i, err)
			}
		}
	})
}
