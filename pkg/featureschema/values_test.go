package featureschema

import (
	"hash/fnv"
	"math"
	"reflect"
	"strings"
	"testing"

	featureschemaspec "github.com/monolith-go/monolith/gen/spec/go/feature_schema"
)

func ptr[T any](v T) *T { return &v }

func TestHashString(t *testing.T) {
	for _, s := range []string{"", "a", "user_42", "日本語", strings.Repeat("x", 1000)} {
		h := fnv.New64a()
		h.Write([]byte(s))
		if got, want := HashString(s), h.Sum64(); got != want {
			t.Errorf("HashString(%q) = %#x, want FNV-1a 64 %#x", s, got, want)
		}
		if id := StringID(s); id < 0 || uint64(id) != HashString(s)&IDMask {
			t.Errorf("StringID(%q) = %d: not the hash's low 48 bits", s, id)
		}
	}
	// Pinned: trained embeddings depend on these ids.
	if got := HashString("a"); got != 0xaf63dc4c8601ec8c {
		t.Errorf(`HashString("a") = %#x, want 0xaf63dc4c8601ec8c`, got)
	}
}

func TestFID(t *testing.T) {
	tests := []struct {
		slot int
		id   int64
		want uint64
	}{
		{0, 0, 0},
		{1, 5, 1<<48 | 5},
		{32767, 1<<48 - 1, 32767<<48 | (1<<48 - 1)},
		{2, 1 << 48, 2 << 48},        // bits above 48 are dropped
		{3, -1, 3<<48 | (1<<48 - 1)}, // two's complement low bits
		{4, 1<<50 | 7, 4<<48 | 7},
	}
	for _, tc := range tests {
		if got := FID(tc.slot, tc.id); got != tc.want {
			t.Errorf("FID(%d, %d) = %#x, want %#x", tc.slot, tc.id, got, tc.want)
		}
	}
}

