package instance

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	matrixpb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto"
	examplepb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/example"
	parserpb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/parser"
	tfframework "github.com/monolith-go/monolith/gen/pb/tensorflow/core/framework"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pytext"
)

// golden is testdata/example_batch_to_instance.golden.json: what the reference's
// get_example_batch_to_instance returned for testdata/example_batch.{pbtxt,lagrangex.pb} (run
// with lagrangex_header=True outside this repository): the serialized instances and their
// text_format.
type golden struct {
	InstancesHex  []string `json:"instances_hex"`
	InstancesText []string `json:"instances_text"`
}

func loadGolden(t *testing.T) golden {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "example_batch_to_instance.golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.InstancesHex) == 0 || len(g.InstancesHex) != len(g.InstancesText) {
		t.Fatalf("bad golden: %d instances, %d texts", len(g.InstancesHex), len(g.InstancesText))
	}
	return g
}

func TestExampleBatchToInstancesMatchesReference(t *testing.T) {
	g := loadGolden(t)
	for _, tc := range []struct {
		file   string
		format Format
		header Header
	}{
		{"example_batch.pbtxt", FormatPBTxt, Header{}},
		{"example_batch.lagrangex.pb", FormatPB, Header{Lagrangex: true}},
		// The same batch as written by Python's json_format.MessageToJson.
		{"example_batch.json", FormatJSON, Header{}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			eb, err := ReadExampleBatch(filepath.Join("testdata", tc.file), tc.format, tc.header)
			if err != nil {
				t.Fatal(err)
			}
			insts, err := ExampleBatchToInstances(eb)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Marshal(insts)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(g.InstancesHex) {
				t.Fatalf("%d instances, the reference made %d", len(got), len(g.InstancesHex))
			}
			for i, b := range got {
				if h := hex.EncodeToString(b); h != g.InstancesHex[i] {
					t.Errorf("instance %d bytes:\n got %s\nwant %s", i, h, g.InstancesHex[i])
				}
				if txt := pytext.Format(insts[i]); txt != g.InstancesText[i] {
					t.Errorf("instance %d text:\n got %s\nwant %s", i, txt, g.InstancesText[i])
				}
			}
			tp := MakeTensorProto(got)
			if tp.GetDtype() != tfframework.DataType_DT_STRING || tp.GetTensorShape().GetDim()[0].GetSize() != int64(len(got)) {
				t.Errorf("tensor: %v", tp)
			}
		})
	}
}