func TestLabelApply(t *testing.T) {
	binary := Label{}
	threshold := Label{Label: featureschemaspec.Label{Threshold: ptr(4.0)}}
	positive := Label{Label: featureschemaspec.Label{Positive: []string{"4", " 5 "}}}
	tests := []struct {
		name  string
		label Label
		in    float64
		want  float32
		err   string
	}{
		{"binary 0", binary, 0, 0, ""},
		{"binary 1", binary, 1, 1, ""},
		{"binary 2", binary, 2, 0, "label 2 is neither 0 nor 1"},
		{"binary 0.5", binary, 0.5, 0, "label 0.5 is neither 0 nor 1"},
		{"binary nan", binary, math.NaN(), 0, "label NaN is not a finite number"},
		{"threshold below", threshold, 3.9, 0, ""},
		{"threshold equal", threshold, 4, 1, ""},
		{"threshold above", threshold, 5, 1, ""},
		{"threshold inf", threshold, math.Inf(1), 0, "label +Inf is not a finite number"},
		{"positive 4", positive, 4, 1, ""},
		{"positive 5", positive, 5, 1, ""},
		{"positive 3", positive, 3, 0, ""},
		{"positive -inf", positive, math.Inf(-1), 0, "not a finite number"},
		{"positive unparsable", Label{Label: featureschemaspec.Label{Positive: []string{"x"}}}, 1, 0, `label.positive: "x" is not a finite number`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.label.Apply(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Apply(%v) = %v, %v; want error %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Apply(%v) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
	// A parsed schema's label applies its (cached) positive values the same way.
	s, err := Parse([]byte("label: {positive: [2, 3]}\nfeatures: [{name: a, kind: dense, dim: 1}]\n"), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if v, err := s.Label.Apply(3); err != nil || v != 1 {
		t.Errorf("parsed positive Apply(3) = %v, %v", v, err)
	}
	if r := s.Label.Rule(); r != "1 if value is one of 2, 3, else 0" {
		t.Errorf("Rule() = %q", r)
	}
}

func TestParseValues(t *testing.T) {
	ints := Feature{featureschemaspec.Feature{Name: "u", Kind: SparseInt, Slot: ptr(1)}}
	strs := Feature{featureschemaspec.Feature{Name: "s", Kind: SparseString, Slot: ptr(2), Separator: "|"}}
	dense := Feature{featureschemaspec.Feature{Name: "d", Kind: Dense, Dim: ptr(2)}}
	if got := ints.SplitCell(" 1; 2 ;3"); !reflect.DeepEqual(got, []string{"1", "2", "3"}) {
		t.Errorf("SplitCell = %q", got)
	}
	if got := strs.SplitCell("a|b"); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Errorf("SplitCell with | = %q", got)
	}
	if got := ints.SplitCell("  "); got != nil {
		t.Errorf("SplitCell of a blank cell = %q, want nil", got)
	}
	if got, err := ints.ParseIDs([]string{"1", "-2"}); err != nil || !reflect.DeepEqual(got, []int64{1, -2}) {
		t.Errorf("ParseIDs = %v, %v", got, err)
	}
	if _, err := ints.ParseIDs([]string{"1.5"}); err == nil || !strings.Contains(err.Error(), `"1.5" is not an integer id (sparse_int feature "u")`) {
		t.Errorf("ParseIDs(1.5) error = %v", err)
	}
	if got, err := strs.ParseIDs([]string{"a"}); err != nil || !reflect.DeepEqual(got, []int64{StringID("a")}) {
		t.Errorf("ParseIDs of strings = %v, %v", got, err)
	}
	if _, err := dense.ParseIDs([]string{"1"}); err == nil {
		t.Error("ParseIDs of a dense feature succeeded")
	}
	if got, err := dense.ParseFloats([]string{"1.5", "-2"}); err != nil || !reflect.DeepEqual(got, []float32{1.5, -2}) {
		t.Errorf("ParseFloats = %v, %v", got, err)
	}
	for _, bad := range [][]string{{"1"}, {"1", "x"}, {"1", "inf"}} {
		if _, err := dense.ParseFloats(bad); err == nil {
			t.Errorf("ParseFloats(%q) succeeded", bad)
		}
	}
	if _, err := ints.ParseFloats([]string{"1"}); err == nil {
		t.Error("ParseFloats of a sparse feature succeeded")
	}
	if _, err := ints.DefaultStrings(); err == nil {
		t.Error("DefaultStrings of a sparse_int feature succeeded")
	}
	if _, err := ints.DefaultFloats(); err == nil {
		t.Error("DefaultFloats of a sparse feature succeeded")
	}
	repeated := dense
	repeated.Default = []string{"7"}
	if got, err := repeated.DefaultFloats(); err != nil || !reflect.DeepEqual(got, []float32{7, 7}) {
		t.Errorf("one default repeated = %v, %v", got, err)
	}
	if got, err := dense.DefaultFloats(); got != nil || err != nil {
		t.Errorf("no default = %v, %v", got, err)
	}
}

func TestSuggest(t *testing.T) {
	keys := []string{"name", "kind", "slot", "source", "dim", "optional", "default", "separator", "pooling", "buckets"}
	tests := []struct{ name, want string }{
		{"slto", "slot"},    // a swap
		{"Slot", "slot"},    // case
		{"sorce", "source"}, // a deletion
		{"dimm", "dim"},     // an insertion
		{"seperator", "separator"},
		{"optinal", "optional"},
		{"zzzzzz", ""},
		{"x", ""}, // one letter: any edit is all of it
		{"", ""},
		{"bucket", "buckets"},
		{"pool", ""}, // 3 edits from pooling: too far
	}
	for _, tc := range tests {
		if got := Suggest(tc.name, keys); got != tc.want {
			t.Errorf("Suggest(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
	if got := Suggest("a", nil); got != "" {
		t.Errorf("Suggest without candidates = %q", got)
	}
	// Ties go to the earlier candidate.
	if got := Suggest("ab", []string{"ac", "ad"}); got != "ac" {
		t.Errorf("tie = %q, want ac", got)
	}
}

func TestValidateInCode(t *testing.T) {
	// A schema built in code has no places: errors name the path only.
	s := &Schema{Features: []Feature{
		{featureschemaspec.Feature{Name: "a", Kind: SparseInt, Slot: ptr(1)}},
		{featureschemaspec.Feature{Name: "b", Kind: SparseInt, Slot: ptr(1)}},
	}}
	err := s.Validate()
	if err == nil || err.Error() != `features[1].slot: slot 1 of "b" is already the slot of features[0] "a"` {
		t.Fatalf("Validate = %v", err)
	}
	s.Features[1].Slot = ptr(2)
	if err := s.Validate(); err != nil {
		t.Fatalf("Validate = %v", err)
	}
	s.Features[0].Kind = "nope"
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), `features[0].kind: "nope" is not one of`) {
		t.Fatalf("Validate of a bad kind = %v", err)
	}
	if err := (&Schema{}).Validate(); err == nil || err.Error() != "features: no features: a schema lists at least one" {
		t.Fatalf("Validate of no features = %v", err)
	}
}