func TestExampleBatchToInstancesErrors(t *testing.T) {
	fids := func(v ...uint64) *examplepb.Feature {
		return &examplepb.Feature{Type: &examplepb.Feature_FidV2List{FidV2List: &examplepb.FidList{Value: v}}}
	}
	bytesF := func(v ...[]byte) *examplepb.Feature {
		return &examplepb.Feature{Type: &examplepb.Feature_BytesList{BytesList: &examplepb.BytesList{Value: v}}}
	}
	for _, tc := range []struct {
		name string
		eb   *examplepb.ExampleBatch
		want string // "" = no error
	}{
		{"short individual list", &examplepb.ExampleBatch{BatchSize: 2, NamedFeatureList: []*examplepb.NamedFeatureList{
			{Name: "f_a", Feature: []*examplepb.Feature{fids(1)}}}}, `feature list "f_a" (INDIVIDUAL) has 1 features, batch_size is 2`},
		{"shared list with one feature", &examplepb.ExampleBatch{BatchSize: 2, NamedFeatureList: []*examplepb.NamedFeatureList{
			{Name: "f_a", Type: examplepb.FeatureListType_SHARED, Feature: []*examplepb.Feature{fids(1)}}}}, ""},
		{"empty shared list", &examplepb.ExampleBatch{BatchSize: 1, NamedFeatureList: []*examplepb.NamedFeatureList{
			{Name: "f_a", Type: examplepb.FeatureListType_SHARED}}}, `feature list "f_a" (SHARED) has 0 features`},
		{"line id without bytes", &examplepb.ExampleBatch{BatchSize: 1, NamedFeatureList: []*examplepb.NamedFeatureList{
			{Name: LineIDFeature, Feature: []*examplepb.Feature{bytesF()}}}}, `example 0: feature list "__LINE_ID__": no bytes_list value`},
		{"corrupt line id", &examplepb.ExampleBatch{BatchSize: 1, NamedFeatureList: []*examplepb.NamedFeatureList{
			{Name: LineIDFeature, Feature: []*examplepb.Feature{bytesF([]byte{0xff, 0xff})}}}}, `example 0: feature list "__LINE_ID__": parse line id`},
		{"negative batch size", &examplepb.ExampleBatch{BatchSize: -1}, "batch_size -1 is negative"},
		{"empty batch", &examplepb.ExampleBatch{}, ""},
		{"huge batch of shared lists", &examplepb.ExampleBatch{BatchSize: 1 << 30, NamedFeatureList: []*examplepb.NamedFeatureList{
			{Name: "f_a", Type: examplepb.FeatureListType_SHARED, Feature: []*examplepb.Feature{fids(1)}}}}, "batch_size 1073741824 is backed by no per-example feature list (at most 65536 without one)"},
		{"huge batch without lists", &examplepb.ExampleBatch{BatchSize: 1<<16 + 1}, "batch_size 65537 is backed by no per-example feature list"},
		{"largest unbacked batch", &examplepb.ExampleBatch{BatchSize: 1 << 16}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ExampleBatchToInstances(tc.eb)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("no error, want %q", tc.want)
			case tc.want != "" && (!strings.Contains(err.Error(), tc.want) || errkind.Of(err) != errkind.Value):
				t.Fatalf("error %q (kind %v), want %q of kind Value", err, errkind.Of(err), tc.want)
			}
		})
	}
}

func TestEmptyLineIDIsPresent(t *testing.T) {
	// Python's inst.line_id.ParseFromString(b"") leaves line_id set: it serializes as 2a 00.
	eb := &examplepb.ExampleBatch{BatchSize: 1, NamedFeatureList: []*examplepb.NamedFeatureList{{
		Name:    LineIDFeature,
		Feature: []*examplepb.Feature{{Type: &examplepb.Feature_BytesList{BytesList: &examplepb.BytesList{Value: [][]byte{{}}}}}},
	}}}
	insts, err := ExampleBatchToInstances(eb)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Marshal(insts)
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(b[0]); got != "2a00" {
		t.Fatalf("got %s, want 2a00", got)
	}
}

func u64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestReadRecord(t *testing.T) {
	payload := []byte("hello")
	rec := cat(u64(5), payload)
	for _, tc := range []struct {
		name   string
		h      Header
		input  []byte
		want   string
		errSub string
	}{
		{"plain", Header{}, rec, "hello", ""},
		{"lagrangex", Header{Lagrangex: true}, cat([]byte("12345678"), rec), "hello", ""},
		{"lagrangex ignores the others", Header{Lagrangex: true, HasSortID: true, KafkaDump: true}, cat([]byte("12345678"), rec), "hello", ""},
		{"sort id", Header{HasSortID: true}, cat(u64(3), []byte("abc"), rec), "hello", ""},
		{"kafka dump", Header{KafkaDump: true}, cat(u64(99), rec), "hello", ""},
		{"sort id and kafka dump", Header{HasSortID: true, KafkaDump: true}, cat(u64(2), []byte("ab"), u64(0), rec), "hello", ""},
		// A non-zero prefix is the aggregate sort id size: no separate sort id size follows.
		{"prefix is the sort id size", Header{KafkaDumpPrefix: true, HasSortID: true}, cat(u64(4), []byte("sort"), rec), "hello", ""},
		// A zero prefix is followed by a second size, and the sort id size is read again.
		{"zero prefix", Header{KafkaDumpPrefix: true, HasSortID: true}, cat(u64(0), u64(7), u64(2), []byte("ab"), rec), "hello", ""},
		{"prefix without sort id", Header{KafkaDumpPrefix: true}, cat(u64(9), rec), "hello", ""},
		{"empty record", Header{}, u64(0), "", ""},
		{"truncated payload", Header{}, cat(u64(10), payload), "", "truncated record of 10 bytes (got 5)"},
		{"truncated size", Header{}, []byte{1, 2, 3}, "", "truncated record size"},
		{"truncated header", Header{Lagrangex: true}, []byte("1234"), "", "truncated lagrangex header"},
		{"implausible size", Header{}, u64(1 << 63), "", "not plausible"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadRecord(bytes.NewReader(tc.input), tc.h)
			if tc.errSub != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errSub) || errkind.Of(err) != errkind.Value {
					t.Fatalf("error %v (kind %v), want one containing %q of kind Value", err, errkind.Of(err), tc.errSub)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("EOF before a record", func(t *testing.T) {
		for _, h := range []Header{{}, {Lagrangex: true}, {KafkaDumpPrefix: true}, {HasSortID: true}, {KafkaDump: true}} {
			if _, err := ReadRecord(bytes.NewReader(nil), h); !errors.Is(err, io.EOF) {
				t.Errorf("%+v: got %v, want io.EOF", h, err)
			}
		}
	})
	t.Run("records in sequence", func(t *testing.T) {
		r := bytes.NewReader(cat(u64(1), []byte("a"), u64(2), []byte("bc")))
		for _, want := range []string{"a", "bc"} {
			got, err := ReadRecord(r, Header{})
			if err != nil || string(got) != want {
				t.Fatalf("got %q, %v; want %q", got, err, want)
			}
		}
		if _, err := ReadRecord(r, Header{}); !errors.Is(err, io.EOF) {
			t.Fatalf("got %v, want io.EOF", err)
		}
	})
}

// TestRandomInstanceTensor ports tfs_client_test.test_get_instance_proto: 256 random instances
// as a DT_STRING (7) tensor of 256 elements.
func TestRandomInstanceTensor(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var vals [][]byte
	for range 256 {
		inst, err := RandomInstance(rng, nil, DefaultVocabSizes)
		if err != nil {
			t.Fatal(err)
		}
		if len(inst.GetFid()) != 30 {
			t.Fatalf("%d fids, want 30", len(inst.GetFid()))
		}
		for j, fid := range inst.GetFid() {
			slot, rest := fid>>54, fid&(1<<54-1)
			i := uint64(j / 5)
			if slot != i+1 || rest < i*5+1 || rest > i*5+5 {
				t.Fatalf("fid %d = slot %d, value %d: want slot %d, value in [%d, %d]", j, slot, rest, i+1, i*5+1, i*5+5)
			}
		}
		b, err := proto.Marshal(inst)
		if err != nil {
			t.Fatal(err)
		}
		vals = append(vals, b)
	}
	tp := MakeTensorProto(vals)
	if tp.GetDtype() != 7 || tp.GetTensorShape().GetDim()[0].GetSize() != 256 || len(tp.GetStringVal()) != 256 {
		t.Fatalf("tensor dtype %v, shape %v, %d values", tp.GetDtype(), tp.GetTensorShape(), len(tp.GetStringVal()))
	}
}

func TestRandomInstanceErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name         string
		slots, vocab []int
		want         string
	}{
		{"more slots than sizes", []int{1, 2, 3}, []int{5, 5}, "3 slots but 2 vocabulary sizes"},
		{"no sizes", nil, nil, "no vocabulary sizes"},
		{"zero size", []int{1}, []int{0}, "not positive"},
		{"slot too large", []int{1024}, []int{5}, "outside [0, 1024)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := RandomInstance(rng, tc.slots, tc.vocab)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	inst, err := RandomInstance(rng, []int{7}, []int{3, 9})
	if err != nil {
		t.Fatal(err)
	}
	// max(vocab) is 9, slot index 0: values in [1, 3].
	for _, fid := range inst.GetFid() {
		if fid>>54 != 7 || fid&(1<<54-1) < 1 || fid&(1<<54-1) > 3 {
			t.Fatalf("fid %x", fid)
		}
	}
}

func TestReadInstanceFormats(t *testing.T) {
	dir := t.TempDir()
	want := &parserpb.Instance{
		Fid:    []uint64{1, 2},
		Label:  []float32{0, 1},
		LineId: &matrixpb.LineId{Actions: []int32{1}},
		Feature: []*matrixpb.Feature{{
			Name: proto.String("a"), Fid: []uint64{3},
		}},
	}
	raw, err := proto.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"inst.json":  `{"fid": [1, "2"], "label": [0, 1], "line_id": {"actions": [1]}, "feature": [{"name": "a", "fid": [3]}]}`,
		"inst.pbtxt": "fid: 1\nfid: 2\nlabel: 0.0\nlabel: 1.0\nline_id {\n  actions: 1\n}\nfeature {\n  name: \"a\"\n  fid: 3\n}\n",
		"inst.pb":    string(cat(u64(uint64(len(raw))), raw)),
		"bad.json":   `{"fid": ["x"]}`,
		"bad.pbtxt":  "fid: 1\nnot_a_field: 2\n",
		"empty.pb":   "",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		file   string
		format Format
		want   string
	}{
		{"inst.json", FormatJSON, ""},
		{"inst.pbtxt", FormatPBTxt, ""},
		{"inst.pb", FormatPB, ""},
		{"bad.json", FormatJSON, "bad.json as parser.proto.Instance (json)"},
		{"bad.pbtxt", FormatPBTxt, "not_a_field"},
		{"empty.pb", FormatPB, "empty.pb: no record in the file"},
		{"missing.pbtxt", FormatPBTxt, "missing.pbtxt"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			got, err := ReadInstance(filepath.Join(dir, tc.file), tc.format, Header{})
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("error %v, want %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
			vals, err := RepeatInstance(got, 3)
			if err != nil || len(vals) != 3 || !bytes.Equal(vals[2], raw) {
				t.Fatalf("repeat: %d values, %v", len(vals), err)
			}
		})
	}
}

func TestReadInstanceRecords(t *testing.T) {
	dir := t.TempDir()
	var file []byte
	for i := range 3 {
		b, err := proto.Marshal(&parserpb.Instance{Fid: []uint64{uint64(i)}})
		if err != nil {
			t.Fatal(err)
		}
		file = append(file, cat([]byte("hdr-8byt"), u64(uint64(len(b))), b)...)
	}
	path := filepath.Join(dir, "insts.dump")
	if err := os.WriteFile(path, file, 0o644); err != nil {
		t.Fatal(err)
	}
	vals, err := ReadInstanceRecords(path, 2, Header{Lagrangex: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(vals) != 2 {
		t.Fatalf("%d values", len(vals))
	}
	var second parserpb.Instance
	if err := proto.Unmarshal(vals[1], &second); err != nil || second.GetFid()[0] != 1 {
		t.Fatalf("second instance %v, %v", &second, err)
	}
	if _, err := ReadInstanceRecords(path, 4, Header{Lagrangex: true}); err == nil || !strings.Contains(err.Error(), "4 instances wanted, the file has 3") {
		t.Fatalf("error %v", err)
	}
	if _, err := ReadInstanceRecords(path, 1, Header{}); err == nil || !strings.Contains(err.Error(), "insts.dump: instance 0") {
		t.Fatalf("wrong header flags: error %v", err)
	}
}

func TestParseFormat(t *testing.T) {
	for _, s := range []string{"pb", "pbtxt", "json"} {
		if f, err := ParseFormat(s); err != nil || string(f) != s {
			t.Errorf("%s: %v %v", s, f, err)
		}
	}
	if _, err := ParseFormat("yaml"); err == nil || errkind.Of(err) != errkind.Value {
		t.Errorf("yaml: %v", err)
	}
}
